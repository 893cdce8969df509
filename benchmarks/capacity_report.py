"""What `client_capacity.py` prints at the end: every client side by side (faithful rate, its ratio to
the server's ceiling, TTFT and ITL error at concurrency 1), the targets, and gco against the best
peer measured in the same run (AIPerf, GuideLLM), metric by metric. Pure: the figures in, lines out.
"""

from __future__ import annotations

from collections.abc import Sequence

GCO = "gco bench serve"
CEILING_TARGET = 0.9
TTFT_MEAN_TARGET_MS = 0.3
TTFT_P99_TARGET_MS = 1.0

Errors = dict[str, dict[str, float]]


def _ms(value: float | None) -> str:
    return f"{value:+.3f}" if value is not None else "-"


def table(
    rates: dict[str, int], errors: Errors, ceilings: Sequence[tuple[float, int]], capped: Sequence[str]
) -> list[str]:
    """One row per client measured: faithful rate (and its ratio to each ceiling), TTFT and ITL error."""
    names = list(rates) + [name for name in errors if name not in rates]
    ceiling_head = " / ".join(
        f"x ceiling {when}" for when, _ in zip(("before", "after"), ceilings, strict=False)
    )
    lines = [
        f"{'client':18s} {'faithful req/s':>15s}  {ceiling_head or 'x ceiling':34s} "
        f"{'TTFT err mean':>13s} {'p99':>8s}  {'ITL err mean':>12s} {'p99':>8s}  n"
    ]
    for name in names:
        rate = rates.get(name)
        shown = "-" if rate is None else f"{rate}{'+' if name in capped else ''}"
        ratios = " / ".join(f"{rate / c:.2f}" for c, _ in ceilings) if rate is not None and ceilings else "-"
        err = errors.get(name, {})
        lines.append(
            f"{name:18s} {shown:>15s}  {ratios:34s} {_ms(err.get('ttft_mean_ms')):>13s} "
            f"{_ms(err.get('ttft_p99_ms')):>8s}  {_ms(err.get('itl_mean_ms')):>12s} "
            f"{_ms(err.get('itl_p99_ms')):>8s}  {err.get('n', 0):.0f}"
        )
    return lines


def against_best_peer(rates: dict[str, int], errors: Errors, peer_names: Sequence[str]) -> list[str]:
    """gco against the best peer of this run on each measure: the highest faithful rate, the smallest
    TTFT error (mean, p99, in absolute value); "no worse" or "WORSE" each, and overall."""
    rate_peers = {name: rates[name] for name in peer_names if name in rates}
    error_peers = {name: errors[name] for name in peer_names if name in errors}
    if not rate_peers and not error_peers:
        return ["against the best peer: not measured (no peer ran in this run)"]
    lines, worse = [], False
    if rate_peers and GCO in rates:
        best = max(rate_peers, key=lambda name: rate_peers[name])
        ok = rates[GCO] >= rate_peers[best]
        worse |= not ok
        lines.append(
            f"  faithful rate: gco {rates[GCO]} req/s vs {rate_peers[best]} ({best}): "
            + ("no worse" if ok else "WORSE")
        )
    mine = errors.get(GCO)
    for key, label in (("ttft_mean_ms", "TTFT error mean"), ("ttft_p99_ms", "TTFT error p99")):
        if not error_peers or mine is None:
            break
        best = min(error_peers, key=lambda name: abs(error_peers[name][key]))
        ours, theirs = abs(mine[key]), abs(error_peers[best][key])
        ok = ours <= theirs
        worse |= not ok
        lines.append(
            f"  {label}: gco {ours:.3f} ms vs {theirs:.3f} ms ({best}): " + ("no worse" if ok else "WORSE")
        )
    verdict = "WORSE on at least one" if worse else "no worse on any"
    return [
        f"against the best peer in this run ({', '.join(sorted({*rate_peers, *error_peers}))}): {verdict}",
        *lines,
    ]


def targets(rates: dict[str, int], errors: Errors, ceilings: Sequence[tuple[float, int]]) -> list[str]:
    """gco's ratio to each ceiling and its TTFT error at concurrency 1, against the issue's targets."""
    lines = []
    gco = rates.get(GCO)
    for when, (ceiling, _) in zip(("before", "after"), ceilings, strict=False):
        if gco is not None:
            ratio = gco / ceiling
            verdict = "met" if ratio >= CEILING_TARGET else "not met"
            target = f"target >= {CEILING_TARGET:.2f}: {verdict}"
            lines.append(f"ratio gco / server ceiling ({when}): {ratio:.2f} ({target})")
    mine = errors.get(GCO)
    if mine is not None:
        mean, p99 = abs(mine["ttft_mean_ms"]), abs(mine["ttft_p99_ms"])
        lines.append(
            f"TTFT error at concurrency 1: mean {mean:.3f} ms (target <= {TTFT_MEAN_TARGET_MS}: "
            f"{'met' if mean <= TTFT_MEAN_TARGET_MS else 'not met'}), p99 {p99:.3f} ms (target <= "
            f"{TTFT_P99_TARGET_MS}: {'met' if p99 <= TTFT_P99_TARGET_MS else 'not met'})"
        )
    return lines


def report(
    rates: dict[str, int],
    errors: Errors,
    failed: dict[str, str],
    note: str,
    peer_names: list[str],
    ceilings: list[tuple[float, int]] | str,
    capped: list[str] | None = None,
) -> None:
    """Print the ceilings, every client side by side, the legs of gco's TTFT error, the ratios to the
    other clients, the targets, and gco against the best peer of this run."""
    print()
    measured = [] if isinstance(ceilings, str) else ceilings
    if isinstance(ceilings, str):
        print(ceilings)
    for when, (rate, connections) in zip(("before", "after"), measured, strict=False):
        print(
            f"server ceiling {when} gco: {rate:7.1f} answers/s finished at its pace under wrk, "
            f"{connections} connections"
        )
    for line in table(rates, errors, measured, capped or []):
        print(line)
    if capped:
        print(f"(+: the search's highest rate, so at least this: {', '.join(capped)})")
    for name, reason in failed.items():
        print(f"{name:18s} could not be measured: {reason}")
    if note:
        print(note)
    for name, err in errors.items():
        if "request_leg_mean_ms" in err:
            print(
                f"{name}: TTFT error's request leg (write to the server's read) mean "
                f"{err['request_leg_mean_ms']:+.3f} ms, p99 {err['request_leg_p99_ms']:+.3f}; answer leg "
                f"(the server's write to the client's stamp) mean {err['answer_leg_mean_ms']:+.3f} ms, p99 "
                f"{err['answer_leg_p99_ms']:+.3f}; kernel receive stamps on {err['kernel_stamped']:.0f}"
            )
    gco = rates.get(GCO)
    for name, rate in rates.items():
        if name != GCO and gco is not None:
            print(f"ratio gco / {name}: {gco / rate if rate else float('inf'):.2f}x")
    for line in targets(rates, errors, measured) + against_best_peer(rates, errors, peer_names):
        print(line)
