"""Every function of the synthesized app runs what its template names: its handler's module is in its
own asset folder, and a bundle's asset holds that bundle's handlers only (two bundles are two assets).

Read from the cloud assembly as the local stack reads it (gco.local.assembly), not from the source."""

from __future__ import annotations

import json
from pathlib import Path

from gco.deployment.event_filter import check_filters
from gco.local.assembly import CloudAssembly, functions, mappings
from stacks.bundling import BUNDLES
from tests.cdk.synth_cache import Synthesized

BUNDLED_HANDLERS = {Path(name).stem: bundle for bundle in BUNDLES for name in bundle.handlers}


def test_every_function_s_handler_is_in_its_own_asset(synthesized: Synthesized) -> None:
    assembly = CloudAssembly.open(Path(synthesized.assembly.directory))
    checked = 0
    for stack in assembly.stacks.values():
        for function in functions(stack).values():
            if not function.is_python or function.code is None:
                continue
            where = f"{stack.name}/{function.logical_id} ({function.handler})"
            assert function.handler_file() is not None, (
                f"{where}: no {function.handler_module} in {function.code}"
            )
            bundle = BUNDLED_HANDLERS.get(function.handler_module)
            if bundle is not None:  # gco's own bundles: exactly their handlers at the asset's root
                shipped = sorted(path.name for path in function.code.glob("*.py"))
                assert shipped == sorted(bundle.handlers), where
            checked += 1
    # the stream, sweep and authorizer handlers in each of two Regions, the rollout's three
    assert checked >= 9


def test_the_regional_and_rollout_bundles_are_two_assets(synthesized: Synthesized) -> None:
    assembly = CloudAssembly.open(Path(synthesized.assembly.directory))
    codes: dict[str, set[Path]] = {}
    for stack in assembly.stacks.values():
        for function in functions(stack).values():
            bundle = BUNDLED_HANDLERS.get(function.handler_module)
            if bundle is not None and function.code is not None:
                codes.setdefault(bundle.name, set()).add(function.code)
    assert set(codes) == {bundle.name for bundle in BUNDLES}
    regional, rollout = (codes[bundle.name] for bundle in BUNDLES)
    assert not regional & rollout


def test_every_stream_mapping_s_filters_follow_lambda_s_rules(synthesized: Synthesized) -> None:
    """A filter Lambda would never match (a matcher on a map) fails here even where a construct built
    it without `stacks.constructs.stream_filter`."""
    assembly = CloudAssembly.open(Path(synthesized.assembly.directory))
    filtered = 0
    for stack in assembly.stacks.values():
        for mapping in mappings(stack).values():
            check_filters(json.dumps(pattern) for pattern in mapping.filters)
            filtered += bool(mapping.filters)
    assert filtered >= 1  # the rollout starter's
