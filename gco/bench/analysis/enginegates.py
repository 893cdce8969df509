"""The hard gates (CUDA graphs on, no GPU offload, no attention fallback) as an engine's log and its launch
command decide them together.

Each engine family's own rules (which logged settings and which launch flags turn CUDA graphs off or
offload to CPU memory, with the engine source or documentation they come from) are in its module of
`gco.engines`; this module holds the verdict and how the two sources combine: a violation from
either wins, then a decided state.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gco.bench.analysis.launchfacts import LaunchFacts


class Gates(BaseModel):
    """Each gate's state (None: not decided) and the evidence that decided it."""

    model_config = ConfigDict(frozen=True)

    cuda_graphs: bool | None = None
    gpu_offload: bool | None = None
    attention_fallback: bool = False
    evidence: dict[str, list[str]] = Field(default_factory=dict)


def combine(log: Gates, launch: LaunchFacts | None) -> Gates:
    """The log's gates with the launch command's facts: a violation from either wins, then a decided state."""
    if launch is None:
        return log
    evidence = {key: list(values) for key, values in log.evidence.items()}
    for gate, found in (
        ("gpu offload", launch.offload),
        ("cuda graphs off", launch.cuda_graphs_off),
        ("attention fallback", launch.attention_fallback),
    ):
        if found:
            evidence.setdefault(gate, []).extend(found)
    graphs = False if launch.cuda_graphs_off else log.cuda_graphs
    if launch.cuda_graphs_off and "cuda graphs" in evidence:  # the launch turned off what the log shows on
        evidence["cuda graphs on in the log"] = evidence.pop("cuda graphs")
    if launch.offload:
        offload: bool | None = True
    elif log.gpu_offload is None and launch.offload_decided:
        offload = False
        evidence.setdefault("no gpu offload", []).append("launch command: no offload option")
    else:
        offload = log.gpu_offload
    return Gates(
        cuda_graphs=graphs,
        gpu_offload=offload,
        attention_fallback=log.attention_fallback or bool(launch.attention_fallback),
        evidence=evidence,
    )
