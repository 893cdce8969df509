"""Engine benchmarks: Williams-ordered rounds of launches, timed OpenAI-API and clip clients, statistics.

The face of the package is its errors; see `williams` for the design and `rounds`, `cell`, `serve`
and `clip` for the runners. Nothing heavier is imported here: the fake engine (`fake_engine`) is a
module of this package and starts once per benchmark cell and per local replica, so its start-up
should not pay for pydantic and the design's models.
"""

from gco.bench.errors import BenchError, BenchInputError, GpuLockedError

__all__ = ["BenchError", "BenchInputError", "GpuLockedError"]
