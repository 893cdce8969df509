"""The Region's shared inference proxy, rendered as pure functions of its settings (not of the routes).

- `ConfigMap inference-proxy-conf`: the nginx.conf (`proxy_conf.py`), the same for any routes;
- `Deployment inference-proxy`: an init container writes a serving key and self-signed certificate
  into a memory volume; the container `api-tls-proxy` (nginx, unprivileged, read-only root) serves
  TLS on 8443 and routes `/inference/<name>` by the route shards (`route_shards.py`), mounted as one
  projected volume. The kubelet updates a mounted ConfigMap's files in place when the ConfigMap
  changes ("Mounted ConfigMaps are updated automatically", kubernetes.io/docs/concepts/
  configuration/configmap/#mounted-configmaps-are-updated-automatically), by swapping the volume's
  `..data` link to a new directory (k8s.io/kubernetes `pkg/volume/util/atomic_writer.go`); the
  container `route-reloader` (the same image, a shell loop) sees the link change and sends nginx's
  master SIGHUP, a graceful reload: new workers take the new routes, old ones finish their requests
  (https://nginx.org/en/docs/control.html). The pod shares its process namespace so the reloader can
  signal nginx. A route change thus restarts no pod and rolls nothing: the pod template carries
  only the nginx.conf's digest, which no route changes;
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
    PROXY_PORT_NAME,
    PROXY_SERVICE,
    SERVICE,
    SYSTEM_NAMESPACE,
    content_hash,
)
from gco.reconcile.proxy.proxy_conf import nginx_conf
from gco.reconcile.proxy.proxy_settings import PROXY_CONTROLLER, PROXY_INGRESS_CLASS, ProxySettings
from gco.reconcile.proxy.route_shards import SHARDS, shard_name
from gco.reconcile.proxy.routes import CONFIG_DIR, HEALTH_PATH, PROXY_PORT, ROUTES_DIR, STATUS_PORT, TLS_DIR

PROXY_DEPLOYMENT = PROXY_SERVICE
PROXY_CONTAINER = "api-tls-proxy"
PROXY_HPA = "inference-proxy-hpa"
PROXY_CONFIG = "inference-proxy-conf"
RELOADER_CONTAINER = "route-reloader"
RELOAD_POLL_S = 2  # how often the reloader looks at the routes volume
PROXY_SERVICE_PORT = 443
CONFIG_DIGEST_ANNOTATION = "gco.dev/routes-digest"
NGINX_CONF = "nginx.conf"
CERT_ARGS = ("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365")
STATUS_PORT_NAME = "status"
# The reloader (module docstring). It signals nginx's master only once that master has forked a worker:
# nginx writes its pid file and installs its signal handlers before its master loop
# (src/core/nginx.c `main`: `ngx_init_signals`, `ngx_create_pidfile`, then `ngx_master_process_cycle`),
# and acts on a SIGHUP only in that loop, which first blocks the signals and forks the workers, then
# waits in `sigsuspend` (src/os/unix/ngx_process_cycle.c). A HUP taken before the loop only sets a
# flag the loop reads after the next signal: the reload is lost, and nginx would serve the routes it
# started with until the next change (seen with nginx 1.22 signalled 2.8 ms after its start). A
# process whose parent is the master (`PPid:` in /proc/<pid>/status, the pod's shared process
# namespace) means the loop runs. The link is remembered only once the signal was sent, so a HUP
# held back goes out on a later pass.
RELOADER_SCRIPT = (
    'last=""; while true; do '
    f"now=$(readlink {ROUTES_DIR}/..data); "
    'if [ -n "$now" ] && [ "$now" != "$last" ] && [ -s /tmp/nginx.pid ]; then '
    "pid=$(cat /tmp/nginx.pid); "
    'if grep -qsx "PPid:[[:space:]]*$pid" /proc/[0-9]*/status; then kill -HUP "$pid" && last="$now"; fi; '
    "fi; "
    f"sleep {RELOAD_POLL_S}; done"
)


def proxy_labels() -> dict[str, str]:
    return {MANAGED_BY: MANAGER, COMPONENT_LABEL: PROXY_SERVICE}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": SYSTEM_NAMESPACE, "labels": proxy_labels(), "annotations": {}}


def _config_map(settings: ProxySettings) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG_MAP.api_version,
        "kind": CONFIG_MAP.kind,
        "metadata": _meta(PROXY_CONFIG),
        "data": {NGINX_CONF: nginx_conf(settings.forwarding)},
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
        "ports": [
            {"name": PROXY_PORT_NAME, "containerPort": PROXY_PORT, "protocol": "TCP"},
            {"name": STATUS_PORT_NAME, "containerPort": STATUS_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request},
            "limits": {"memory": settings.memory_request},
        },
        "readinessProbe": {**probe, "periodSeconds": 5},
        "livenessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 6},
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "routes", "mountPath": ROUTES_DIR, "readOnly": True},
            {"name": "tls", "mountPath": TLS_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - the pod's own scratch volume
        ],
    }
    reloader = {
        "name": RELOADER_CONTAINER,
        "image": settings.image,
        "command": ["/bin/sh", "-c", RELOADER_SCRIPT],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "routes", "mountPath": ROUTES_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp", "readOnly": True},  # noqa: S108 - nginx's pid file
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
                    "shareProcessNamespace": True,  # the reloader signals nginx's master
                    "initContainers": [_tls_init(settings)],
                    "containers": [container, reloader],
                    "volumes": [
                        {"name": "config", "configMap": {"name": PROXY_CONFIG}},
                        {"name": "routes", "projected": {"sources": _route_sources()}},
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


def _route_sources() -> list[dict[str, Any]]:
    """Every route shard, optional: a pod starts before the route keeper has written them all."""
    return [{"configMap": {"name": shard_name(shard), "optional": True}} for shard in range(SHARDS)]


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


def render_proxy(settings: ProxySettings) -> list[dict[str, Any]]:
    """The proxy's objects, in apply order (configuration first), each carrying its content digest."""
    config = _config_map(settings)
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
