"""Endpoint records: the spec model, the fenced store and their errors."""

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
from gco.endpoints.store import EndpointStore, Listing, default_table_name
from gco.endpoints.table import init_table
from gco.env import DEFAULT_TABLE

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
