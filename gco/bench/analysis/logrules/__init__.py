"""Each engine family's log rules, found by framework name: `LOG_RULES["vllm"]`.

A family's module (`vllm`, `tgi`, `sglang`) reads its start-up log (configuration block, argument
dumps, attention backend and fallback lines, settings it did not know) and its launch command into
the bench's hard gates (`base.LogRules`), from real output in tests/fixtures/engine_logs, each file
naming its source; `syntax` splits the argument dumps they log. Every framework registered in
`gco.engines` has an entry here (tests/unit/engines/test_registry.py holds it); a new one is its
module and one line of `LOG_RULES`.
"""

from __future__ import annotations

from gco import engines
from gco.bench.analysis.logrules.base import LogRules
from gco.bench.analysis.logrules.sglang import SglangLogRules
from gco.bench.analysis.logrules.tgi import TgiLogRules
from gco.bench.analysis.logrules.vllm import VllmLogRules
from gco.engines.sglang import Sglang
from gco.engines.tgi import Tgi
from gco.engines.vllm import Vllm

LOG_RULES: dict[str, LogRules] = {
    Vllm.name: VllmLogRules(),
    Tgi.name: TgiLogRules(),
    Sglang.name: SglangLogRules(),
}


def rules_for(name: str) -> LogRules:
    """The log rules of the registered framework `name`.

    Raises:
        UnknownFrameworkError: no framework is registered under `name`.
        MissingFrameworkEntryError: it is registered without an entry in `LOG_RULES`.
    """
    return engines.entry(LOG_RULES, name, "log rules")


def registered() -> list[tuple[str, LogRules]]:
    """(name, rules) of every registered framework, in registration order.

    Raises:
        MissingFrameworkEntryError: a registered framework has no entry in `LOG_RULES`.
    """
    return [(name, rules_for(name)) for name in engines.names()]
