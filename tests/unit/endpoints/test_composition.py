"""The store is composed, not inherited: no class of gco/endpoints inherits through more than one
other of gco's, and the two faces (the operator's, the reconcilers') share one table.

Error classes are left out: an error tree is a taxonomy by design (docs/layout.md, "Errors").
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import gco.endpoints
from gco.endpoints.region_writes import RegionWrites
from gco.endpoints.store import EndpointStore

MAX_DEPTH = 1  # a class may extend one class of gco's (a shared pydantic base), never a chain


def endpoint_classes() -> Iterator[type]:
    for found in pkgutil.walk_packages(gco.endpoints.__path__, "gco.endpoints."):
        module = importlib.import_module(found.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                yield value


def gco_ancestors(cls: type) -> list[str]:
    """The classes of gco that `cls` inherits from, nearest first."""
    return [base.__qualname__ for base in cls.__mro__[1:] if base.__module__.split(".")[0] == "gco"]


def test_no_class_of_the_endpoints_inherits_through_more_than_one_other() -> None:
    deep = {
        f"{cls.__module__}.{cls.__qualname__}": ancestors
        for cls in endpoint_classes()
        if not issubclass(cls, BaseException) and len(ancestors := gco_ancestors(cls)) > MAX_DEPTH
    }
    assert not deep, deep


def test_the_depth_rule_sees_a_chain() -> None:
    first = type("First", (), {"__module__": "gco.example"})
    second = type("Second", (first,), {"__module__": "gco.example"})
    third = type("Third", (second,), {"__module__": "gco.example"})
    assert gco_ancestors(third) == ["Second", "First"]
    assert gco_ancestors(type("Outside", (dict,), {"__module__": "gco.example"})) == []


def test_the_faces_share_one_table_and_the_reconcilers_sees_no_operator_write() -> None:
    store = EndpointStore(client=None, table_name="t")
    assert store.region_writes.table is store.table  # one clock moves updated_at for both faces
    operator_writes = {
        "create",
        "update_desired_state",
        "start",
        "update_spec",
        "update_target_regions",
        "set_rollout_evidence",
        "scale",
    }
    assert operator_writes <= set(dir(EndpointStore))
    assert not operator_writes & set(dir(RegionWrites))
    assert not {"update_region_status", "forget_region", "purge"} & set(dir(EndpointStore))
