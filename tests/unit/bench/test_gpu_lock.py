"""GPU memory check through the probe port (NVML adapter faked), and the exclusive GPU lock file."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gco.bench.errors import GpuLockedError
from gco.bench.rounds.gpu import NvmlProbe, check_memory_returned
from gco.bench.rounds.lock import GpuLock, lock_path


class FakeProbe:
    def __init__(self, readings: list[float | None]) -> None:
        self.readings = readings

    def used_mib(self) -> float | None:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def processes(self) -> list[int] | None:
        return []

    def name(self) -> str | None:
        return "Fake GPU"


def test_memory_returned_after_polling() -> None:
    naps: list[float] = []
    check = check_memory_returned(FakeProbe([9000.0, 4000.0, 1100.0]), 1000.0, 512, sleep=naps.append)
    assert check.status == "returned"
    assert check.after_mib == 1100.0
    assert len(naps) == 2


def test_memory_not_returned_and_not_checked() -> None:
    stuck = check_memory_returned(
        FakeProbe([5000.0]), 1000.0, 512, wait_s=1, interval_s=0.5, sleep=lambda _: None
    )
    assert stuck.status == "not returned"
    assert check_memory_returned(FakeProbe([None]), None, 512).status == "not checked"
    assert check_memory_returned(FakeProbe([None]), 100.0, 512).status == "not checked"


def _fake_pynvml(fail: bool = False) -> Any:
    module = types.ModuleType("pynvml")

    def init() -> None:
        if fail:
            raise RuntimeError("NVML Shared Library Not Found")

    module.nvmlInit = init  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    module.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=(h + 1) * 1024 * 1024 * 100)  # type: ignore[attr-defined]
    module.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=100 + h)]  # type: ignore[attr-defined]
    module.nvmlDeviceGetName = lambda h: "NVIDIA H200"  # type: ignore[attr-defined]
    return module


def test_nvml_probe_reads_every_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    probe = NvmlProbe()
    assert probe.used_mib() == pytest.approx(300.0)
    assert probe.processes() == [100, 101]
    assert probe.name() == "NVIDIA H200"


def test_nvml_missing_means_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail=True))
    probe = NvmlProbe()
    assert (probe.used_mib(), probe.processes(), probe.name()) == (None, None, None)


def test_nvml_errors_after_init_mean_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _fake_pynvml()
    module.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(RuntimeError("gone"))
    monkeypatch.setitem(sys.modules, "pynvml", module)
    probe = NvmlProbe()
    assert (probe.used_mib(), probe.processes(), probe.name()) == (None, None, None)


def test_lock_is_exclusive_and_released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GCO_GPU_LOCK", str(tmp_path / "sub" / "gpu.lock"))
    assert lock_path() == tmp_path / "sub" / "gpu.lock"
    with GpuLock() as held:
        assert held.path.read_text(encoding="utf-8").strip().isdigit()
        with pytest.raises(GpuLockedError, match="held by pid"), GpuLock():
            pass
    with GpuLock():
        pass
    monkeypatch.delenv("GCO_GPU_LOCK")
    assert lock_path().name == "gpu.lock"
