"""Lambda: one bounded step of a rollout, for the rollout state machine (`gco.rollout.service`).

`handler` begins or advances a rollout (at most `blocks_per_step` blocks per invocation: the state
machine loops); `give_up_handler` leaves the endpoint on the primary everywhere, called by every
step's Catch and by the EventBridge rule on an execution that ended ABORTED, TIMED_OUT or FAILED.
Requests go to each Region's front door (its Regional stack's `InvokeUrl`), signed with this function's
role; evidence goes to the evidence bucket (env `GCO_EVIDENCE_BUCKET`). The canary's image is admitted
by the deployment's validation policy in each Region it reaches before it is written there, as on the
CLI's path (`admission_for`).

Its cold import is Powertools and the lazy tracer alone: the rollout's code (pydantic's models,
botocore's client machinery, httpx, the statistics' numpy and scipy) is imported by the function that
needs it, at the first invocation (docs/benchmarks.md, "Lambda cold start";
tests/unit/lambdas/test_cold_imports.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from gco.reconcile.tracing import LazyTracer

if TYPE_CHECKING:
    from gco.endpoints.operations import AdmissionHook
    from gco.rollout.state import RolloutSettings
    from gco.rollout.steps import Ports

SERVICE = "gco-rollout"
FUNCTION_NAME_ENV = "AWS_LAMBDA_FUNCTION_NAME"  # set by Lambda in every function's environment
logger = Logger(service=SERVICE)
tracer = LazyTracer(service=SERVICE)


def admission_for(settings: RolloutSettings) -> AdmissionHook:
    """The validation policy's check of the canary's image in each Region it reaches, as `gco
    inference rollout` and `canary` check it: the deployment's policy (its SSM parameter, read in
    this, the home, Region), the evidence index, the registries; who admitted is this function.

    Raises:
        InvalidSpecError: the settings' `allow_unvalidated` reason is not plain text.
    """
    from gco.admission import from_environment  # at the first step only: the cold start stays short

    who = f"rollout state machine ({os.environ.get(FUNCTION_NAME_ENV, SERVICE)})"
    return from_environment("canary", reason=settings.allow_unvalidated, by=who)


def ports_for(settings: RolloutSettings) -> Ports:
    """The ports of a rollout: the table, its Regions' front doors, the evidence bucket, admission."""
    from gco import aws
    from gco.endpoints import EndpointStore, operations
    from gco.env import EVIDENCE_BUCKET_ENV
    from gco.evidence.store import S3EvidenceStore
    from gco.inference.regional_outputs import invoke_urls
    from gco.rollout.steps import Ports
    from gco.rollout.traffic import HttpTraffic

    name = settings.endpoint
    store = EndpointStore.connect()
    record = operations.fresh(store, name)
    found = invoke_urls(
        name, record.target_regions, lambda region: aws.client("cloudformation", region=region)
    )
    bases = {region: url.removesuffix(f"/{name}") for region, url in found.items() if url}
    traffic = HttpTraffic(name, bases, signed=True, spec=record.spec)
    evidence = [S3EvidenceStore(os.environ[EVIDENCE_BUCKET_ENV])]
    return Ports(store=store, traffic=traffic, evidence=evidence, admit=admission_for(settings))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from gco.rollout.service import advance

    answer = advance(event, ports_for)
    logger.info("rollout step", extra={"done": answer["done"], "waiting": answer["waiting"]})
    return answer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def give_up_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from gco.endpoints import EndpointStore
    from gco.rollout.service import give_up

    answer = give_up(event, ports_for, EndpointStore.connect())
    logger.info("rollout given up", extra={"removed": answer.get("removed")})
    return answer
