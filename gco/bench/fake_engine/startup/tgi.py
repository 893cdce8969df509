"""TGI 2.2's start-up lines (`tgi.log`, from tests/fixtures/engine_logs/tgi-2.2.0.log).

`--cuda-graphs 0` shows as `Args { cuda_graphs: Some([0]) }`, and the "Using default cuda graphs" line
then goes: the launcher logs it only when it picks the default capture sizes.
"""

from __future__ import annotations

from gco.bench.fake_engine.startup.base import EngineFlags, StartupTemplate

DEFAULT_GRAPHS_LINE = "Using default cuda graphs"


class TgiStartup(StartupTemplate):
    template = "tgi.log"

    def values(self, flags: EngineFlags) -> dict[str, str]:
        graphs = "None" if flags.cuda_graphs is None else f"Some([{flags.cuda_graphs}])"
        return {"model": flags.model, "port": str(flags.port), "cuda_graphs": graphs}

    def kept(self, line: str, flags: EngineFlags) -> bool:
        # Given capture sizes replace the launcher's default ones and their log line.
        return flags.cuda_graphs is None or DEFAULT_GRAPHS_LINE not in line
