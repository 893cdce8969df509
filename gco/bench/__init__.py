"""Engine benchmarks: Williams-ordered rounds of launches, timed OpenAI-API and clip clients, statistics.

The face of the package: errors and the design; see `rounds`, `cell`, `serve` and `clip` for the runners.
"""

from gco.bench.errors import BenchError, BenchInputError, GpuLockedError
from gco.bench.williams import RoundPlan, default_rounds, plan_rounds, williams_sequences

__all__ = [
    "BenchError",
    "BenchInputError",
    "GpuLockedError",
    "RoundPlan",
    "default_rounds",
    "plan_rounds",
    "williams_sequences",
]
