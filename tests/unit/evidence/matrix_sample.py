"""A passing (or failing) matrix evidence record as `gco.validation.report` writes one: the parts the
evidence index and the admission read."""

from __future__ import annotations

from gco.evidence import EvidenceRecord
from gco.evidence.builds import BUILDS_KEY

VLLM = "sha256:" + "a" * 64
TGI = "sha256:" + "b" * 64


def matrix_record(verdict: str = "pass", region: str = "us-east-1", summary: str = "run") -> EvidenceRecord:
    """A matrix record as `gco.validation.report` writes one (the parts the index reads)."""
    images = [
        {"framework": "vllm", "image": f"r/vllm@{VLLM}", "digest": VLLM},
        {"framework": "tgi", "image": f"r/tgi@{TGI}", "digest": TGI},
    ]
    return EvidenceRecord(
        kind="matrix",
        claim_class="observed",
        summary=summary,
        created_at="2026-12-01T00:00:00Z",
        identity={"selected_region": region},
        data={"verdict": verdict, BUILDS_KEY: {"region": region, "images": images}},
    ).sealed()
