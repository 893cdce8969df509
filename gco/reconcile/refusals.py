"""Why a live record cannot be served in a Region at all: checks made before any plan, as pure functions.

Each returns the reason (recorded as the Region's terminal `error` status) or None. A record that is
deleted, or not for this Region, is never refused: its objects are removed whatever it names.
"""

from __future__ import annotations

from gco.endpoints.record import EndpointRecord
from gco.reconcile.access import Grant
from gco.reconcile.addons import missing_addons
from gco.reconcile.model_sources import refusal as source_refusal
from gco.reconcile.node_storage import refusal as storage_refusal
from gco.reconcile.objects import HPA, SCALED_OBJECT, SYSTEM_NAMESPACE
from gco.reconcile.render_scaling import uses_keda
from gco.reconcile.settings import RenderSettings
from gco.secrets import endpoint_secrets


def refusal(record: EndpointRecord | None, region: str, grant: Grant, settings: RenderSettings) -> str | None:
    """The first reason the record cannot be served in `region`, or None."""
    if record is None or record.is_deleted or region not in record.target_regions:
        return None
    return (
        _namespace(record, region, grant)
        or _addons(record, region, settings)
        or _source(record, settings)
        or _secrets(record, settings)
        or _storage(record, settings)
    )


def _namespace(record: EndpointRecord, region: str, grant: Grant) -> str | None:
    """Why the record's namespace cannot be served here (not in the grant), or None."""
    granted = [ns for ns in grant.namespaces if ns != SYSTEM_NAMESPACE]
    if record.namespace in granted:
        return None
    allowed = ", ".join(granted)
    return f"namespace {record.namespace} is not granted to gco in {region} (granted: {allowed})"


def _addons(record: EndpointRecord, region: str, settings: RenderSettings) -> str | None:
    """What the record's autoscaling needs and this Region's cluster lacks, or None."""
    autoscaling = record.spec.autoscaling
    if not autoscaling.enabled:
        return None
    missing = missing_addons((metric.type for metric in autoscaling.metrics), settings.addons)
    if not missing:
        return None
    kind = SCALED_OBJECT.kind if uses_keda(autoscaling) else HPA.kind
    return f"{kind} needs {', '.join(missing)} in {region}"


def _source(record: EndpointRecord, settings: RenderSettings) -> str | None:
    """Why the record's `model_source` cannot be read by its pods here, or None."""
    reason = source_refusal(record.spec.model_source, settings.model_sources)
    return None if reason is None else f"model_source: {reason}"


def _secrets(record: EndpointRecord, settings: RenderSettings) -> str | None:
    """Why the record's `secret_env` names a secret outside those its Region may read, or None."""
    found = endpoint_secrets.refusal(record.spec.secret_env, settings.endpoint_secrets)
    return None if found is None else f"{found[0]}: {found[1]}"


def _storage(record: EndpointRecord, settings: RenderSettings) -> str | None:
    """Why the record's model cannot fit the storage of any GPU node here, or None
    (gco.reconcile.node_storage)."""
    spec = record.spec
    if spec.accelerator != "nvidia" or spec.gpu_count == 0:
        return None
    return storage_refusal(
        spec.model_size_gib,
        gpus=spec.gpu_count,
        model=spec.gpu_type,
        instance_types=settings.gpu_instance_types,
        root_gib=settings.gpu_root_gib,
    )
