"""Human reports of an evidence record: markdown (here) and the HTML page (`gco.evidence.page`).

Pure renderers of one record. The markdown says, in order: the summary, the run's identity (GPU,
engines with their redacted argv and env, models, workload, prompt-set digest), the metrics, the
limitations, what is missing, and the artifacts the record vouches for by digest.
"""

from __future__ import annotations

from gco.evidence.page import ci_text, engines_of, fmt, identity_rows, model_text, render_html
from gco.evidence.record import EvidenceRecord

__all__ = ["render_html", "render_markdown"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _identity(record: EvidenceRecord) -> list[str]:
    lines = ["## Identity", ""]
    lines += [f"- {key}: `{_cell(value)}`" for key, value in identity_rows(record.identity)]
    engines = engines_of(record.identity)
    if engines:
        lines += ["", "| engine | model | argv | env |", "|---|---|---|---|"]
        for engine in engines:
            argv = " ".join(map(str, engine.get("argv") or []))
            env = ", ".join(f"{k}={v}" for k, v in sorted((engine.get("env") or {}).items()))
            lines.append(
                f"| {_cell(str(engine.get('label', '')))} | {_cell(model_text(engine))} "
                f"| `{_cell(argv)}` | {_cell(env) or '-'} |"
            )
    return [*lines, ""]


def render_markdown(record: EvidenceRecord) -> str:
    """The record as markdown: summary, identity, metrics table, limitations, missing, artifacts."""
    lines = [
        f"# {record.kind}: evidence {record.id[:12]}",
        "",
        f"**{record.summary}**",
        "",
        f"- claim class: {record.claim_class}",
        f"- created: {record.created_at}",
        "",
    ]
    lines += _identity(record)
    lines += [
        "## Metrics",
        "",
        "| subject | metric | statistic | value | 95% CI | n | unit |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m.subject} | {m.name} | {m.statistic} | {fmt(m.value)} | {ci_text(m)} | {m.n} | {m.unit} |"
        for m in record.metrics
    ]
    lines += ["", "## Limitations", ""]
    lines += [f"- **{item.code}**: {item.text}" for item in record.limitations] or ["- none recorded"]
    if record.missing:
        lines += ["", "## Missing", "", *[f"- {item}" for item in record.missing]]
    if record.artifacts:
        lines += [
            "",
            "## Artifacts",
            "",
            *[f"- `{a.path}` ({a.role}) sha256 {a.sha256[:16]}" for a in record.artifacts],
        ]
    return "\n".join(lines) + "\n"
