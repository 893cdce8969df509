"""Two Regions of reconcilers over the moto server's table stream and stand-in API servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.reconcilers import LocalReconcilers
from tests.unit.reconcile.records import EAST, WEST


@pytest.fixture
def local(store: EndpointStore, moto: MotoServer) -> Iterator[LocalReconcilers]:
    with LocalReconcilers(store, [EAST, WEST], endpoint_url=moto.url, wait=1.0, poll=0.01) as stack:
        yield stack
