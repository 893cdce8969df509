"""Engine benchmarks: Williams-ordered rounds of launches, timed OpenAI-API and clip clients, statistics.

Three wings: `clients` (the timed `bench serve` and `bench clip` clients and what they send and
record), `analysis` (statistics, /metrics and engine-log parsing: pure) and `rounds` (the manifest,
the design, each cell's launch-measure-stop, the summary and the evidence). Beside them: the errors
and the fake engine (`fake_engine`: its command line, server, wire format and each framework's
start-up lines); the engine processes are `gco.processes`'. The face of the package is its errors;
nothing heavier is imported here: the fake engine starts once per benchmark cell and per local
replica, so its start-up should not pay for pydantic and the design's models.
"""

from gco.bench.errors import BenchError, BenchInputError, GpuLockedError

__all__ = ["BenchError", "BenchInputError", "GpuLockedError"]
