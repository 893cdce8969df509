"""`python -m gpu_runner.engine_container`: one engine container in the foreground, stopped on SIGTERM.

    python -m gpu_runner.engine_container --image vllm/vllm-openai@sha256:<digest> \\
        --env HF_TOKEN --stop-timeout 20 -- --model <id> --revision <sha> --port 8000

A run manifest uses this as an engine's argv. Exit status: the container's, 2 for bad options (one
line naming the option). See gpu_runner/docker.py for how the stop and the survivor check work.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from types import FrameType

from gpu_runner.docker import DOCKER, STOP_TIMEOUT_S, ContainerError, pinned, run_argv, stop_argv


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpu_runner.engine_container", description=__doc__)
    parser.add_argument("--image", required=True, help="name@sha256:<digest>")
    parser.add_argument("--name", default=None, help="container name (default: gco-engine-<random>)")
    parser.add_argument("--env", action="append", default=[], help="pass this variable by name (repeat)")
    parser.add_argument(
        "--stop-timeout", type=int, default=STOP_TIMEOUT_S, help="docker stop's SIGKILL delay"
    )
    parser.add_argument("--docker", default=os.environ.get("GCO_DOCKER", DOCKER), help="the Docker CLI")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the engine's own arguments")
    options = parser.parse_args(argv)
    if options.args[:1] == ["--"]:
        options.args = options.args[1:]
    if not 0 <= options.stop_timeout <= 600:
        parser.error("--stop-timeout: must be from 0 to 600 seconds")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        image = pinned(options.image)
    except ContainerError as error:
        print(f"engine_container: {error}", file=sys.stderr)
        return 2
    name = options.name or f"gco-engine-{uuid.uuid4().hex[:12]}"
    missing = [env_name for env_name in options.env if env_name not in os.environ]
    if missing:
        print(f"engine_container: --env: {', '.join(missing)} not set", file=sys.stderr)
        return 2
    container = subprocess.Popen(
        run_argv(image, name, options.args, env_names=options.env, docker=options.docker)
    )
    stopping: list[bool] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        if stopping:
            return
        stopping.append(True)
        subprocess.run(
            stop_argv(name, options.stop_timeout, docker=options.docker),
            capture_output=True,
            timeout=options.stop_timeout + 30,
            check=False,
        )

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    return container.wait()


if __name__ == "__main__":
    sys.exit(main())
