"""The limitations of a rounds run: every threat to its validity, named with its numbers.

Pure functions of the plan, the inputs and the cell results; `plan_limitations` reads what is known
before any engine runs (and the adaptive checks after), `cell_limitations` what the cells observed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gco.bench.analysis.enginelog import warning_text
from gco.bench.clients.serve import overridden_fields
from gco.bench.rounds.cell import CellResult
from gco.bench.rounds.summary import Adaptive, Limitation, failures
from gco.bench.rounds.williams import RoundPlan

Add = Callable[[Limitation], None]
MAX_QUOTED_WARNINGS = 5


def cell_limitations(cells: Sequence[CellResult], labels: Sequence[str], mode: str) -> list[Limitation]:
    """Limitations read from the cells: failures, stops, GPU memory, configuration, cache, client lag."""
    out: list[Limitation] = []
    add = out.append
    _failed_cells(cells, add)
    for label in labels:
        if not any(c.label == label and c.status == "ok" for c in cells):
            add(Limitation(code="no_successful_round", text=f"{label}: no successful round"))
    _failed_requests(cells, mode, add)
    _stop_limitations(cells, add)
    _config_limitations(cells, add)
    _measurement_limitations(cells, mode, add)
    missing = sorted({f"{c.label}:{name}" for c in cells for name in c.missing_env})
    if missing:
        add(
            Limitation(
                code="inherited_env_missing",
                text=f"inherited env not set by the caller: {', '.join(missing)}",
            )
        )
    return out


def _failed_cells(cells: Sequence[CellResult], add: Add) -> None:
    by_status: dict[str, list[str]] = {}
    for c in cells:
        if c.status != "ok":
            by_status.setdefault(c.status, []).append(f"{c.label} round {c.round}")
    for status, names in sorted(by_status.items()):
        add(
            Limitation(
                code="failed_cells",
                text=f"{len(names)} cell(s) failed with status {status}: {', '.join(names)}",
            )
        )


def _failed_requests(cells: Sequence[CellResult], mode: str, add: Add) -> None:
    """N of M requests over R rounds per engine and bucket; a hard gate alone never reads as a failure."""
    totals: dict[tuple[str, str], list[int]] = {}
    for c in cells:
        for bucket, (failed, sent) in failures(c).items():
            entry = totals.setdefault((c.label, bucket), [0, 0, 0])
            entry[0] += failed
            entry[1] += sent
            entry[2] += 1
    unit = "clips" if mode == "clip" else "requests"
    consequence = (
        "values at N* come only from levels without a failure" if mode == "load" else "not ranked there"
    )
    for (label, bucket), (failed, sent, rounds) in sorted(totals.items()):
        if failed:
            add(
                Limitation(
                    code="failed_requests",
                    text=f"{label}/{bucket}: {failed} of {sent} {unit} failed over {rounds} round(s); "
                    f"{consequence}",
                )
            )


def _measurement_limitations(cells: Sequence[CellResult], mode: str, add: Add) -> None:
    for c in cells:
        where = f"{c.label} round {c.round}"
        if c.prefix_cache is not None and c.prefix_cache.warning and c.prefix_cache.hit_rate is not None:
            add(
                Limitation(
                    code="prefix_cache_hits",
                    text=f"{where}: prefix-cache hit rate {c.prefix_cache.hit_rate:.1%}",
                )
            )
        if c.serve is not None and c.serve.client.lagged:
            add(
                Limitation(
                    code="client_lagged",
                    text=f"{where}: client schedule delay p99 {c.serve.client.lag_p99_ms:.1f} ms",
                )
            )
        if mode == "load" and c.status == "ok" and c.serve is not None and c.serve.n_star is None:
            add(Limitation(code="no_capacity", text=f"{where}: no load level was sustained"))
    digests = {c.serve.schedule_digest for c in cells if c.serve is not None and c.serve.schedule_digest}
    if len(digests) > 1:
        add(Limitation(code="differing_load_schedules", text=f"{len(digests)} different load schedules"))


def _stop_limitations(cells: Sequence[CellResult], add: Add) -> None:
    for c in cells:
        where = f"{c.label} round {c.round}"
        if c.stop is not None and c.stop.signal == "SIGKILL":
            add(Limitation(code="sigkill", text=f"{where}: did not stop on SIGTERM; SIGKILL sent"))
        if c.stop is not None and (c.stop.survivors or not c.stop.group_gone):
            add(
                Limitation(
                    code="sigkill_survivors",
                    text=f"{where}: processes survived the group stop {c.stop.survivors} (killed by pid)",
                )
            )
        if c.memory is not None and c.memory.status == "not returned":
            add(
                Limitation(
                    code="gpu_memory_not_returned",
                    text=f"{where}: GPU memory {c.memory.after_mib:.0f} MiB, "
                    f"{c.memory.before_mib:.0f} MiB before launch",
                )
            )
    for reason, cells_named in sorted(memory_not_checked(cells).items()):
        add(
            Limitation(
                code="gpu_memory_not_checked",
                text=f"GPU memory return not checked ({reason}): {', '.join(cells_named)}",
            )
        )


def memory_not_checked(cells: Sequence[CellResult]) -> dict[str, list[str]]:
    """Cells whose GPU memory return was not checked, by the reason each was not."""
    out: dict[str, list[str]] = {}
    for c in cells:
        if c.memory is None or c.memory.status == "not checked":
            reason = (c.memory.reason if c.memory else None) or "no check recorded"
            out.setdefault(reason, []).append(f"{c.label} round {c.round}")
    return out


def _config_limitations(cells: Sequence[CellResult], add: Add) -> None:
    backends: dict[str, set[str]] = {}
    warnings: dict[str, Counter[str]] = {}
    rounds: Counter[str] = Counter(c.label for c in cells)
    seen: set[tuple[str, str]] = set()

    def once(code: str, label: str, text: str) -> None:
        if (code, label + text) not in seen:
            seen.add((code, label + text))
            add(Limitation(code=code, text=f"{label}: {text}"))

    for c in cells:
        cfg = c.config
        names = ", ".join(sorted(cfg.self_reported))
        if cfg.status in ("UNPROVEN", "PARTIAL"):
            once("unresolved_config", c.label, f"configuration {cfg.status}")
        if cfg.status == "SELF_REPORTED":
            once("self_reported_config", c.label, f"configuration only self-reported: {names}")
        elif cfg.self_reported:
            once(
                "self_reported_settings",
                c.label,
                f"non-default args it reported: {names} (its config line decides)",
            )
        for gate in cfg.gate_violations:
            evidence = "; ".join(cfg.gate_evidence.get(gate, []))
            once(
                "hard_gate_violation",
                c.label,
                f"{gate}" + (f" ({evidence})" if evidence else "") + "; not ranked",
            )
        if cfg.unknown_settings:
            once("unknown_settings", c.label, ", ".join(sorted(set(cfg.unknown_settings))))
        warnings.setdefault(c.label, Counter()).update({warning_text(line) for line in cfg.warnings})
        if cfg.attention_backend:
            backends.setdefault(c.label, set()).add(cfg.attention_backend)
    for label, lines in sorted(warnings.items()):
        if lines:
            quoted = "; ".join(
                f"{text!r} ({n} of {rounds[label]} rounds)"
                for text, n in sorted(lines.items())[:MAX_QUOTED_WARNINGS]
            )
            more = (
                f"; and {len(lines) - MAX_QUOTED_WARNINGS} more" if len(lines) > MAX_QUOTED_WARNINGS else ""
            )
            add(
                Limitation(
                    code="engine_warnings",
                    text=f"{label}: {len(lines)} distinct warning line(s): {quoted}{more}",
                )
            )
    for label, found in sorted(backends.items()):
        if len(found) > 1:
            add(Limitation(code="attention_backend_changed", text=f"{label}: {', '.join(sorted(found))}"))


def _adaptive_text(adaptive: Adaptive) -> str:
    checks = "; ".join(
        f"round {check.round}: "
        + ", ".join(
            f"{label} {'-' if width is None else f'{width:.4f}'}"
            for label, width in sorted(check.half_widths.items())
        )
        for check in adaptive.checks
    )
    return (
        f"adaptive stop (CI half-width <= {adaptive.ci_target:g}, rounds "
        f"{adaptive.min_rounds}..{adaptive.max_rounds}): {adaptive.outcome}"
        + (f"; half-widths at each check: {checks}" if checks else "; no check reached")
    )


def plan_limitations(
    plan: RoundPlan,
    rounds_run: int,
    *,
    secret_env: Mapping[str, list[str]],
    extra_body: Mapping[str, Any],
    other_gpu_processes: list[int] | None,
    adaptive: Adaptive | None,
) -> list[Limitation]:
    """Limitations of the design and the inputs, known before any engine runs (and after adaptive stop)."""
    out = []
    if rounds_run % plan.period != 0:
        out.append(
            Limitation(
                code="unbalanced_order",
                text=f"{rounds_run} rounds is not a multiple of the Williams period {plan.period}",
            )
        )
    if rounds_run < 2:
        out.append(Limitation(code="few_rounds", text=f"{rounds_run} round(s): no interval across rounds"))
    for label, names in sorted(secret_env.items()):
        if names:
            out.append(
                Limitation(
                    code="secret_env_values",
                    text=f"{label}: secret-looking env values written in the manifest: {', '.join(names)}",
                )
            )
    if extra_body:
        overrides = overridden_fields(extra_body)
        text = "an extra request body went to every engine"
        if overrides:
            text += f"; it overrides measured fields: {', '.join(overrides)}"
        out.append(Limitation(code="extra_request_body", text=text))
    if other_gpu_processes:
        out.append(
            Limitation(code="other_gpu_processes", text=f"GPU processes at start: {other_gpu_processes}")
        )
    if adaptive is not None:
        out.append(Limitation(code="optional_stopping", text=_adaptive_text(adaptive)))
    return out
