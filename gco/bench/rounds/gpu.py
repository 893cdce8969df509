"""GPU memory and process checks through NVML (nvidia-ml-py); "not checked" where NVML is missing.

A small port (`GpuProbe`) with the NVML adapter and a stand-in for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

MIB = 1024 * 1024
MemoryStatus = Literal["returned", "not returned", "not checked"]
NVML_UNAVAILABLE = "NVML unavailable before launch"
NVML_FAILED_AFTER = "NVML read failed after the stop"
NOT_LAUNCHED = "the engine was not launched"


class GpuProbe(Protocol):
    """Reads used GPU memory (MiB, summed over devices) and compute processes; None when unavailable."""

    def used_mib(self) -> float | None: ...

    def processes(self) -> list[int] | None: ...

    def name(self) -> str | None: ...


class NvmlProbe:
    """The real probe: NVML through pynvml; every call answers None if NVML cannot be initialised."""

    def __init__(self) -> None:
        self.nvml: object | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
        except Exception:
            self.nvml = None

    def _handles(self) -> list[object]:
        nvml = self.nvml
        assert nvml is not None
        return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]  # type: ignore[attr-defined]

    def used_mib(self) -> float | None:
        if self.nvml is None:
            return None
        try:
            return sum(self.nvml.nvmlDeviceGetMemoryInfo(h).used / MIB for h in self._handles())  # type: ignore[attr-defined]
        except Exception:
            return None

    def processes(self) -> list[int] | None:
        if self.nvml is None:
            return None
        try:
            return [p.pid for h in self._handles() for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(h)]  # type: ignore[attr-defined]
        except Exception:
            return None

    def name(self) -> str | None:
        if self.nvml is None:
            return None
        try:
            names = {str(self.nvml.nvmlDeviceGetName(h)) for h in self._handles()}  # type: ignore[attr-defined]
            return ", ".join(sorted(names)) or None
        except Exception:
            return None


class MemoryCheck(BaseModel):
    """Did GPU memory return to its pre-launch level within the tolerance?"""

    model_config = ConfigDict(frozen=True)

    status: MemoryStatus
    before_mib: float | None = None
    after_mib: float | None = None
    tolerance_mib: float
    reason: str | None = None  # why it was not checked: what really happened to that cell


def check_memory_returned(
    probe: GpuProbe,
    before_mib: float | None,
    tolerance_mib: float,
    *,
    wait_s: float = 10.0,
    interval_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> MemoryCheck:
    """Poll (bounded) until used memory is within tolerance of `before_mib`."""
    if before_mib is None:
        return MemoryCheck(status="not checked", tolerance_mib=tolerance_mib, reason=NVML_UNAVAILABLE)
    after = probe.used_mib()
    for _ in range(max(1, int(wait_s / interval_s))):
        if after is None or after <= before_mib + tolerance_mib:
            break
        sleep(interval_s)
        after = probe.used_mib()
    if after is None:
        return MemoryCheck(
            status="not checked", before_mib=before_mib, tolerance_mib=tolerance_mib, reason=NVML_FAILED_AFTER
        )
    status: MemoryStatus = "returned" if after <= before_mib + tolerance_mib else "not returned"
    return MemoryCheck(status=status, before_mib=before_mib, after_mib=after, tolerance_mib=tolerance_mib)
