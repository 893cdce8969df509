"""A stand-in for the Docker CLI and daemon: runs a "container" as a local process (no Docker here).

It stands in for `docker run | stop | kill | ps` as gpu_runner/docker.py calls them. Containers are
local processes started by a detached shim (as containerd's shim starts them), so a container is not
a descendant of the `docker run` client, exactly as with the real daemon: killing the client leaves
the container running. `run` is attached (the container's output on its stdout) and proxies SIGTERM
and SIGINT to the container (docker's --sig-proxy); `stop --time T` sends SIGTERM, then SIGKILL after
T seconds; exit statuses are docker's (128 + signal). It refuses what Docker refuses: an unknown flag
(125), a name already in use (125), an image it cannot find (125: offline, nothing is pulled), and
`stop`/`kill` of an unknown container (1, "No such container").

Images map to local commands through STANDIN_DOCKER_IMAGES (JSON: image -> argv prefix); state lives
in STANDIN_DOCKER_STATE. It does not model: GPUs (`--gpus` is accepted and ignored), network and IPC
namespaces (the process shares the host's, as with `--network host --ipc host`), image pulls, any
other command or flag.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RUN_FLAGS = {
    "--name": True,
    "--label": True,
    "--gpus": True,
    "--network": True,
    "--ipc": True,
    "-e": True,
    "--rm": False,
}
STATE = Path(os.environ.get("STANDIN_DOCKER_STATE", "/nonexistent"))


def _fail(code: int, message: str) -> int:
    print(message, file=sys.stderr)
    return code


def _entry(name: str) -> Path:
    return STATE / name


def _container(name: str) -> dict[str, Any]:
    meta = _entry(name) / "meta.json"
    deadline = time.monotonic() + 10
    while not meta.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    container: dict[str, Any] = json.loads(meta.read_text())
    return container


def _exit_code(name: str) -> int | None:
    path = _entry(name) / "exit"
    return int(path.read_text()) if path.exists() and path.read_text() else None


def _signal(name: str, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(_container(name)["pgid"], sig)


def _wait_exit(name: str, seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        code = _exit_code(name)
        if code is not None:
            return code
        time.sleep(0.02)
    return _exit_code(name)


def shim(name: str) -> int:
    """Fork away from the client, start the container process, record its exit status."""
    if os.fork() > 0:
        return 0
    entry = _entry(name)
    spec = json.loads((entry / "spec.json").read_text())
    with (entry / "log").open("wb") as log:
        process = subprocess.Popen(
            spec["argv"],
            env=spec["env"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            process_group=0,
        )
        (entry / "meta.json").write_text(
            json.dumps({"pid": process.pid, "pgid": process.pid, "labels": spec["labels"]})
        )
        code = process.wait()
    (entry / "exit").write_text(str(128 - code if code < 0 else code))
    os._exit(0)


def run(args: list[str]) -> int:
    labels: list[str] = []
    env_names: list[str] = []
    remove = False
    container_name: str | None = None
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag not in RUN_FLAGS:
            return _fail(125, f"unknown flag: {flag}")
        if not RUN_FLAGS[flag]:
            remove = True
            continue
        if not args:
            return _fail(125, f"flag needs an argument: {flag}")
        value = args.pop(0)
        if flag == "--name":
            container_name = value
        elif flag == "--label":
            labels.append(value)
        elif flag == "-e":
            env_names.append(value)
    if not args:
        return _fail(125, '"docker run" requires at least 1 argument.')
    image, container_args = args[0], args[1:]
    images = json.loads(os.environ.get("STANDIN_DOCKER_IMAGES", "{}"))
    if image not in images:
        return _fail(125, f"Unable to find image '{image}' locally")
    name = container_name or f"standin-{os.getpid()}"
    entry = _entry(name)
    try:
        entry.mkdir(parents=True)
    except FileExistsError:
        return _fail(125, f'Conflict. The container name "/{name}" is already in use by container "{name}".')
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({key: os.environ[key] for key in env_names if key in os.environ})
    (entry / "spec.json").write_text(
        json.dumps({"argv": [*images[image], *container_args], "env": env, "labels": labels})
    )
    subprocess.run([sys.executable, __file__, "_shim", name], start_new_session=True, check=True)
    _container(name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: _signal(name, signum))
    offset = 0
    code: int | None = None
    while code is None:
        code = _exit_code(name)
        data = (entry / "log").read_bytes()
        sys.stdout.buffer.write(data[offset:])
        sys.stdout.flush()
        offset = len(data)
        time.sleep(0.02)
    if remove:
        for child in entry.iterdir():
            child.unlink()
        entry.rmdir()
    return code


def stop(args: list[str]) -> int:
    timeout = 10.0
    if args[:1] in (["--time"], ["-t"]):
        timeout, args = float(args[1]), args[2:]
    status = 0
    for name in args:
        if not _entry(name).is_dir():
            status = _fail(1, f"Error response from daemon: No such container: {name}")
            continue
        if _exit_code(name) is None:
            _signal(name, signal.SIGTERM)
            if _wait_exit(name, timeout) is None:
                _signal(name, signal.SIGKILL)
                _wait_exit(name, 5)
        print(name)
    return status


def kill(args: list[str]) -> int:
    status = 0
    for name in args:
        if not _entry(name).is_dir() or _exit_code(name) is not None:
            status = _fail(1, f"Error response from daemon: No such container: {name}")
            continue
        _signal(name, signal.SIGKILL)
        _wait_exit(name, 5)
        print(name)
    return status


def ps(args: list[str]) -> int:
    wanted = [a.removeprefix("label=") for a in args[1::2] if a.startswith("label=")]
    for entry in sorted(STATE.iterdir()) if STATE.is_dir() else []:
        meta = entry / "meta.json"
        if meta.exists() and _exit_code(entry.name) is None:
            labels = json.loads(meta.read_text())["labels"]
            if all(label in labels for label in wanted):
                print(entry.name)
    return 0


def main(argv: list[str]) -> int:
    commands = {"run": run, "stop": stop, "kill": kill, "ps": ps}
    if argv[:1] == ["_shim"]:
        return shim(argv[1])
    if not argv or argv[0] not in commands:
        return _fail(1, f"docker: '{argv[0] if argv else ''}' is not a docker command.")
    return commands[argv[0]](list(argv[1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
