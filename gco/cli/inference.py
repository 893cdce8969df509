"""`gco inference ...`: endpoint records from the command line (stable surface for scripts).

Commands parse options, call `gco.endpoints`, and print the record as a table or JSON.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

import click

from gco import aws, engines
from gco.cli import views
from gco.cli.admission import (
    admitter,
    allow_unvalidated_option,
    deploy_size,
    fitting,
    update_size,
    warn,
)
from gco.cli.common import (
    STRICT_INT,
    CheckedPath,
    allow_new_regions_option,
    check_connection,
    connection_options,
    emit,
    emit_table,
    name_argument,
    open_store,
    parse_pairs,
    timeout_option,
)
from gco.cli.lazy import LazyGroup
from gco.cli.progress import purge_progress, ready_progress, reconciler_watch, region_served
from gco.cli.wait import wait_for
from gco.endpoints import EndpointRecord, default_table_name, init_table, names, observed_state, operations
from gco.endpoints.errors import EndpointNotFoundError, InvalidSpecError
from gco.endpoints.limits import checked_spec
from gco.endpoints.observed_state import OBSERVED_STATES
from gco.endpoints.record import DEFAULT_NAMESPACE
from gco.endpoints.spec import spec_json_schema
from gco.endpoints.specfile import load_spec_file
from gco.endpoints.states import DESIRED_STATES
from gco.env import ENDPOINT_URL_ENV
from gco.inference.invoke import INVOKE_URLS_ENV, local_bases
from gco.inference.regional_outputs import endpoint_urls
from gco.reconcile.access import ungranted_namespace
from gco.reconcile.heartbeat import Liveness
from gco.reconcile.model_sources import check_model_source, prefixes_from_env


class FrameworkChoice(click.Choice[str]):
    """`--framework`: the frameworks registered when the command runs (`gco.engines`), so that one
    registered after this module loaded is a choice too."""

    def __init__(self) -> None:
        super().__init__(engines.names())

    @property
    def choices(self) -> tuple[str, ...]:
        return engines.names()

    @choices.setter
    def choices(self, _: object) -> None:
        """click.Choice's own `__init__` sets the choices; the registry is their source instead."""


LIST_STATES = tuple(dict.fromkeys((*DESIRED_STATES, *OBSERVED_STATES)))
SPEC_FLAGS: tuple[tuple[str, str, Any, str], ...] = (
    ("--image", "image", str, "Container image (name[:tag][@sha256:digest])."),
    ("--framework", "framework", FrameworkChoice(), "Serving framework."),
    ("--port", "port", STRICT_INT, "Container port."),
    ("--replicas", "replicas", STRICT_INT, "Replicas per Region."),
    ("--gpu-count", "gpu_count", STRICT_INT, "GPUs per replica."),
    ("--gpu-type", "gpu_type", str, "GPU instance family or type."),
    ("--accelerator", "accelerator", click.Choice(["nvidia", "neuron"]), "Accelerator kind."),
    ("--capacity-type", "capacity_type", click.Choice(["on-demand", "spot"]), "Node capacity type."),
    ("--model-id", "model_id", str, "Model id served."),
    ("--model-revision", "model_revision", str, "Model revision (commit)."),
    ("--model-source", "model_source", str, "s3:// URI synced by an init container."),
    (
        "--model-size-gib",
        "model_size_gib",
        STRICT_INT,
        "Model size on disk (GiB), the node storage the pod asks; read from --model-source if not given.",
    ),
    ("--health-check-path", "health_check_path", str, "Health path probed."),
)


def spec_options(command: Any) -> Any:
    """The spec flags shared by deploy and update; each overrides the same field of --spec FILE."""
    for flag, dest, kind, help_text in reversed(SPEC_FLAGS):
        command = click.option(flag, dest, type=kind, default=None, help=help_text)(command)
    command = click.option(
        "--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Container environment (repeatable)."
    )(command)
    return click.option(
        "--spec",
        "spec_file",
        type=CheckedPath(path_type=Path, dir_okay=False),
        default=None,
        help="JSON or YAML file with the whole spec.",
    )(command)


def spec_changes(options: dict[str, Any]) -> dict[str, Any]:
    changes = {dest: options[dest] for _, dest, _, _ in SPEC_FLAGS if options.get(dest) is not None}
    if options.get("env_pairs"):
        changes["env"] = parse_pairs(options["env_pairs"], "--env")
    return changes


