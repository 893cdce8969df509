"""MotoServer: the local AWS endpoint's process, its start-up poll, reset and stop."""

from __future__ import annotations

import socket

import httpx
import pytest

from gco import aws
from gco.local.errors import LocalStackError
from gco.local.moto.motoserver import MotoServer


def test_start_reset_and_stop_over_one_control_client() -> None:
    with MotoServer() as server:
        s3 = aws.client("s3", endpoint_url=server.url, region="us-east-1")
        s3.create_bucket(Bucket="before-reset")
        server.reset()
        assert s3.list_buckets()["Buckets"] == []
        server.reset()  # the control client is kept between calls
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}/moto-api/", timeout=1.0)
    with pytest.raises(LocalStackError, match="not started"):
        server.reset()


def test_a_server_that_exits_at_start_is_reported_with_its_status() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = MotoServer(port=taken.getsockname()[1], startup_timeout=60)
        with pytest.raises(LocalStackError, match=r"moto_server exited with status [1-9]"):
            server.start()
    with pytest.raises(LocalStackError, match="not started"):
        server.reset()
