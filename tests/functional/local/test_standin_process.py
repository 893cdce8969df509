"""The stand-in API server as a process of its own serves the same API: it applies what the
reconciler's client sends, refuses what the API server refuses (no token, a verb the grant lacks),
and reports what it created on its control face; it exits when stopped or when its parent is gone."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from gco.local.standin.process import StandInProcess
from gco.reconcile.errors import ClusterAuthError
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, make_record

TOKEN = "process-token"
RETRY = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.05)


def test_a_standin_process_serves_and_refuses_as_the_api_server() -> None:
    before = time.monotonic()
    with StandInProcess(token=TOKEN) as api:
        cluster = KubeCluster(api.url, static_token(TOKEN), timeout=5.0, retry=RETRY)
        objects = [
            obj for obj in render(make_record({}), EAST) if obj["metadata"].get("namespace") != "gco-system"
        ]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gco-inference"}}
        cluster.apply(namespace)
        for obj in objects:
            cluster.apply(obj)
        listed = cluster.list({ENDPOINT_LABEL: "llama"})
        assert {obj["kind"] for obj in listed} >= {"Deployment", "Service"}
        created = api.created_at()
        key = (DEPLOYMENT.plural, "gco-inference", "llama")
        assert before <= created[key] <= time.monotonic()  # one clock for both processes
        assert set(api.created_at(DEPLOYMENT.plural)) == {key}
        assert (
            api.created_count(DEPLOYMENT.plural) == api.created_count(DEPLOYMENT.plural, "gco-inference") == 1
        )
        assert api.created_count(DEPLOYMENT.plural, "gco-system") == 0
        assert api.created_count("services", "gco-inference") == 1
        assert api.requests()["PATCH"] == len(objects) + 1
        assert api.cpu_seconds() > 0
        with pytest.raises(ClusterAuthError):
            KubeCluster(api.url, static_token("wrong"), timeout=5.0, retry=RETRY).list(
                {ENDPOINT_LABEL: "llama"}
            )
        refused = httpx.get(f"{api.url}/api/v1/secrets", headers={"Authorization": f"Bearer {TOKEN}"})
        assert refused.status_code == 403 and refused.json()["reason"] == "Forbidden"
        cluster.close()
    with pytest.raises(httpx.TransportError):
        httpx.get(api.url, timeout=2.0)


def test_a_standin_process_exits_when_its_parent_is_gone() -> None:
    """Its stdin is the parent's pipe: closed, the server stops (no orphan server left behind)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "gco.local.standin.process", "--token", TOKEN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    assert "url" in child.stdout.readline()
    child.stdin.close()
    assert child.wait(timeout=30) == 0
