"""The identity of a matrix run (contract version 2): every input plus the parts the contract fixes.

A run writes it into its checkpoint; a resumed run recomputes it from the settings and must match
it exactly, or it refuses and names the first differing field path (in the settings' own terms,
`inference_runtimes[0].image`). Bump `CONTRACT_VERSION` whenever what the matrix deploys, asks or
checks changes shape, so a checkpoint of an older contract never resumes under a newer one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.reconcile.expiry import OWNER_LABEL
from gco.reconcile.proxy.render_proxy import PROXY_CONTAINER, PROXY_DEPLOYMENT, PROXY_HPA
from gco.validation import adapters
from gco.validation.settings import KEYS, MatrixSettings, settings_document

CONTRACT_VERSION = 2
ACCELERATOR = "nvidia"
ROLES = ("baseline", "hpa")
HPA_METRIC = "cpu"
PROXY_METRIC_TYPE = "ContainerResource"


def identity(settings: MatrixSettings) -> dict[str, Any]:
    """Contract version, every settings key in order, what the adapters derive, then the fixed parts."""
    document = settings_document(settings)
    contracts = [
        {
            "framework": runtime.framework,
            "request_path": adapters.request_path(runtime),
            "request_body": adapters.request_body(settings, runtime),
            "response_field": adapters.response_field(runtime),
            "model_info_path": adapters.model_info_path(runtime),
            "launch_env": adapters.launch_env(runtime),
            "launch_args": adapters.launch_args(runtime),
        }
        for runtime in settings.inference_runtimes
    ]
    return {
        "contract_version": CONTRACT_VERSION,
        **{key: document[key] for key in KEYS},
        "runtime_contracts": contracts,
        "accelerator": ACCELERATOR,
        "rewrite_image": False,
        "roles": list(ROLES),
        "hpa_metric": HPA_METRIC,
        "owner_label": OWNER_LABEL,
        "shared_proxy": {
            "namespace": SYSTEM_NAMESPACE,
            "deployment": PROXY_DEPLOYMENT,
            "hpa": PROXY_HPA,
            "container": PROXY_CONTAINER,
            "cpu_request": settings.proxy_tls_cpu_request,
            "cpu_target": settings.proxy_tls_cpu_target,
            "metric_type": PROXY_METRIC_TYPE,
        },
    }


def digest(document: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of an identity document."""
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def first_difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """The path of the first field (in the expected document's order) where the two differ, or None."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in expected or key not in actual:
                return where
            found = first_difference(expected[key], actual[key], where)
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for index, (left, right) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(left, right, f"{path}[{index}]")
            if found is not None:
                return found
        return None if len(expected) == len(actual) else f"{path}[{min(len(expected), len(actual))}]"
    same = type(expected) is type(actual) and expected == actual
    return None if same else (path or "(identity)")
