"""`gco inference rollout`: a canary promoted or rolled back by a paired, measured comparison.

It runs the rollout here (`gco.rollout.steps.run`: traffic through each Region's way in, evidence in
`--run-dir` and, with `--evidence-bucket`, in S3), or, with `--via-step-functions` (or env
`GCO_ROLLOUT_STATE_MACHINE_ARN` set), starts the rollout state machine's execution and prints its
ARN. Exit status: 0 promoted (or the execution started), 1 rolled back, inconclusive or a runtime
failure, 2 bad input.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from gco import aws
from gco.cli.admission import admitter, allow_unvalidated_option, warn
from gco.cli.common import (
    STRICT_FLOAT,
    STRICT_INT,
    CheckedPath,
    connection_options,
    emit,
    name_argument,
    open_store,
)
from gco.endpoints import operations
from gco.evidence.page import render_html
from gco.evidence.store import EvidenceStore, LocalEvidenceStore, S3EvidenceStore
from gco.inference.invoke import InvokeFailedError, local_bases, tls_verification
from gco.inference.regional_outputs import invoke_urls
from gco.rollout import execution
from gco.rollout.decision import Rule
from gco.rollout.errors import RolloutInputError, RolloutNotPromotedError
from gco.rollout.state import DEFAULT_BLOCK_REQUESTS, DEFAULT_WEIGHT, RolloutSettings, RolloutState
from gco.rollout.steps import INTERRUPTED, Ports, check, run
from gco.rollout.traffic import HttpTraffic

DEFAULT_RUN_DIR = Path("gco-rollout")


def _settings(name: str, image: str, options: dict[str, Any]) -> RolloutSettings:
    try:
        rule = Rule(tolerance=options["tolerance"], max_blocks=options["max_blocks"])
        return RolloutSettings(
            endpoint=name,
            image=image,
            weight=options["weight"],
            replicas=options["replicas"],
            waves=options["waves"],
            rule=rule,
            block_requests=options["block_requests"],
            allow_unvalidated=options["allow_unvalidated"],
        )
    except ValidationError as error:  # the first bad option, named as the command spells it
        first = error.errors()[0]
        # A Rule's one check across fields compares --max-blocks with the rule's first look (min_blocks,
        # which no option sets): it is the option to name.
        field = "--" + str(first["loc"][-1] if first["loc"] else "max_blocks").replace("_", "-")
        raise RolloutInputError(field, str(first["msg"]).removeprefix("Value error, ")) from None


def _bases(name: str, regions: list[str], endpoint_url: str | None) -> tuple[dict[str, str], bool]:
    """Per Region the base URL endpoints answer under, and whether requests are signed (AWS)."""
    bases = local_bases()
    if bases:
        return {region: base for region, base in bases.items() if region in regions}, False
    found = invoke_urls(
        name, regions, lambda r: aws.client("cloudformation", region=r, endpoint_url=endpoint_url)
    )
    return {region: url.removesuffix(f"/{name}") for region, url in found.items() if url}, True


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (`kill`, a CI job cancelled, a terminal closed by its manager) raises as Ctrl-C does
    while the rollout runs, so it rolls back and records why before the process ends, instead of
    leaving its canary in the record. Only where signals can be set: the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _evidence_dir(run_dir: Path) -> Path:
    """`run_dir`'s evidence folder, made and writable, before the rollout changes anything (a rollout
    that could not keep its evidence must not have set a canary first).

    Raises:
        RolloutInputError: on `--run-dir`, when the folder cannot be made or written.
    """
    directory = run_dir / "evidence"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        why = error.strerror or error
        raise RolloutInputError("--run-dir", f"cannot create {directory}: {why}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise RolloutInputError("--run-dir", f"{directory} is not writable")
    return directory


def _report(state: RolloutState, output: str, run_dir: Path) -> None:
    if output != "table":
        emit(state.model_dump(mode="json"), output)
        return
    for region in state.regions:
        decision = region.decision
        click.echo(
            f"{region.region}: {region.phase}, {len(region.blocks)} blocks"
            + (f": {decision.reason}" if decision else "")
        )
    click.echo(f"{state.settings.endpoint}: {state.outcome} ({state.reason})")
    if state.evidence_ids:
        evidence = run_dir / "evidence" / f"{state.evidence_ids[-1]}.json"
        click.echo(f"evidence: {evidence}")
        click.echo(f"report page: {evidence.with_suffix('.html')}")


@click.command()
@name_argument
@click.option("--image", required=True, help="The build to roll out (the canary's image).")
@click.option("--regions-in-waves", "waves", is_flag=True, help="Analyse every target Region in turn.")
@click.option(
    "--tolerance", default=0.05, show_default=True, type=STRICT_FLOAT, help="Slowdown allowed (0.05: 5%)."
)
@click.option("--max-blocks", default=Rule().max_blocks, show_default=True, type=STRICT_INT)
@click.option(
    "--block-requests",
    default=DEFAULT_BLOCK_REQUESTS,
    show_default=True,
    type=STRICT_INT,
    help="Requests to each version per block (even).",
)
@click.option(
    "--weight", default=DEFAULT_WEIGHT, show_default=True, type=STRICT_INT, help="The canary's share, %."
)
@click.option("--replicas", default=None, type=STRICT_INT, help="Canary replicas per Region [default: 1].")
@click.option(
    "--run-dir", type=CheckedPath(path_type=Path, file_okay=False), default=DEFAULT_RUN_DIR, show_default=True
)
@click.option("--evidence-bucket", default=None, help="Also write the evidence to this S3 bucket.")
@click.option(
    "--via-step-functions", is_flag=True, help="Start the rollout state machine's execution instead."
)
@allow_unvalidated_option
@connection_options
def rollout(
    name: str,
    image: str,
    waves: bool,
    tolerance: float,
    max_blocks: int,
    block_requests: int,
    weight: int,
    replicas: int | None,
    run_dir: Path,
    evidence_bucket: str | None,
    via_step_functions: bool,
    allow_unvalidated: str | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Roll IMAGE out to NAME as a canary, promoted or rolled back by a paired comparison.

    \b
    Example:
      gco inference rollout chat --image vllm/vllm-openai:v0.6.4 --regions-in-waves
    """
    options = {
        "tolerance": tolerance,
        "max_blocks": max_blocks,
        "weight": weight,
        "replicas": replicas,
        "waves": waves,
        "block_requests": block_requests,
        "allow_unvalidated": allow_unvalidated,
    }
    settings = _settings(name, image, options)
    tls_verification()  # a bad GCO_INVOKE_CA_BUNDLE is bad input, before any call
    machine = os.environ.get(execution.STATE_MACHINE_ENV)
    if not (via_step_functions or machine):  # this process writes the evidence: a place for it first
        _evidence_dir(run_dir)
    store = open_store(endpoint_url, table_name)
    record = operations.fresh(store, name)
    check(record, settings)
    if via_step_functions or machine:
        if not machine:
            raise RolloutInputError(
                "--via-step-functions", f"set {execution.STATE_MACHINE_ENV} (the stack's output)"
            )
        client = aws.client("stepfunctions", region=aws.home_region(), endpoint_url=endpoint_url)
        arn = execution.start(client, machine, settings, record.lifecycle_id or "")
        if output != "table":
            emit({"execution_arn": arn}, output)
        else:
            click.echo(arn)
        return
    bases, signed = _bases(name, record.target_regions, endpoint_url)
    if not bases:
        raise InvokeFailedError(f"no invoke URL for {', '.join(record.target_regions)}")
    stores: list[EvidenceStore] = [LocalEvidenceStore(run_dir / "evidence")]
    if evidence_bucket:
        stores.append(S3EvidenceStore(evidence_bucket, endpoint_url=endpoint_url))
    traffic = HttpTraffic(name, bases, signed=signed, spec=record.spec)

    def progress(state: RolloutState) -> None:
        current = state.current()
        if current is not None:
            click.echo(f"{current.region}: {current.phase}, {len(current.blocks)} blocks", err=True)

    # The canary's image is admitted (or refused) by the validation policy in each Region it reaches,
    # as `gco inference canary` is (docs/matrix.md, "Validated builds").
    hook = admitter("canary", endpoint_url, allow_unvalidated)
    try:
        with _sigterm_interrupts():
            state = run(
                settings, Ports(store=store, traffic=traffic, evidence=stores, admit=hook), on_step=progress
            )
    except KeyboardInterrupt:  # `run` rolled back first: the canary is gone, the end is on the record
        raise RolloutNotPromotedError(f"{name}: rolled_back: {INTERRUPTED}; its canary removed") from None
    warn(hook)
    if state.evidence_ids:  # the last record's report page beside it (`gco bench report` reads it too)
        local = stores[0]
        assert isinstance(local, LocalEvidenceStore)
        path = local.path(state.evidence_ids[-1])
        path.with_suffix(".html").write_text(render_html(local.get(state.evidence_ids[-1])), encoding="utf-8")
    _report(state, output, run_dir)
    if state.outcome != "promoted":
        raise RolloutNotPromotedError(f"{name}: {state.outcome}: {state.reason}")


COMMANDS = (rollout,)
