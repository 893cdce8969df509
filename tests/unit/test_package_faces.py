"""The lazy package face (PEP 562) of `gco.endpoints`: every public name resolves to its home module's
object, and importing one module of the package does not import the others."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import gco.endpoints


def test_every_public_name_is_its_home_modules_object() -> None:
    for name in gco.endpoints.__all__:
        home = importlib.import_module(gco.endpoints._HOMES[name])
        assert getattr(gco.endpoints, name) is getattr(home, name), name
    assert set(gco.endpoints._HOMES) == set(gco.endpoints.__all__)
    assert set(gco.endpoints.__all__) <= set(dir(gco.endpoints))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = gco.endpoints.no_such_name


def test_submodules_still_import_through_the_face() -> None:
    from gco.endpoints import conditions, names

    assert names.__name__ == "gco.endpoints.names"
    assert conditions.__name__ == "gco.endpoints.conditions"


def test_one_module_of_the_endpoints_package_imports_none_of_the_others() -> None:
    probe = (
        "import sys, gco.endpoints.errors\n"
        "print(sorted(m for m in sys.modules if m.startswith('gco.endpoints.')))\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "['gco.endpoints.errors']"
