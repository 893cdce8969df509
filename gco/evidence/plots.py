"""The report page's plots, drawn with matplotlib's SVG backend and made byte-for-byte deterministic.

Pure functions of their inputs: each returns one `<svg>` element to inline in the page, or "" when
there is nothing to draw. Determinism is what lets a reader (or a test) compare two renderings of
one record byte for byte, so every source of variation matplotlib has is pinned:

- `svg.hashsalt` (the ids of clip paths and markers are hashes salted with it; unset, they are
  random) is fixed per figure, and every id is prefixed with the figure's name, so two figures
  inlined in one page never share an id;
- the `Date` metadata is None (no timestamp) and the `Creator` names no version;
- text stays text (`svg.fonttype: none`), so no glyph outlines depend on the fonts installed;
- a Figure with its own SVG canvas, never pyplot: no global figure registry, no GUI backend.

The XML prolog and DOCTYPE are stripped so that the element can sit inside an HTML body.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "path.simplify": False,
}
WIDTH_IN = 8.0
# A figure taller than this (at the browser's 96 px per inch) would not fit on one screen: many
# per-round panels share it instead of growing it.
MAX_HEIGHT_IN = 8.8
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
DISTRIBUTIONS = (("ttft_ms", "TTFT (ms)"), ("itl_ms", "ITL (ms)"), ("e2e_ms", "end-to-end (ms)"))
_PROLOG = re.compile(r"\A.*?(?=<svg)", re.DOTALL)
# Every id and every reference to one (href="#x", url(#x)), so that the figure's ids get its prefix.
_REFERENCE = re.compile(r'( id="|href="#|url\(#)([^")]+)')


@contextmanager
def _rc(extra: dict[str, Any] | None = None) -> Iterator[None]:
    """matplotlib's defaults plus the report's settings (never a user's matplotlibrc), restored after.

    matplotlib is imported here, not with the module: it is most of a second of start-up, and every
    `gco` command imports the evidence package, while only a page with plots draws one.
    """
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        params: Any = matplotlib.rcParams  # typed by literal keys; ours are checked at run time
        params.update({**RC, **(extra or {})})
        yield


def _svg(figure: Figure, name: str) -> str:
    """The figure as one inline `<svg>` element, with ids salted by `name`."""
    buffer = io.StringIO()
    with _rc({"svg.hashsalt": f"gco-{name}"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": "gco"})
    text = _PROLOG.sub("", buffer.getvalue(), count=1)
    text = _REFERENCE.sub(lambda m: f"{m.group(1)}{name}-{m.group(2)}", text)
    return text.replace("<svg ", f'<svg class="plot" data-plot="{name}" ', 1).strip()


def _figure(height_in: float) -> Figure:
    from matplotlib.figure import Figure  # imported when a plot is drawn (see `_rc`)

    with _rc():
        return Figure(figsize=(WIDTH_IN, max(height_in, 1.6)), layout="constrained")


def color(index: int) -> str:
    return COLORS[index % len(COLORS)]


def per_round_svg(series: Sequence[Mapping[str, Any]]) -> str:
    """Per-round values: one panel per metric and bucket, one line per engine, x = round."""
    panels: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    for item in series:
        per_round = item.get("per_round") or {}
        if not per_round:
            continue
        key = (str(item.get("metric", "")), str(item.get("bucket", "")))
        panels.setdefault(key, {})[str(item.get("label", item.get("subject", "")))] = {
            int(k): float(v) for k, v in per_round.items()
        }
    if not panels:
        return ""
    labels = sorted({label for engines in panels.values() for label in engines})
    columns = 1 if len(panels) == 1 else 2 if len(panels) <= 4 else 3
    rows = (len(panels) + columns - 1) // columns
    with _rc():
        figure = _figure(min(2.4 * rows, MAX_HEIGHT_IN))
        axes = figure.subplots(rows, columns, squeeze=False)
        for index, ((metric, bucket), engines) in enumerate(sorted(panels.items())):
            ax = axes[index // columns][index % columns]
            for label, values in sorted(engines.items()):
                rounds = sorted(values)
                ax.plot(
                    rounds,
                    [values[r] for r in rounds],
                    marker="o",
                    color=color(labels.index(label)),
                    label=label,
                )
            ax.set_title(f"{metric} ({bucket})" if bucket else metric)
            ax.set_xlabel("round")
            ax.set_xticks(sorted({r for values in engines.values() for r in values}))
            ax.legend(loc="best")
        for index in range(len(panels), rows * columns):
            axes[index // columns][index % columns].set_visible(False)
    return _svg(figure, "per-round")


def forest_svg(rows: Sequence[tuple[str, float, tuple[float, float] | None]]) -> str:
    """Ratio to the best engine with its 95% CI, one row each (a forest plot); 1.0 marks the best."""
    if not rows:
        return ""
    with _rc():
        figure = _figure(0.9 + 0.32 * len(rows))
        ax = figure.subplots()
        positions = list(range(len(rows)))[::-1]
        for y, (_, value, ci) in zip(positions, rows, strict=True):
            if ci is not None:
                ax.plot(list(ci), [y, y], color=COLORS[0], linewidth=2.5, solid_capstyle="butt")
            ax.plot([value], [y], marker="D", color=COLORS[1], markersize=5)
        ax.axvline(1.0, color="#555555", linestyle="--", linewidth=1)
        ax.set_yticks(positions, [label for label, _, _ in rows])
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_xlabel("ratio to the best engine (paired bootstrap 95% CI)")
    return _svg(figure, "forest")


def distributions_svg(samples: Mapping[str, Mapping[str, Sequence[float]]]) -> str:
    """TTFT, ITL and e2e per engine as box plots of every successful request of its cells.

    `samples` maps an engine label to its values per metric (`ttft_ms`, `itl_ms`, `e2e_ms`).
    """
    labels = sorted(
        label for label, values in samples.items() if any(values.get(m) for m, _ in DISTRIBUTIONS)
    )
    if not labels:
        return ""
    with _rc():
        figure = _figure(0.8 + 0.45 * len(labels) * len(DISTRIBUTIONS))
        axes = figure.subplots(len(DISTRIBUTIONS), 1, squeeze=False)
        for (metric, title), row in zip(DISTRIBUTIONS, axes, strict=True):
            ax = row[0]
            present = [label for label in labels if samples[label].get(metric)]
            data = [list(samples[label][metric]) for label in present]
            if data:
                boxes = ax.boxplot(data, orientation="horizontal", widths=0.6, patch_artist=True)
                for index, patch in enumerate(boxes["boxes"]):
                    patch.set_facecolor(color(labels.index(present[index])))
                    patch.set_alpha(0.45)
                ax.set_yticks(
                    range(1, len(present) + 1),
                    [f"{label} (n={len(values)})" for label, values in zip(present, data, strict=True)],
                )
            ax.set_title(title)
    return _svg(figure, "distributions")
