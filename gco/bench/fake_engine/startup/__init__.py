"""Each engine framework's start-up template for the fake engine, found by framework name:
`STARTUP_TEMPLATES["sglang"]`.

A framework's module (`vllm`, `tgi`, `sglang`) and its `<name>.log` hold the real lines the fake
logs as that engine and what its flags change in them (`base.StartupTemplate`); `lines` renders
them. Every framework registered in `gco.engines` has an entry here (tests/unit/engines/
test_registry.py holds it), one without a copied log the base template, which logs no lines; a new
one is its module, its log and one line of `STARTUP_TEMPLATES`.
"""

from __future__ import annotations

from gco import engines
from gco.bench.fake_engine.startup.base import StartupTemplate
from gco.bench.fake_engine.startup.sglang import SglangStartup
from gco.bench.fake_engine.startup.tgi import TgiStartup
from gco.bench.fake_engine.startup.vllm import VllmStartup
from gco.engines.sglang import Sglang
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm

STARTUP_TEMPLATES: dict[str, StartupTemplate] = {
    Vllm.name: VllmStartup(),
    Tgi.name: TgiStartup(),
    Sglang.name: SglangStartup(),
}


def template_for(name: str) -> StartupTemplate:
    """The start-up template of the registered framework `name`.

    Raises:
        UnknownFrameworkError: no framework is registered under `name`.
        MissingFrameworkEntryError: it is registered without an entry in `STARTUP_TEMPLATES`.
    """
    return engines.entry(STARTUP_TEMPLATES, name, "start-up template")
