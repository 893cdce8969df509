"""The Region's shared inference proxy, rendered as pure functions of (settings, route table).

- `ConfigMap inference-proxy-routes`: the nginx.conf rendered from the routes, and the route table
  as JSON (for tools and for a local router);
- `Deployment inference-proxy`: an init container writes a serving key and self-signed certificate
  into a memory volume; the container `api-tls-proxy` (nginx, unprivileged, read-only root) serves
  TLS on 8443 and routes `/inference/<name>`. The pod template carries the configuration's digest,
  so a changed route table rolls the pods (nginx reads its configuration at start);
- `Service inference-proxy` (port `https`, the one the routes' Ingresses and the load balancer's
  target group binding name);
- `HorizontalPodAutoscaler inference-proxy-hpa` on the `ContainerResource` CPU of `api-tls-proxy`.

The certificate is self-signed because what connects to it (the load balancer, over TLS) does not
verify target certificates; callers are authenticated by the front door before they get here.
These objects are never deleted with an endpoint: they carry no endpoint label.
"""

from __future__ import annotations

from typing import Any

from gco.reconcile.objects import (
    COMPONENT_LABEL,
    CONFIG_MAP,
    DEPLOYMENT,
    HASH_ANNOTATION,
    HPA,
    MANAGED_BY,
    MANAGER,
    PROXY_SERVICE,
    SERVICE,
    SYSTEM_NAMESPACE,
    content_hash,
)
from gco.reconcile.proxy_settings import ProxySettings
from gco.reconcile.render import PROXY_PORT_NAME
from gco.reconcile.routes import (
    CONFIG_DIR,
    HEALTH_PATH,
    PROXY_PORT,
    TLS_DIR,
    RouteTable,
    nginx_conf,
    routes_json,
)
from gco.reconcile.settings import PROXY_CONTROLLER, PROXY_INGRESS_CLASS

PROXY_DEPLOYMENT = PROXY_SERVICE
PROXY_CONTAINER = "api-tls-proxy"
PROXY_HPA = "inference-proxy-hpa"
PROXY_CONFIG = "inference-proxy-routes"
PROXY_SERVICE_PORT = 443
CONFIG_DIGEST_ANNOTATION = "gco.dev/routes-digest"
NGINX_CONF = "nginx.conf"
CERT_ARGS = ("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365")
ROUTES_JSON = "routes.json"


def proxy_labels() -> dict[str, str]:
    return {MANAGED_BY: MANAGER, COMPONENT_LABEL: PROXY_SERVICE}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": SYSTEM_NAMESPACE, "labels": proxy_labels(), "annotations": {}}


def _config_map(table: RouteTable) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG_MAP.api_version,
        "kind": CONFIG_MAP.kind,
        "metadata": _meta(PROXY_CONFIG),
        "data": {
            NGINX_CONF: nginx_conf(table),
            ROUTES_JSON: routes_json(table),
        },
    }


def _tls_init(settings: ProxySettings) -> dict[str, Any]:
    subject = f"/CN={PROXY_SERVICE}.{SYSTEM_NAMESPACE}.svc"
    return {
        "name": "tls-cert",
        "image": settings.tls_init_image,
        "command": ["openssl"],
        "args": [*CERT_ARGS, "-subj", subject, "-keyout", f"{TLS_DIR}/tls.key", "-out", f"{TLS_DIR}/tls.crt"],
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": _container_security(),
        "volumeMounts": [{"name": "tls", "mountPath": TLS_DIR}],
    }


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _deployment(settings: ProxySettings, config_digest: str) -> dict[str, Any]:
    probe = {"httpGet": {"path": HEALTH_PATH, "port": PROXY_PORT_NAME, "scheme": "HTTPS"}}
    container = {
        "name": PROXY_CONTAINER,
        "image": settings.image,
        "command": ["nginx", "-c", f"{CONFIG_DIR}/{NGINX_CONF}", "-g", "daemon off;"],
        "ports": [{"name": PROXY_PORT_NAME, "containerPort": PROXY_PORT, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request},
            "limits": {"memory": settings.memory_request},
        },
        "readinessProbe": {**probe, "periodSeconds": 5},
        "livenessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 6},
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tls", "mountPath": TLS_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - the container's own scratch volume
        ],
    }
    return {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": _meta(PROXY_DEPLOYMENT),
        "spec": {
            "selector": {"matchLabels": proxy_labels()},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "revisionHistoryLimit": 3,
            "template": {
                "metadata": {
                    "labels": proxy_labels(),
                    "annotations": {CONFIG_DIGEST_ANNOTATION: config_digest},
                },
                "spec": {
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 101, "fsGroup": 101},
                    "automountServiceAccountToken": False,
                    "initContainers": [_tls_init(settings)],
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": PROXY_CONFIG}},
                        {"name": "tls", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
                    ],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": proxy_labels()},
                        }
                    ],
                },
            },
        },
    }


def _service() -> dict[str, Any]:
    return {
        "apiVersion": SERVICE.api_version,
        "kind": SERVICE.kind,
        "metadata": _meta(PROXY_SERVICE),
        "spec": {
            "type": "ClusterIP",
            "selector": proxy_labels(),
            "ports": [
                {
                    "name": PROXY_PORT_NAME,
                    "port": PROXY_SERVICE_PORT,
                    "targetPort": PROXY_PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }


def _hpa(settings: ProxySettings) -> dict[str, Any]:
    return {
        "apiVersion": HPA.api_version,
        "kind": HPA.kind,
        "metadata": _meta(PROXY_HPA),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": DEPLOYMENT.api_version,
                "kind": DEPLOYMENT.kind,
                "name": PROXY_DEPLOYMENT,
            },
            "minReplicas": settings.min_replicas,
            "maxReplicas": settings.max_replicas,
            "metrics": [
                {
                    "type": "ContainerResource",
                    "containerResource": {
                        "name": "cpu",
                        "container": PROXY_CONTAINER,
                        "target": {"type": "Utilization", "averageUtilization": settings.cpu_target},
                    },
                }
            ],
        },
    }


def _sealed(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["annotations"][HASH_ANNOTATION] = content_hash(obj)
    return obj


def render_proxy(settings: ProxySettings, table: RouteTable) -> list[dict[str, Any]]:
    """The proxy's objects, in apply order (configuration first), each carrying its content digest."""
    config = _config_map(table)
    digest = content_hash(config["data"])
    return [_sealed(obj) for obj in (config, _deployment(settings, digest), _service(), _hpa(settings))]


def ingress_class() -> dict[str, Any]:
    """The IngressClass the routes name, implemented by the shared proxy (created by the stack)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": PROXY_INGRESS_CLASS, "labels": {MANAGED_BY: MANAGER}},
        "spec": {"controller": PROXY_CONTROLLER},
    }


def target_group_binding(target_group_arn: str) -> dict[str, Any]:
    """Registers the proxy's pods (by IP) in the front door's load balancer target group.

    The AWS Load Balancer Controller serves this kind (elbv2.k8s.aws); the stack applies it.
    """
    return {
        "apiVersion": "elbv2.k8s.aws/v1beta1",
        "kind": "TargetGroupBinding",
        "metadata": {"name": PROXY_SERVICE, "namespace": SYSTEM_NAMESPACE, "labels": {MANAGED_BY: MANAGER}},
        "spec": {
            "serviceRef": {"name": PROXY_SERVICE, "port": PROXY_SERVICE_PORT},
            "targetGroupARN": target_group_arn,
            "targetType": "ip",
        },
    }
