"""A Lambda handler's cold import loads only what the cold start needs (issue 39, docs/benchmarks.md).

Each handler imports the reconciler's code, pydantic's models and botocore's client machinery on its
first invocation, not at import: these tests import each handler module in a fresh interpreter and
fail when one of the deferred modules is loaded at import, such as by an eager import re-added at the
top of a handler or of a module it imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HANDLERS = ("lambdas.reconciler", "lambdas.sweep", "lambdas.rollout", "lambdas.rollout_starter")
# What the first invocation imports. `botocore` itself is absent from the list: Powertools' metrics
# import the package (its `__init__`, a few ms), not its session, client or loaders.
DEFERRED = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "botocore.loaders",
    "pydantic",
    "httpx",
    "gco.aws",
    "gco.secrets.endpoint_secrets",
    "gco.endpoints.spec",
    "gco.endpoints.store",
    "gco.reconcile.handler",
    "gco.reconcile.reconciler",
    "gco.reconcile.sweep",
    "gco.reconcile.expiry",
    # The rollout's: its service and steps, the evidence store, the statistics' numpy and scipy.
    "gco.rollout.service",
    "gco.rollout.traffic",
    "gco.evidence.store",
    "numpy",
    "scipy",
)
PROBE = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps([*sys.modules]))"


def loaded_by(module: str) -> set[str]:
    """The modules loaded in a fresh interpreter after importing `module` (run from the project root)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_s_import_defers_the_reconciler_and_the_sdk(handler: str) -> None:
    loaded = loaded_by(handler)
    assert handler in loaded
    assert sorted(set(DEFERRED) & loaded) == []


def test_the_probe_sees_an_eager_import() -> None:
    """The check can fail: the reconciler's module itself loads what the handlers defer."""
    loaded = loaded_by("gco.reconcile.reconciler")
    assert {"pydantic", "gco.endpoints.spec", "botocore.session"} <= loaded
    assert {"gco.rollout.service", "numpy", "pydantic"} <= loaded_by("gco.rollout.service")