def show(record: EndpointRecord, output: str, stale: views.Stale | None = None) -> None:
    """The record: `--output json|yaml` its stored fields and `observed`; a table otherwise, the
    desired state as `observed_state.desired_shown` reads it (the stored value in parentheses when it
    differs). `stale`: the Regions whose observation is stale (`list` and `status` read them)."""
    if output != "table":
        emit({**record.to_json(), "observed": views.observed_json(record, stale)}, output)
        return
    spec = record.spec
    total = observed_state.aggregate(record, stale)
    shown = observed_state.desired_shown(record)
    stored = f" (stored: {record.desired_state})" if shown != record.desired_state else ""
    click.echo(f"name:          {record.endpoint_name}")
    click.echo(f"desired_state: {shown}{stored}")
    click.echo(f"observed:      {total}")
    click.echo(f"lifecycle_id:  {record.lifecycle_id}")
    click.echo(f"image:         {spec.image} ({spec.framework}, {spec.replicas} x {spec.gpu_count} GPU)")
    if (canary := views.canary_line(record)) is not None:
        click.echo(canary)
    click.echo(f"namespace:     {record.namespace}   path: {record.ingress_path}")
    click.echo(f"updated_at:    {record.updated_at}")
    for line in views.admission_lines(record):
        click.echo(line)
    emit_table(views.REGION_HEADERS, views.region_rows(record, stale))


# A LazyGroup: `gco` adds `rollout` by a loader (its analysis imports numpy, a fifth of the start-up).
@click.group(cls=LazyGroup)
def inference() -> None:
    """Endpoint records: deploy, inspect, change and delete inference endpoints."""


@inference.command()
@name_argument
@click.option("--region", "regions", multiple=True, help="Target Region (repeatable).")
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True)
@click.option("--label", "label_pairs", multiple=True, metavar="KEY=VALUE", help="Record label (repeatable).")
@click.option("--created-by", default=None, help="Who created it [default: the OS user].")
@click.option("--wait/--no-wait", default=False, help="Wait until every Region runs it.")
@timeout_option
@allow_new_regions_option
@allow_unvalidated_option
@spec_options
@connection_options
def deploy(
    name: str,
    regions: tuple[str, ...],
    namespace: str,
    label_pairs: tuple[str, ...],
    created_by: str | None,
    wait: bool,
    timeout: float,
    allow_new_regions: bool | None,
    allow_unvalidated: str | None,
    spec_file: Path | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
    **options: Any,
) -> None:
    """Create endpoint NAME in every --region.

    \b
    Example:
      gco inference deploy chat --image vllm/vllm-openai:v0.6.3 \\
        --model-id HuggingFaceTB/SmolLM2-135M --region us-east-1 --region us-west-2 --wait
    """
    check_connection(endpoint_url, table_name)
    spec = load_spec_file(spec_file) if spec_file else {}
    spec.update(spec_changes(options))
    _check_model_source(spec)
    if "image" not in spec:
        raise InvalidSpecError("--image", "is required (or give image in --spec)")
    if not regions:
        raise InvalidSpecError("--region", "name at least one Region")
    ungranted = ungranted_namespace(names.namespace(namespace))
    if ungranted is not None:  # the reconciler would refuse it: refused here, as the matrix does
        raise InvalidSpecError("namespace", ungranted)
    store = open_store(endpoint_url, table_name, allow_new_regions=allow_new_regions or None)
    parsed = checked_spec(spec)  # bad input before the policy is read: exit 2, nothing asked
    parsed = deploy_size(spec, parsed, endpoint_url)  # model_size_gib read from the source, checked
    targets = names.region_list(regions, allow_new=store.allow_new_regions)
    hook = admitter("deploy", endpoint_url, allow_unvalidated)
    record = operations.create(
        store,
        name,
        parsed,
        targets,
        namespace=namespace,
        labels=parse_pairs(label_pairs, "--label"),
        created_by=created_by or getpass.getuser(),
        admit=hook,
    )
    warn(hook)
    _warn_unserved(name, record.target_regions, store.table_name, endpoint_url)
    if wait:
        served = region_served(name, endpoint_url)
        reconcilers = reconciler_watch(store.table_name, endpoint_url)
        lifecycle = record.lifecycle_id
        record = wait_for(
            lambda: ready_progress(store, name, served, reconcilers, lifecycle),
            what=f"{name} ready",
            timeout=timeout,
        )
    show(record, output)


def _warn_unserved(name: str, regions: list[str], table_name: str, endpoint_url: str | None) -> None:
    """A warning on stderr for each of `regions` whose reconciler is not live (no heartbeat, or one past
    its bound: a Region gco is not deployed to, or one gone silent): the endpoint stays pending there."""
    watch = reconciler_watch(table_name, endpoint_url)
    for region in regions:
        check = watch.check(region)
        if isinstance(check, Liveness) and not check.live:
            click.echo(
                f"warning: {region}: {check.describe()}; {name} stays pending there until a "
                f"reconciler serves {region}, and a delete waits for it "
                f"(gco inference regions {name} --remove {region})",
                err=True,
            )


