"""The matrix's evidence: one record of kind `matrix`, claim class observed, every step in it.

Each step is in `data.steps` (endpoint, verdict, seconds, detail, what was observed) and each
timing is a metric (`<step>_seconds` of that endpoint, n = 1; a step tried again, on a resumed run
or a second destroy, is the metric of its last try, the earlier tries staying in `data.steps`, so
each name appears once per subject). `data.validated_builds` names the Region and each engine's
image with its digest (`gco.evidence.builds`); a passing run's are indexed (`gco.evidence.index`)
beside the local evidence and in every extra index. The identity is the run's identity document;
the checkpoint is an artifact by digest. Written to `D/evidence/<id>.json` (with markdown and HTML
beside it) and to every extra store (S3 when a bucket is given).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gco.evidence.builds import BUILDS_KEY, MATRIX_KIND, ValidatedBuilds, ValidatedImage, digest_of
from gco.evidence.index import EvidenceIndex, LocalEvidenceIndex
from gco.evidence.record import Artifact, EvidenceRecord, LimitationEntry, Metric, file_sha256, now_iso
from gco.evidence.report import render_html, render_markdown
from gco.evidence.store import EvidenceStore, LocalEvidenceStore
from gco.validation.checkpoint import CHECKPOINT, Checkpoint, Verdict

KIND = MATRIX_KIND
VLLM_REVISION_LIMITATION = LimitationEntry(
    code="vllm_revision_from_launch",
    text="vLLM's /v1/models does not report the revision it loaded; the matrix read it from the "
    "`--revision` argument of the Deployment the cluster runs.",
)


class MatrixResult(BaseModel):
    """What a run ended with: the verdict, its evidence and the summary line."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    verdict: Verdict
    evidence_id: str
    evidence_path: str
    summary: str
    failed_step: str | None = None


def summary_line(checkpoint: Checkpoint, verdict: Verdict) -> str:
    counted = {v: sum(1 for s in checkpoint.steps if s.verdict == v) for v in ("pass", "fail", "skipped")}
    first = next((s for s in checkpoint.steps if s.verdict == "fail"), None)
    line = (
        f"matrix {checkpoint.run_id} {verdict.upper()} in {checkpoint.identity.get('selected_region')}: "
        f"{counted['pass']} steps passed, {counted['fail']} failed, {counted['skipped']} skipped"
    )
    if first is not None:
        line += f"; first failure: {first.step} {first.endpoint or ''} {first.detail}".rstrip()
    return line


def not_run(checkpoint: Checkpoint) -> list[str]:
    """Every step the contract has that the run did not complete: never reached, or skipped."""
    names = [entry.name for entry in checkpoint.endpoints]
    hpa = [entry.name for entry in checkpoint.endpoints if entry.role == "hpa"]
    planned: list[tuple[str, str | None]] = [
        *((step, name) for step in ("deploy", "ready", "health", "model_info", "request") for name in names),
        *(("hpa", name) for name in hpa),
        ("proxy", None),
        *(("destroy", name) for name in names),
        ("inventory", None),
    ]
    done = {(s.step, s.endpoint) for s in checkpoint.steps if s.verdict != "skipped"}
    return [f"{step} {name or ''}".rstrip() for step, name in planned if (step, name) not in done]


def validated_builds(identity: dict[str, Any]) -> ValidatedBuilds:
    """The Region and the engine images of a run, from its identity (each image pinned by digest:
    the settings refuse any other, `settings.IMAGE`)."""
    images = [
        ValidatedImage(
            framework=runtime["framework"], image=runtime["image"], digest=digest_of(runtime["image"])
        )
        for runtime in identity["inference_runtimes"]
    ]
    return ValidatedBuilds(region=identity["selected_region"], images=images)


def evidence_record(checkpoint: Checkpoint, verdict: Verdict, run_dir: Path) -> EvidenceRecord:
    last = {(step.step, step.endpoint): step for step in checkpoint.steps}  # the last try of each
    metrics = [
        Metric(
            name=f"{step.step}_seconds",
            value=step.seconds,
            unit="s",
            statistic="single",
            n=1,
            subject=step.endpoint or step.step,
        )
        for step in last.values()
    ]
    checkpoint_path = run_dir / CHECKPOINT
    artifacts = (
        [Artifact(path=str(CHECKPOINT), sha256=file_sha256(checkpoint_path), role="checkpoint")]
        if checkpoint_path.is_file()
        else []
    )
    return EvidenceRecord(
        kind=KIND,
        claim_class="observed",
        summary=summary_line(checkpoint, verdict),
        created_at=now_iso(),
        identity=checkpoint.identity,
        metrics=metrics,
        artifacts=artifacts,
        missing=not_run(checkpoint),
        limitations=[VLLM_REVISION_LIMITATION],
        data={
            "run_id": checkpoint.run_id,
            "verdict": verdict,
            "endpoints": [e.model_dump(mode="json") for e in checkpoint.endpoints],
            "steps": [s.model_dump(mode="json") for s in checkpoint.steps],
            "superseded_steps": [s.model_dump(mode="json") for s in checkpoint.superseded],
            BUILDS_KEY: validated_builds(checkpoint.identity).model_dump(mode="json"),
        },
    ).sealed()


def write_evidence(
    checkpoint: Checkpoint,
    verdict: Verdict,
    run_dir: Path,
    extra: Sequence[EvidenceStore] = (),
    indexes: Sequence[EvidenceIndex] = (),
) -> MatrixResult:
    """Seal and write the record locally (with its .md and .html) and to every extra store; a
    passing record's builds then go into the local index and every extra index (after the record,
    so an index entry never names evidence that is not there)."""
    record = evidence_record(checkpoint, verdict, run_dir)
    path = Path(LocalEvidenceStore(run_dir / "evidence").put(record))
    path.with_suffix(".md").write_text(render_markdown(record), encoding="utf-8")
    path.with_suffix(".html").write_text(render_html(record), encoding="utf-8")
    for store in extra:
        store.put(record)
    for index in (LocalEvidenceIndex(run_dir / "evidence"), *indexes):
        index.add(record)
    first = next((s for s in checkpoint.steps if s.verdict == "fail"), None)
    return MatrixResult(
        run_id=checkpoint.run_id,
        verdict=verdict,
        evidence_id=record.id,
        evidence_path=str(path),
        summary=record.summary,
        failed_step=f"{first.step} {first.endpoint or ''}".rstrip() if first else None,
    )
