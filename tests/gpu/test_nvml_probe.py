"""The NVML probe on a real NVIDIA GPU: device name, used memory, processes, the memory-returned check.

Skipped where NVML cannot be loaded (CI and these CPU machines); run on a GPU host with
`pytest --noconftest tests/gpu`. A child process holds GPU memory (through PyTorch) so the check
is seen both to fail while memory is held and to pass once the child has exited.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from gco.bench.rounds.gpu import MIB, NvmlProbe, check_memory_returned

HOLD_MIB = 4096
# Holds HOLD_MIB of device memory until stdin closes; prints "ready" once allocated.
HOLDER = f"""
import sys, torch
block = torch.empty({HOLD_MIB} * {MIB}, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""

probe = NvmlProbe()
pytestmark = pytest.mark.skipif(probe.nvml is None, reason="no NVIDIA GPU here (NVML not loadable)")


def test_name_is_the_device_name_as_text() -> None:
    name = probe.name()
    assert name is not None and name.startswith("NVIDIA") and not name.startswith("b'")


def test_used_memory_and_processes_are_read() -> None:
    used = probe.used_mib()
    assert used is not None and used >= 0
    assert probe.processes() is not None


def test_memory_held_by_a_child_is_seen_and_seen_returned() -> None:
    pytest.importorskip("torch")
    before = probe.used_mib()
    assert before is not None
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        held = probe.used_mib()
        assert held is not None and held >= before + HOLD_MIB * 0.9
        while_held = check_memory_returned(probe, before, 512, wait_s=1.0, interval_s=0.25)
        assert while_held.status == "not returned"
        print(f"processes while held: {probe.processes()} (child pid {child.pid})")
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)
    started = time.monotonic()
    after = check_memory_returned(probe, before, 512, wait_s=30.0)
    print(
        f"before {before:.0f} MiB, held {held:.0f} MiB, after {after.after_mib} MiB "
        f"({time.monotonic() - started:.2f} s to return)"
    )
    assert after.status == "returned"
