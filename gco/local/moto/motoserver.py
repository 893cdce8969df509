"""Runs a real moto server process on a free loopback port, for tests and the local stack.

moto stands in for the AWS APIs gco calls (DynamoDB and its streams, S3, Step Functions) when no
AWS account is at hand; it is reached over HTTP exactly as AWS would be (see `moto_app`).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx

from gco.local.errors import LocalStackError
from gco.local.processes.listen import free_port
from gco.processes.interpreter import python_module
from gco.processes.signals import stop_child


class MotoServer:
    """A moto server subprocess bound to 127.0.0.1; use as a context manager or start()/stop()."""

    def __init__(self, port: int | None = None, startup_timeout: float = 30.0) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        # One client for the server's control calls (the start-up poll, a reset per test): each new
        # httpx client loads the CA bundle into a fresh SSL context, tens of ms of CPU here.
        self._control: httpx.Client | None = None

    def start(self) -> MotoServer:
        """Start the server and wait until it answers.

        Raises:
            LocalStackError: it exited, or did not answer within `startup_timeout`.
        """
        env = {**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"}
        self._process = subprocess.Popen(
            python_module("gco.local.moto.moto_app", "--host", "127.0.0.1", "--port", str(self.port)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._control = httpx.Client(base_url=self.url, timeout=10.0)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            status = self._process.poll()
            if status is not None:
                self.stop()
                raise LocalStackError(f"moto_server exited with status {status}")
            try:
                self._control.get("/moto-api/", timeout=1.0)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise LocalStackError(f"moto_server did not answer on {self.url} within {self.startup_timeout} s")

    def reset(self) -> None:
        """Forget every resource (between tests).

        Raises:
            LocalStackError: the server is not started.
        """
        if self._control is None:
            raise LocalStackError("the moto server is not started")
        self._control.post("/moto-api/reset").raise_for_status()

    def enforce_iam(self) -> None:
        """Turn moto's IAM enforcement on (`/moto-api/reset-auth` with no free actions): from now every
        request needs credentials moto issued (an IAM user's keys, an assumed role's session) and is
        authorized against their principal's policies, as far as moto evaluates them
        (gco.local.assembly.iam says how far).

        Raises:
            LocalStackError: the server is not started.
        """
        if self._control is None:
            raise LocalStackError("the moto server is not started")
        self._control.post(RESET_AUTH, content=b"0").raise_for_status()

    def cpu_seconds(self) -> float | None:
        """CPU seconds (user and system) the server process has used so far (for benchmarks), from
        /proc; None where there is no /proc or the server is not running."""
        if self._process is None:
            return None
        try:
            stat = Path(f"/proc/{self._process.pid}/stat").read_text(encoding="ascii")
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def stop(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is None:
            return
        stop_child(self._process)
        self._process = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


RESET_AUTH = "/moto-api/reset-auth"  # its body: how many requests stay free of IAM checks


def enforce_iam(url: str) -> None:
    """`MotoServer.enforce_iam` for a moto server at `url` that this process did not start.

    Raises:
        httpx.HTTPError: the server did not take it.
    """
    httpx.post(url + RESET_AUTH, content=b"0", timeout=10).raise_for_status()
