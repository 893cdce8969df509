"""The parts of a rounds record's data that list what went wrong and what each engine ran with.

Pure functions of the cell results: `failure_list` (failed cells and failed requests, by cell) and
`resolved_configs` (each engine's configuration as its logs and launch commands proved it, per round;
`parse_log` has already redacted secret-looking settings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gco.bench.rounds.cell import CellResult
from gco.bench.rounds.summary import failures


def failure_list(cells: Sequence[CellResult]) -> list[dict[str, Any]]:
    """Every cell that failed (its status and error) and every cell with failed requests (per bucket)."""
    out: list[dict[str, Any]] = []
    for cell in cells:
        if cell.status != "ok":
            out.append({"label": cell.label, "round": cell.round, "kind": cell.status, "error": cell.error})
        failed = {bucket: counts for bucket, counts in failures(cell).items() if counts[0]}
        if failed:
            out.append(
                {
                    "label": cell.label,
                    "round": cell.round,
                    "kind": "failed_requests",
                    "failed_of_sent": {bucket: list(counts) for bucket, counts in sorted(failed.items())},
                }
            )
    return out


def resolved_configs(cells: Sequence[CellResult]) -> dict[str, list[dict[str, Any]]]:
    """Per engine, per round: the resolved configuration (status, gates and their evidence, backend,
    settings), as `resolved_config.json` of each cell holds it."""
    out: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        config = cell.config
        out.setdefault(cell.label, []).append(
            {
                "round": cell.round,
                "status": config.status,
                "family": config.family,
                "engine_version": config.engine_version,
                "attention_backend": config.attention_backend,
                "cuda_graphs": config.cuda_graphs,
                "gpu_offload": config.gpu_offload,
                "attention_fallback": config.attention_fallback,
                "gate_violations": config.gate_violations,
                "gate_evidence": config.gate_evidence,
                "settings": config.settings,
                "self_reported": config.self_reported,
            }
        )
    return out
