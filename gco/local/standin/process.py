"""The stand-in API server in a process of its own: `python -m gco.local.standin.process`.

The same `StandInKubeAPI` (this package), served by a child process so that its request handling
does not share a Python interpreter, and its one GIL, with the reconciler that calls it: a real
API server is another machine, and on a shared machine a Python process gets about one runnable
thread's share of the CPU however many threads it runs. The child prints one JSON line, its API
URL and a control URL, then serves until SIGTERM or until its stdin closes (its parent is gone).

The control face is a second loopback port, apart from the API (which answers only what the
Kubernetes API answers): `GET /created?plural=P` lists `[plural, namespace, name, clock]` for every
object of that resource created (CLOCK_MONOTONIC, one clock for every process of the machine; no
`plural`: every resource), `GET /created/count?plural=P&namespace=N` how many of them there are (in
one namespace when given: what a benchmark polls, cheap however many there are, before it reads the
list once), `GET /requests` counts the API's requests by method, `GET /cpu` is the
CPU seconds the process has used (for benchmarks). Faults, `apply_as` and a `replica_source` stay
with the in-process server: tests that need them use `StandInKubeAPI` directly.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs

import httpx

from gco.local.errors import LocalStackError
from gco.local.processes import headers
from gco.local.processes.collector import collect_rarely
from gco.local.standin.api import StandInKubeAPI
from gco.local.standin.server import QuietServer
from gco.local.standin.store import Key
from gco.processes.interpreter import python_module
from gco.processes.signals import stop_child

STARTUP_TIMEOUT_S = 30.0


class StandInProcess:
    """A stand-in API server child process; a context manager, or `start()`/`stop()`.

    Parameters:
        token: the bearer token the server accepts.
        ready_delay: seconds from a Deployment's spec change to all replicas ready.
        deletion_delay: seconds a deleted object stays (terminating) before it is gone.
        module: the child's module: this one, or one that adds to the server through `main`'s
            `setup` (`gco.local.region.proxied_standin`: the Region's proxy pods beside it).
        extra: further arguments for that module.
    """

    def __init__(
        self,
        *,
        token: str,
        ready_delay: float = 0.0,
        deletion_delay: float = 0.0,
        module: str = "gco.local.standin.process",
        extra: Sequence[str] = (),
    ) -> None:
        self.argv = [
            *python_module(module, "--token", token),
            *("--ready-delay", str(ready_delay), "--deletion-delay", str(deletion_delay)),
            *extra,
        ]
        self.url = ""
        self.control = ""
        self._process: subprocess.Popen[str] | None = None
        self._http = httpx.Client(timeout=10.0)

    def start(self) -> StandInProcess:
        """Start the process and read the URLs it prints once it serves.

        Raises:
            LocalStackError: it printed nothing within `STARTUP_TIMEOUT_S` (it is stopped).
        """
        self._process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        stdout = self._process.stdout
        assert stdout is not None
        ready = threading.Event()
        line: list[str] = []

        def read() -> None:
            line.append(stdout.readline())
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(STARTUP_TIMEOUT_S) or not line[0].strip():
            self.stop()
            raise LocalStackError(
                f"the stand-in API server process did not start within {STARTUP_TIMEOUT_S} s"
            )
        urls = json.loads(line[0])
        self.url, self.control = urls["url"], urls["control"]
        return self

    def created_at(self, plural: str | None = None) -> dict[Key, float]:
        """(plural, namespace, name) -> clock at the object's creation (CLOCK_MONOTONIC), of one
        resource (`plural`, such as "deployments") or of all."""
        params = {"plural": plural} if plural else {}
        rows = self._http.get(f"{self.control}/created", params=params).raise_for_status().json()
        return {(str(kind), str(namespace), str(name)): float(at) for kind, namespace, name, at in rows}

    def created_count(self, plural: str, namespace: str | None = None) -> int:
        """How many objects of one resource were created (in `namespace` when given)."""
        params = {"plural": plural, **({"namespace": namespace} if namespace else {})}
        return int(self._http.get(f"{self.control}/created/count", params=params).raise_for_status().json())

    def requests(self) -> Counter[str]:
        """The API's requests so far, by HTTP method."""
        return Counter(self._http.get(f"{self.control}/requests").raise_for_status().json())

    def cpu_seconds(self) -> float:
        """CPU seconds (user and system) the server process has used so far."""
        return float(self._http.get(f"{self.control}/cpu").raise_for_status().json())

    def stop(self) -> None:
        self._http.close()
        if self._process is None:
            return
        stop_child(self._process)
        self._process = None

    def __enter__(self) -> StandInProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _control_handler(api: StandInKubeAPI) -> type[BaseHTTPRequestHandler]:  # pragma: no cover - child
    class Control(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            answer: Any
            path, _, query = self.path.partition("?")
            params = {key: values[-1] for key, values in parse_qs(query).items()}
            plural, namespace = params.get("plural"), params.get("namespace")
            if path == "/created":
                rows = list(api.store.creations().items())
                answer = [[*key, at] for key, at in rows if plural is None or key[0] == plural]
            elif path == "/created/count":
                keys = api.store.creations()
                answer = sum(key[0] == plural and namespace in (None, key[1]) for key in keys)
            elif path == "/requests":
                answer = dict(api.requests)
            elif path == "/cpu":
                usage = resource.getrusage(resource.RUSAGE_SELF)
                answer = usage.ru_utime + usage.ru_stime
            else:
                self.send_error(404)
                return
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Control


def child_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The child's options; a module that adds to the server adds its own to this parser."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--token", required=True)
    parser.add_argument("--ready-delay", type=float, default=0.0)
    parser.add_argument("--deletion-delay", type=float, default=0.0)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    parser: argparse.ArgumentParser | None = None,
    setup: Callable[[StandInKubeAPI, argparse.Namespace], None] | None = None,
) -> int:  # pragma: no cover - runs as the child process
    """Serve a stand-in until SIGTERM or the parent's end; `setup` adds to it before it serves."""
    options = (parser or child_parser("python -m gco.local.standin.process", __doc__)).parse_args(argv)
    headers.install()  # this process's servers parse request headers without the email package
    api = StandInKubeAPI(
        token=options.token, ready_delay=options.ready_delay, deletion_delay=options.deletion_delay
    ).start()
    if setup is not None:
        setup(api, options)
    collect_rarely()
    control = QuietServer(("127.0.0.1", 0), _control_handler(api))
    threading.Thread(target=control.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def orphaned() -> None:
        """The parent holds our stdin: end of file means it is gone, and so must we be."""
        sys.stdin.read()
        stop.set()

    threading.Thread(target=orphaned, daemon=True).start()
    control_url = f"http://127.0.0.1:{control.server_address[1]}"
    print(json.dumps({"url": api.url, "control": control_url}), flush=True)
    stop.wait()
    control.shutdown()
    api.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
