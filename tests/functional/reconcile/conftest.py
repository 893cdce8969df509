"""Two Regions of reconcilers over the moto server's table stream and stand-in API servers: `local`
runs the source tree's reconciler library in this process (for the tests that inject faults into it
or read its sweep reports), `deployed_local` the synthesized app's Regional functions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.reconcilers import LocalReconcilers
from tests.functional.conftest import Deployed
from tests.unit.reconcile.records import EAST, WEST


@pytest.fixture
def local(store: EndpointStore, moto: MotoServer) -> Iterator[LocalReconcilers]:
    """The source tree's `Reconciler` of each Region, in this process."""
    with LocalReconcilers(store, [EAST, WEST], endpoint_url=moto.url, wait=1.0, poll=0.01) as stack:
        yield stack


@pytest.fixture
def deployed_local(deployed: Deployed) -> Iterator[LocalReconcilers]:
    """Each Region's stream function and sweep of the synthesized app, run from their assets under their
    roles (IAM enforced); `store` and `moto` are then `deployed`'s (tests/functional/conftest.py)."""
    with LocalReconcilers(
        deployed.store, [EAST, WEST], endpoint_url=deployed.server.url, wait=1.0, poll=0.01, app=deployed.app
    ) as stack:
        yield stack
