"""Assembling the whole app from a validated config (app.py and the tests both call `build_app`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import App, Aspects, Environment, Stack, Tags
from cdk_nag import (
    AwsSolutionsChecks,
    HIPAASecurityChecks,
    NIST80053R5Checks,
    PCIDSS321Checks,
    ServerlessChecks,
)

from stacks.config import DEPLOYMENT_TAG, GcoConfig
from stacks.global_stack import GlobalStack, KeysStack
from stacks.nag.global_suppressions import global_front_door_suppressions
from stacks.nag.observability_suppressions import api_account_suppressions, container_insights_suppressions
from stacks.nag.rollout_suppressions import rollout_suppressions
from stacks.nag.suppression import Suppression
from stacks.nag.suppressions import (
    apply,
    global_suppressions,
    regional_suppressions,
    runner_suppressions,
)
from stacks.nag.suppressions_k8s import (
    front_door_suppressions,
    kubectl_provider_suppressions,
    model_access_suppressions,
)
from stacks.regional import RegionalStack
from stacks.runner import RunnerStack

CROSS_STACK_REFERENCES = "@aws-cdk/core:defaultCrossStackReferences"
NAG_PACKS = (AwsSolutionsChecks, ServerlessChecks, NIST80053R5Checks, HIPAASecurityChecks, PCIDSS321Checks)
# CDK's own switch for its built-in template validation ("CloudFormation Validate": cfn-lint's rules
# built to WebAssembly, run on every synth since aws-cdk-lib 2.2xx; App `builtinCloudFormationValidation`).
VALIDATION_ENV = "CDK_VALIDATION"


def builtin_validation(environ: Mapping[str, str]) -> bool:
    """Whether `cdk synth` runs CDK's built-in template validation: only with `CDK_VALIDATION=true`.

    Off by default because it costs more than half of a whole-app synth (starting its WebAssembly
    engine and validating five templates: benchmarks/synth.py, docs/benchmarks.md) and repeats what
    the test command checks anyway: cfn-lint itself runs over every synthesized template
    (tests/cdk/test_cfn_lint.py), and the tests synthesize with the built-in validation on (CDK's
    default for an App they make). CloudFormation validates each change set again at deploy.
    """
    return environ.get(VALIDATION_ENV, "").strip().lower() == "true"


def new_app(environ: Mapping[str, str], **app_kwargs: Any) -> App:
    """The App `cdk synth` runs (app.py, benchmarks/synth.py): CDK's defaults, but the built-in
    template validation as `builtin_validation` decides."""
    return App(builtin_cloud_formation_validation=builtin_validation(environ), **app_kwargs)


@dataclass
class GcoApp:
    """The app and its stacks, by role."""

    app: App
    global_stack: GlobalStack
    runner: RunnerStack
    regional: dict[str, RegionalStack] = field(default_factory=dict)
    keys: dict[str, KeysStack] = field(default_factory=dict)
    suppressions: list[Suppression] = field(default_factory=list)

    @property
    def stacks(self) -> list[Stack]:
        return [*self.keys.values(), self.global_stack, *self.regional.values(), self.runner]


def build_app(config: GcoConfig, *, app: App | None = None, nag: bool = True, **app_kwargs: Any) -> GcoApp:
    """Every stack of a deployment: keys per replica Region, global, one Regional per Region, runner.

    Deploy order (stack dependencies): keys -> global -> Regional -> runner. The global stack's runner
    workflow finds the runner stack's launch template and role by name, so it needs nothing from it.
    """
    app = app or App(**app_kwargs)
    if app.node.try_get_context(CROSS_STACK_REFERENCES) is None:
        app.node.set_context(CROSS_STACK_REFERENCES, "strong")

    def env(region: str) -> Environment:
        return Environment(account=config.account, region=region)

    keys = {
        r: KeysStack(app, config.name("keys", r), config=config, env=env(r)) for r in config.replica_regions
    }
    global_stack = GlobalStack(app, config.name("global"), config=config, env=env(config.home_region))
    for keys_stack in keys.values():
        global_stack.add_stack_dependency(keys_stack)
    regional: dict[str, RegionalStack] = {}
    for region in config.regions:
        table_key = keys[region].key if region in keys else global_stack.table_key
        regional_stack = RegionalStack(
            app, config.name("regional", region), config=config, table_key=table_key, env=env(region)
        )
        regional_stack.add_stack_dependency(global_stack)
        regional[region] = regional_stack
    runner = RunnerStack(
        app,
        config.name("runner"),
        config=config,
        bucket=global_stack.evidence.bucket,
        bucket_key=global_stack.table_key,
        regional=regional[config.home_region],
        env=env(config.home_region),
    )
    result = GcoApp(app=app, global_stack=global_stack, runner=runner, regional=regional, keys=keys)
    for stack in result.stacks:
        Tags.of(stack).add(DEPLOYMENT_TAG, config.prefix)
    result.suppressions = [
        *global_suppressions(global_stack),
        *[item for stack in regional.values() for item in regional_suppressions(stack, config.home_region)],
        *[item for stack in regional.values() for item in front_door_suppressions(stack)],
        *[
            item
            for stack in regional.values()
            for item in model_access_suppressions(stack, config.model_sources)
        ],
        *[item for stack in regional.values() for item in kubectl_provider_suppressions(stack)],
        *[item for stack in regional.values() for item in api_account_suppressions(stack)],
        *[item for stack in regional.values() for item in container_insights_suppressions(stack)],
        *[
            item
            for stack in regional.values()
            if stack.global_front_door is not None
            for item in global_front_door_suppressions(stack)
        ],
        *runner_suppressions(runner, config.regions, config.home_region, config.prefix),
        *rollout_suppressions(global_stack, config.regions, config.prefix),
    ]
    for stack in result.stacks:
        root = f"/{stack.stack_name}/"  # one jsii round trip per stack, not one per suppression
        apply(stack, [item for item in result.suppressions if item.path.startswith(root)])
    if nag:
        for pack in NAG_PACKS:
            Aspects.of(app).add(pack(verbose=True))
    return result


def nag_findings(assembly: Any) -> list[tuple[str, str]]:
    """Unsuppressed cdk-nag errors and warnings of a synthesized assembly: (construct path, rule)."""
    found = []
    for artifact in assembly.stacks:
        for message in artifact.messages:
            if message.level.value.lower() in ("error", "warning"):
                found.append((message.id, str(message.entry.data).split(": ", 1)[0]))
    return found
