"""Engines as containers: vLLM and TGI images pinned by digest, run with the Docker CLI on the instance.

The runner image carries gco, not the engines: a run manifest names an engine whose argv is
`python -m gpu_runner.engine_container --image vllm/vllm-openai@sha256:<digest> ... -- <engine args>`,
and that wrapper runs the container in the foreground. `gco bench rounds` then launches, waits for,
stops and checks it like any process engine (process group, SIGTERM then SIGKILL, NVML memory):

- the wrapper answers SIGTERM with `docker stop --time <stop timeout>`, shorter than the bench's
  SIGTERM-to-SIGKILL timeout, so the container is gone before the group is killed;
- a container is not a child of the CLI (the daemon runs it), so one that outlives its wrapper (the
  wrapper killed outright) is invisible to the process-group checks: every container carries
  `ENGINE_LABEL`, and the runner kills any still running after the job and reports them (`sweep`).

The functions here build the real command lines; the Docker CLI (or, in tests, a stand-in with the
same command-line contract) runs them.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence

# name[:tag]@sha256:<64 lowercase hex>: a tag alone is mutable and is refused.
PINNED_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")
ENGINE_LABEL = "gco.engine"
DOCKER = "docker"
STOP_TIMEOUT_S = 20
COMMAND_TIMEOUT_S = 120.0

Run = Callable[..., "subprocess.CompletedProcess[str]"]


class ContainerError(ValueError):
    """A container engine's settings are invalid (the message names the option)."""


def pinned(image: str) -> str:
    """`image`, if it is pinned by digest.

    Raises:
        ContainerError: a tag or a malformed digest.
    """
    if not PINNED_IMAGE.match(image):
        raise ContainerError(f"--image: {image!r} is not pinned by digest (name@sha256:<64 lowercase hex>)")
    return image


def run_argv(
    image: str, name: str, args: Sequence[str], *, env_names: Sequence[str] = (), docker: str = DOCKER
) -> list[str]:
    """`docker run` in the foreground: all GPUs, the host's network (the bench reaches the engine on
    localhost) and IPC (shared memory for tensor parallelism), removed when it exits. Environment
    values are passed by name only (`-e NAME`), so none appears on a command line."""
    argv = [docker, "run", "--rm", "--name", name, "--label", f"{ENGINE_LABEL}=true"]
    argv += ["--gpus", "all", "--network", "host", "--ipc", "host"]
    for env_name in env_names:
        argv += ["-e", env_name]
    return [*argv, pinned(image), *args]


def stop_argv(name: str, timeout_s: int = STOP_TIMEOUT_S, *, docker: str = DOCKER) -> list[str]:
    """`docker stop`: SIGTERM to the container, SIGKILL after `timeout_s`."""
    return [docker, "stop", "--time", str(timeout_s), name]


def kill_argv(names: Sequence[str], *, docker: str = DOCKER) -> list[str]:
    return [docker, "kill", *names]


def ps_argv(*, docker: str = DOCKER) -> list[str]:
    """The running engine containers, one name a line."""
    return [docker, "ps", "--filter", f"label={ENGINE_LABEL}=true", "--format", "{{.Names}}"]


def running(*, docker: str = DOCKER, run: Run = subprocess.run) -> list[str]:
    """Names of the engine containers still running ([] when there is no Docker CLI)."""
    try:
        done = run(
            ps_argv(docker=docker), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return []
    return (
        sorted(line.strip() for line in done.stdout.splitlines() if line.strip())
        if done.returncode == 0
        else []
    )


def sweep(*, docker: str = DOCKER, run: Run = subprocess.run) -> list[str]:
    """Kill every engine container still running; returns their names (the survivors of the job)."""
    survivors = running(docker=docker, run=run)
    if survivors:
        run(
            kill_argv(survivors, docker=docker),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    return survivors
