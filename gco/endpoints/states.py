"""The states an endpoint record names: what its owner wants (`DesiredState`) and what each Region
observed (`RegionState`).

Their own module, without pydantic, so that a reader of a record's few serving fields
(`gco.endpoints.serving`, the global authorizer's) need not import the record's models.
"""

from __future__ import annotations

from typing import Literal, get_args

DesiredState = Literal["deploying", "running", "stopped", "deleted"]
RegionState = Literal[
    "pending", "creating", "running", "updating", "stopping", "stopped", "deleting", "deleted", "error"
]
DESIRED_STATES: tuple[str, ...] = get_args(DesiredState)
REGION_STATES: tuple[str, ...] = get_args(RegionState)
LIVE_STATES = frozenset({"deploying", "running"})  # desired states in which the endpoint is served
