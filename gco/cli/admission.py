"""`--allow-unvalidated REASON` and the admission hook of `deploy`, `update`, `canary`, `regions`;
the model's size read from its source and checked against the GPU nodes (`deploy`, `update`).

The commands build the hook here (`gco.admission.from_environment`: the deployment's policy, its
evidence index, the registry resolver), hand it to the fenced write, and print its warnings on
stderr once the write landed (docs/cli.md, "Validated builds"). `deploy_size` and `update_size` fill
in `model_size_gib` from the `model_source` before anything is written, and `fitting` refuses in the
fenced write a model no GPU node could hold (gco.admission.model_size).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from gco.admission import Admitter, from_environment
from gco.admission.admit import Command
from gco.admission.model_size import NodeStorage, S3SourceSizer, check_fit, hub_note, read_size
from gco.endpoints.admissions import Admissions
from gco.endpoints.limits import checked_spec
from gco.endpoints.operations import AdmissionHook
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import EndpointSpec
from gco.reconcile.node_storage import SIZE_FIELD

F = TypeVar("F", bound=Callable[..., Any])


def allow_unvalidated_option(command: F) -> F:
    """`--allow-unvalidated REASON`: let in an image without passing matrix evidence, keeping why."""
    return click.option(
        "--allow-unvalidated",
        "allow_unvalidated",
        default=None,
        metavar="REASON",
        help="Under the validation policy enforce, run an image without passing matrix evidence in a "
        "target Region; REASON is kept in the record with who and when.",
    )(command)


def admitter(command: Command, endpoint_url: str | None, reason: str | None) -> Admitter:
    """The admission hook of `command`; the OS user is who admitted.

    Raises:
        InvalidSpecError: a bad reason (exit 2).
    """
    return from_environment(command, endpoint_url=endpoint_url, reason=reason, by=getpass.getuser())


def warn(hook: Admitter) -> None:
    """The hook's warnings (policy warn) on stderr."""
    for line in hook.warnings:
        click.echo(line, err=True)


def _read(spec: Mapping[str, Any], endpoint_url: str | None) -> int | None:
    # The S3 client is made only for a source to size: a deploy without one pays nothing.
    if spec.get(SIZE_FIELD) is not None or not isinstance(spec.get("model_source"), str):
        return None
    return read_size(spec, S3SourceSizer.connect(endpoint_url))


def deploy_size(spec: dict[str, Any], parsed: EndpointSpec, endpoint_url: str | None) -> EndpointSpec:
    """`parsed` with `model_size_gib` read from its `model_source` where it gives none, checked
    against the GPU nodes the environment names; where it names them, a Hub model without a size is
    noted on stderr (its size cannot be checked).

    Raises:
        InvalidSpecError: the source holds nothing, or the model fits no GPU node (exit 2).
        ModelSizeError: the source could not be listed (exit 1).
    """
    size = _read(spec, endpoint_url)
    if size is not None:
        parsed = checked_spec({**spec, SIZE_FIELD: size})
    storage = NodeStorage.from_env(os.environ)
    check_fit(parsed, storage, read_from=parsed.model_source if size else None)
    note = hub_note(parsed)
    if note is not None and storage is not None:
        click.echo(note, err=True)
    return parsed


def update_size(given: Mapping[str, Any], endpoint_url: str | None) -> dict[str, Any]:
    """The fields to add to an update's changes: `model_size_gib` read from the `model_source` the
    update names (`given`: the replacing spec and the flags) where it names no size, else none.

    Raises:
        InvalidSpecError, ModelSizeError: as `deploy_size`.
    """
    size = _read(given, endpoint_url)
    return {} if size is None else {SIZE_FIELD: size}


def fitting(hook: AdmissionHook, *, read_from: str | None = None) -> AdmissionHook:
    """`hook`, after refusing a spec whose model no GPU node of the environment could hold (the
    merged spec of an update, inside its fenced write, so nothing is written).

    Raises:
        InvalidSpecError: a bad `GCO_GPU_DISK_GIB` (exit 2).
    """
    storage = NodeStorage.from_env(os.environ)

    def admit(record: EndpointRecord | None, spec: EndpointSpec, targets: list[str]) -> Admissions | None:
        check_fit(spec, storage, read_from=read_from)
        return hook(record, spec, targets)

    return admit