@inference.command(name="list")
@click.option(
    "--state",
    default=None,
    type=click.Choice(LIST_STATES),
    help="Only endpoints whose desired state or observed state (over their Regions) is STATE: "
    "`running` lists what runs in every Region, `deploying` what was asked to.",
)
@click.option("--region", default=None, help="Only endpoints targeting this Region.")
@allow_new_regions_option
@connection_options
def list_(
    state: str | None,
    region: str | None,
    allow_new_regions: bool | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """List endpoints, newest first; a record gco cannot read is named in a warning on stderr.

    \b
    Example:
      gco inference list --state running -o yaml
    """
    store = open_store(endpoint_url, table_name, allow_new_regions=allow_new_regions or None)
    listing = store.scan(target_region=region)
    for problem in listing.unreadable:
        click.echo(f"warning: {problem}", err=True)
    watch = reconciler_watch(store.table_name, endpoint_url)
    stale = {record.endpoint_name: watch.stale(record) for record in listing.records}
    records = [
        record
        for record in listing.records
        if state is None or observed_state.matches(record, state, stale[record.endpoint_name])
    ]
    if output != "table":
        emit(
            [
                {**record.to_json(), "observed": views.observed_json(record, stale[record.endpoint_name])}
                for record in records
            ],
            output,
        )
        return
    emit_table(views.LIST_HEADERS, views.list_rows(records, stale))


@inference.command()
@name_argument
@connection_options
def status(name: str, endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Show the record of NAME (strongly consistent read).

    \b
    Example:
      gco inference status chat -o json
    """
    store = open_store(endpoint_url, table_name)
    record = store.get(name, consistent_read=True)
    if record is None:
        raise EndpointNotFoundError(name)
    local = local_bases()  # the local stack's proxies (`gco local env`), where it is one
    urls = endpoint_urls(
        name,
        record.target_regions,
        local,
        lambda region: aws.client("cloudformation", region=region, endpoint_url=endpoint_url),
    )
    stale = reconciler_watch(store.table_name, endpoint_url).stale(record)
    if output != "table":
        emit(
            {**record.to_json(), "observed": views.observed_json(record, stale), "invoke_urls": urls}, output
        )
        return
    show(record, output, stale)
    for region, url in urls.items():
        missing = (
            f"(no proxy of {region} in {INVOKE_URLS_ENV})" if local else "(no Regional stack output found)"
        )
        click.echo(f"invoke {region}: {url or missing}")


@inference.command()
@name_argument
@click.option("--replicas", required=True, type=STRICT_INT, help="Replicas per Region.")
@connection_options
def scale(name: str, replicas: int, endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Set the replicas of a live endpoint (not autoscaled, not mooncake).

    \b
    Example:
      gco inference scale chat --replicas 3
    """
    show(operations.scale(open_store(endpoint_url, table_name), name, replicas), output)


@inference.command()
@name_argument
@connection_options
def stop(name: str, endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Scale NAME to zero in every Region, keeping its record.

    \b
    Example:
      gco inference stop chat
    """
    show(operations.stop(open_store(endpoint_url, table_name), name), output)


@inference.command()
@name_argument
@connection_options
def start(name: str, endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Start a stopped endpoint.

    \b
    Example:
      gco inference start chat
    """
    show(operations.start(open_store(endpoint_url, table_name), name), output)


@inference.command()
@name_argument
@allow_unvalidated_option
@spec_options
@connection_options
def update(
    name: str,
    allow_unvalidated: str | None,
    spec_file: Path | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
    **options: Any,
) -> None:
    """Change the spec: --spec FILE replaces it whole, flags change single fields.

    \b
    Example:
      gco inference update chat --image vllm/vllm-openai:v0.6.4
    """
    check_connection(endpoint_url, table_name)
    replace = load_spec_file(spec_file) if spec_file else None
    changes = spec_changes(options)
    if replace is None and not changes:
        raise InvalidSpecError("--spec", "give --spec FILE or at least one field flag")
    given = {**(replace or {}), **changes}
    _check_model_source(given)
    read = update_size(given, endpoint_url)  # model_size_gib from a new source that names none
    changes.update(read)
    store = open_store(endpoint_url, table_name)
    hook = admitter("update", endpoint_url, allow_unvalidated)
    admit = fitting(hook, read_from=given.get("model_source") if read else None)
    show(operations.update_spec(store, name, changes, replace=replace, admit=admit), output)
    warn(hook)


@inference.command()
@name_argument
@click.option("--add", "add", multiple=True, help="Region to add (repeatable).")
@click.option("--remove", "remove", multiple=True, help="Region to remove (repeatable).")
@click.option("--set", "replace", multiple=True, help="The whole target list (repeatable).")
@allow_new_regions_option
@allow_unvalidated_option
@connection_options
def regions(
    name: str,
    add: tuple[str, ...],
    remove: tuple[str, ...],
    replace: tuple[str, ...],
    allow_new_regions: bool | None,
    allow_unvalidated: str | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Show or change the target Regions; a removed Region is cleaned up by its reconciler. A Region
    added whose reconciler is not live (no heartbeat, or one past its bound) is added all the same,
    with a warning on stderr: nothing will run the endpoint there until a reconciler serves it.

    \b
    Example:
      gco inference regions chat --add eu-west-1 --remove us-west-2
    """
    store = open_store(endpoint_url, table_name, allow_new_regions=allow_new_regions or None)
    if add or remove or replace:
        hook = admitter("regions", endpoint_url, allow_unvalidated)
        record = operations.change_regions(
            store, name, add=add, remove=remove, replace=replace or None, admit=hook
        )
        warn(hook)
        # Each Region the command named as a target (checked whole by `change_regions` first: bad input
        # is refused before any read).
        named = {*add, *replace}
        _warn_unserved(name, [r for r in record.target_regions if r in named], store.table_name, endpoint_url)
    else:
        record = operations.fresh(store, name)
    show(record, output)


@inference.command()
@name_argument
@click.option("--expected-lifecycle-id", default=None, help="Delete only this lifecycle (automation).")
@click.option("--expected-owner-label", default=None, metavar="KEY=VALUE", help="Delete only if labelled so.")
@click.option(
    "--wait/--no-wait", default=False, help="Wait until every Region cleaned up and the record is purged."
)
@timeout_option
@connection_options
def delete(
    name: str,
    expected_lifecycle_id: str | None,
    expected_owner_label: str | None,
    wait: bool,
    timeout: float,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Delete NAME in every Region it was ever in; the record is purged after all acknowledge.

    \b
    Example:
      gco inference delete chat --wait --timeout 900
    """
    check_connection(endpoint_url, table_name)
    label = None
    if expected_owner_label is not None:
        ((key, value),) = parse_pairs([expected_owner_label], "--expected-owner-label").items()
        label = (key, value)
    store = open_store(endpoint_url, table_name)
    record = operations.delete(
        store, name, expected_lifecycle_id=expected_lifecycle_id, expected_owner_label=label
    )
    if wait:
        reconcilers = reconciler_watch(store.table_name, endpoint_url)
        wait_for(lambda: purge_progress(store, name, reconcilers), what=f"{name} purge", timeout=timeout)
        if output != "table":
            emit({"endpoint_name": name, "purged": True, "lifecycle_id": record.lifecycle_id}, output)
        else:
            click.echo(f"{name}: purged")
        return
    show(record, output)


@inference.command()
@connection_options
def schema(endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Print the JSON Schema of the endpoint spec: JSON by default (`-o table` too), or YAML with
    `-o yaml` (the same document). The connection options are accepted for uniformity.

    \b
    Example:
      gco inference schema > spec.schema.json
    """
    emit(spec_json_schema(), output)


@inference.command(name="init-table")
@connection_options
def init_table_command(endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Create the endpoint table with its stream where it does not exist (CDK owns it in AWS).

    \b
    Example:
      gco inference init-table --endpoint-url http://127.0.0.1:5000
    """
    check_connection(endpoint_url, table_name)
    table = table_name or default_table_name()
    created, description = init_table(aws.client("dynamodb", endpoint_url=endpoint_url), table)
    stream = description.get("LatestStreamArn", "")
    if output != "table":
        emit(
            {
                "table": table,
                "created": created,
                "stream_arn": stream,
                "region": aws.home_region(),
                "endpoint_url": endpoint_url or os.environ.get(ENDPOINT_URL_ENV),
            },
            output,
        )
    else:
        click.echo(f"table {table}: {'created' if created else 'already exists'} (stream {stream})")


def _check_model_source(spec: dict[str, Any]) -> None:
    """Refuse a `model_source` outside the prefixes endpoint pods may read, where `GCO_MODEL_SOURCES`
    names them (the Regional stack's `ModelSources` output); the reconciler refuses it in any case."""
    source = spec.get("model_source")
    if isinstance(source, str):
        check_model_source(source, prefixes_from_env(os.environ))
