"""Endpoint records: the spec model, the fenced store and their errors.

The package face is lazy (PEP 562): a name is imported from its module on first use, so a Lambda
handler that imports one module (`gco.endpoints.errors`, say) does not pay at cold start for the
others it never uses (`table`: creating the table is the local stack's and the CLI's job).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gco.endpoints.dynamo import Listing
    from gco.endpoints.errors import (
        EndpointError,
        EndpointExistsError,
        EndpointNotFoundError,
        InvalidSpecError,
        InvalidTransitionError,
        LostRaceError,
        MalformedRecordError,
        StoreUnavailableError,
    )
    from gco.endpoints.record import EndpointRecord, RegionStatus
    from gco.endpoints.spec import EndpointSpec, parse_spec, spec_json_schema
    from gco.endpoints.store import EndpointStore, default_table_name
    from gco.endpoints.table import init_table
    from gco.env import DEFAULT_TABLE

# Each public name and the module that defines it.
_HOMES = {
    "DEFAULT_TABLE": "gco.env",
    "EndpointError": "gco.endpoints.errors",
    "EndpointExistsError": "gco.endpoints.errors",
    "EndpointNotFoundError": "gco.endpoints.errors",
    "InvalidSpecError": "gco.endpoints.errors",
    "InvalidTransitionError": "gco.endpoints.errors",
    "LostRaceError": "gco.endpoints.errors",
    "MalformedRecordError": "gco.endpoints.errors",
    "StoreUnavailableError": "gco.endpoints.errors",
    "EndpointRecord": "gco.endpoints.record",
    "RegionStatus": "gco.endpoints.record",
    "EndpointSpec": "gco.endpoints.spec",
    "parse_spec": "gco.endpoints.spec",
    "spec_json_schema": "gco.endpoints.spec",
    "EndpointStore": "gco.endpoints.store",
    "Listing": "gco.endpoints.dynamo",
    "default_table_name": "gco.endpoints.store",
    "init_table": "gco.endpoints.table",
}

__all__ = [
    "DEFAULT_TABLE",
    "EndpointError",
    "EndpointExistsError",
    "EndpointNotFoundError",
    "EndpointRecord",
    "EndpointSpec",
    "EndpointStore",
    "InvalidSpecError",
    "InvalidTransitionError",
    "Listing",
    "LostRaceError",
    "MalformedRecordError",
    "RegionStatus",
    "StoreUnavailableError",
    "default_table_name",
    "init_table",
    "parse_spec",
    "spec_json_schema",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
