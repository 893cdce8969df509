"""A stand-in for the Kubernetes API server, over HTTP on loopback, for tests and the local stack.

There is no kube-apiserver on these machines; this serves the REST subset `KubeCluster` uses, so
the adapter's real wire code is what runs against it:

- `GET` of one object and label-selector lists (one namespace or all; equality, `!=` and `in`
  terms), paged with limit/continue, answered from a label index (`labelindex.py`) as the real
  server answers from its watch cache rather than by reading every object;
- server-side apply (`PATCH`, `application/apply-patch+yaml` with a JSON body) merged per field
  manager: each manager's last applied configuration is kept, and the object is their deep merge
  (maps merge, lists and scalars are replaced whole), so a manager that stops setting a field
  drops it unless another manager sets it; a non-forced apply that changes a value another
  manager set answers 409, a forced one takes those fields from the other managers;
- `DELETE` with `preconditions.uid` (409 on mismatch), immediate or after a termination delay;
- resourceVersions (one counter), metadata.generation bumped on spec changes, uids,
  creationTimestamp, managedFields (manager and time only);
- Deployment readiness: `status.readyReplicas` reaches the replica count `ready_delay` seconds
  (on the injectable clock) after the last spec change, unless a `replica_source` (the local
  stack's engine runner, `gco.local.kubelet`, which runs real processes) reports the replicas;
- authentication (a bearer token names a user) and authorization: every request is checked
  against the grant of `gco.reconcile.access` (the definition the Regional stack turns into the
  reconciler's RBAC), as RBAC would check it: verb (get/list/patch/delete), API group, resource,
  namespace (none for a cluster-wide list) and resource name; anything else is answered 403 with
  the API server's `Status` (reason Forbidden, its message) before the path is even resolved;
- namespaces as objects: an object may only be applied into an existing namespace (404
  `namespaces "x" not found` otherwise); `default` and `kube-system` exist from the start;
- a kind whose CRD is not installed (`crds`) is answered 404 `the server could not find the
  requested resource`, as for any resource the server does not serve;
- injected faults (any status such as 429/500/409, and timeouts that drop the request before or
  after it takes effect), answered before authorization as API Priority and Fairness does.

A controller's status (an autoscaler's) is written with `write_status`, without HTTP.

It does not model: watches, admission, defaulting or schema validation, pods or ReplicaSets,
HPA/KEDA controllers (a Deployment without replicas has 1; `gco.local.autoscaler` scales and
writes HPA status for the local stack), garbage collection of dependants,
namespace deletion (and the deletion of its objects), finalizers beyond the fixed termination
delay, strategic merge keys (lists are atomic), YAML bodies (only JSON, which is valid YAML),
RBAC objects themselves (the grant is fixed at start), or impersonation.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any, Protocol

from gco.reconcile import standin_http
from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.apistatus import Attributes, not_found
from gco.reconcile.apistatus import status as _status
from gco.reconcile.labelindex import LabelIndex, set_term, split_terms
from gco.reconcile.objects import ENDPOINT_LABEL, KINDS, NAMESPACE, SYSTEM_KINDS, Kind

RECONCILER_USER = "arn:aws:sts::000000000000:assumed-role/gco-reconciler/gco-reconciler"
PREEXISTING_NAMESPACES = ("default", "kube-system")
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
)


class ReplicaSource(Protocol):
    """Observed replica counts of a Deployment (what kubelets report), or None where it runs none."""

    def __call__(self, deployment: Mapping[str, Any]) -> dict[str, int] | None: ...


@dataclass
class Fault:
    """One injected fault: `status` answered without effect, or a timeout (`drop` before/after)."""

    status: int | None = None
    timeout: str | None = None  # "before": no effect; "after": the change is made, the answer lost
    method: str | None = None
    times: int = 1


@dataclass
class _Stored:
    kind: Kind
    applied: dict[str, dict[str, Any]]
    uid: str
    created: str
    resource_version: int
    generation: int
    changed_at: float
    deleting_since: float | None = None
    managed: dict[str, str] = field(default_factory=dict)
    merged: dict[str, Any] = field(default_factory=dict)  # the managers' configurations, merged
    status: dict[str, Any] | None = None  # written through the status subresource (a controller)


def _merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _leaves(value, (*prefix, str(key)))
    else:
        yield prefix, obj


def _drop(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    """Remove the leaf at `path` (and maps left empty by it)."""
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    parent.pop(path[-1], None)
    if len(path) > 1 and not parent:
        _drop(obj, path[:-1])


def _matches(labels: Mapping[str, str], query: str) -> bool:
    for term in split_terms(query):
        values = set_term(term)
        if values is not None:
            if labels.get(values[0]) not in values[1]:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        else:
            key, _, value = term.replace("==", "=").partition("=")
            if labels.get(key) != value:
                return False
    return True


class StandInKubeAPI:
    """The stand-in API server; use as a context manager or `start()`/`stop()`.

    Parameters:
        token: the bearer token it accepts (None: any bearer token), as `user`.
        user: the user the token authenticates as.
        grant: what that user may do (default: the reconciler's grant, as the stack binds it).
        namespaces: namespaces that exist from the start besides `default` and `kube-system`.
        ready_delay: seconds from a Deployment's spec change to all replicas ready.
        deletion_delay: seconds a deleted object stays (terminating) before it is gone.
        crds: the custom-resource kinds installed (default: KEDA's ScaledObject).
        clock: monotonic seconds, injectable for tests.
        fault_sleep: how long a timeout fault holds the connection (longer than the client's timeout).
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        user: str = RECONCILER_USER,
        grant: Grant = RECONCILER_GRANT,
        namespaces: Sequence[str] = (),
        ready_delay: float = 0.0,
        deletion_delay: float = 0.0,
        crds: frozenset[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        fault_sleep: float = 1.0,
    ) -> None:
        self.token = token
        self.user = user
        self.grant = grant
        self.ready_delay = ready_delay
        self.deletion_delay = deletion_delay
        self.clock = clock
        self.fault_sleep = fault_sleep
        custom = {"ScaledObject"} if crds is None else crds
        installed = [
            kind for kind in KINDS if "." not in kind.api_version.split("/")[0] or kind.kind in custom
        ]
        installed += [kind for kind in KINDS if kind.api_version.endswith("k8s.io/v1")]
        installed += SYSTEM_KINDS
        self._kinds = {(kind.prefix.lstrip("/"), kind.plural): kind for kind in installed}
        self._objects: dict[tuple[str, str, str], _Stored] = {}
        self._index: LabelIndex[tuple[str, str, str]] = LabelIndex()
        self._terminating: set[tuple[str, str, str]] = set()  # deleted, waiting out deletion_delay
        self.forbidden: list[Attributes] = []  # every request refused 403, for tests
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        self._version = 0
        self.requests: Counter[str] = Counter()
        self.created_at: dict[tuple[str, str, str], float] = {}  # (plural, ns, name) -> clock at creation
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self.replica_source: ReplicaSource | None = None  # set before start; called under the lock
        for namespace in (*PREEXISTING_NAMESPACES, *namespaces):
            self.apply_as(
                "kube-apiserver", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> StandInKubeAPI:
        api = self

        class Handler(standin_http.Handler):
            server_api = api

        server = standin_http.QuietServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="standin-kube-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StandInKubeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls -------------------------------------------------------------------------

    def inject(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def objects(self) -> list[dict[str, Any]]:
        """Every stored object as the API would return it (terminating ones included)."""
        with self._lock:
            self._expire()
            return [self._render(stored, key) for key, stored in sorted(self._objects.items())]

    def endpoint_objects(self) -> list[dict[str, Any]]:
        """The stored objects that belong to an endpoint (labelled with one), without gco's shared ones."""
        return [obj for obj in self.objects() if ENDPOINT_LABEL in (obj["metadata"].get("labels") or {})]

    def writes(self) -> int:
        return self.requests["PATCH"] + self.requests["DELETE"]

    def apply_as(
        self, manager: str, obj: Mapping[str, Any], *, force: bool = True
    ) -> tuple[int, dict[str, Any]]:
        """Server-side apply as another field manager (an operator, an autoscaler) without HTTP."""
        meta = obj.get("metadata") or {}
        kind = next(
            k
            for k in self._kinds.values()
            if k.kind == obj.get("kind") and k.api_version == obj.get("apiVersion")
        )
        return self._apply(kind, str(meta.get("namespace")), str(meta.get("name")), dict(obj), manager, force)

    def write_status(self, kind: Kind, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        """Replace an object's status as its controller does (the status subresource: no new
        generation); False when the object is not there."""
        with self._lock:
            stored = self._objects.get((kind.plural, namespace, name))
            if stored is None or stored.kind != kind:
                return False
            if stored.status != status:
                self._version += 1
                stored.resource_version = self._version
                stored.status = copy.deepcopy(dict(status))
            return True

    # -- the API -------------------------------------------------------------------------------

    def take_fault(self, method: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.method in (None, method):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def kind_for(self, prefix: str, plural: str) -> Kind | None:
        return self._kinds.get((prefix, plural))

    def authorize(self, attributes: Attributes) -> bool:
        """RBAC as the stack binds it: the grant's rules; a refusal is recorded in `forbidden`."""
        allowed = self.grant.allows(
            attributes.verb, attributes.group, attributes.resource, attributes.namespace, attributes.name
        )
        if not allowed:
            with self._lock:
                self.forbidden.append(attributes)
        return allowed

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(key[2] for key in self._objects if key[0] == NAMESPACE.plural)

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            self._expire()
            stored = self._objects.get((kind.plural, namespace, name))
            return (
                None
                if stored is None or stored.kind != kind
                else self._render(stored, (kind.plural, namespace, name))
            )

    def list(
        self, kind: Kind, namespace: str | None, label_selector: str
    ) -> tuple[list[dict[str, Any]], str]:
        with self._lock:
            self._expire()
            candidates = self._index.candidates(label_selector)
            scope = (
                self._objects.items()
                if candidates is None
                else ((key, self._objects[key]) for key in candidates if key in self._objects)
            )
            matched = [
                (key, stored)
                for key, stored in scope
                if stored.kind == kind
                and (namespace is None or key[1] == namespace)
                and _matches(stored.merged.get("metadata", {}).get("labels") or {}, label_selector)
            ]
            return [self._render(stored, key) for key, stored in sorted(matched)], str(self._version)

    def _apply(
        self, kind: Kind, namespace: str, name: str, body: dict[str, Any], manager: str, force: bool
    ) -> tuple[int, dict[str, Any]]:
        meta = body.get("metadata") or {}
        if body.get("apiVersion") != kind.api_version or body.get("kind") != kind.kind:
            return 400, _status(
                400, f"body is {body.get('apiVersion')}/{body.get('kind')}, path is {kind.kind}"
            )
        if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
            return 400, _status(400, "metadata.name/namespace do not match the path")
        config = copy.deepcopy(body)
        config.pop("status", None)
        for server_field in SERVER_METADATA:
            config["metadata"].pop(server_field, None)
        if kind.namespaced:
            config["metadata"]["namespace"] = namespace
        else:
            namespace = ""
            config["metadata"].pop("namespace", None)
        key = (kind.plural, namespace, name)
        with self._lock:
            self._expire()
            if kind.namespaced and (NAMESPACE.plural, "", namespace) not in self._objects:
                return 404, not_found("", NAMESPACE.plural, namespace)
            stored = self._objects.get(key)
            if stored is not None and stored.deleting_since is not None:
                return 409, _status(409, f"{kind.kind} {name} is being deleted")
            if stored is not None and not force:
                mine = dict(_leaves(config))
                for other, applied in stored.applied.items():
                    if other != manager:
                        for path, value in _leaves(applied):
                            if path in mine and mine[path] != value and path[0] != "metadata":
                                return 409, _status(
                                    409, f"conflict with field manager {other} on {'.'.join(path)}"
                                )
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if stored is None:
                self._version += 1
                stored = _Stored(
                    kind, {manager: config}, str(uuid.uuid4()), now, self._version, 1, self.clock()
                )
                stored.managed[manager] = now
                stored.merged = self._merged(stored)
                self._objects[key] = stored
                self._index.put(key, stored.merged.get("metadata", {}).get("labels") or {})
                self.created_at[key] = stored.changed_at
                return 201, self._render(stored, key)
            before = stored.merged
            if force:  # a forced apply takes the fields it sets from their other managers
                mine = dict(_leaves(config))
                for other, applied in stored.applied.items():
                    if other != manager:
                        for path, value in list(_leaves(applied)):
                            if path in mine and mine[path] != value and path[0] != "metadata":
                                _drop(applied, path)
            stored.applied[manager] = config
            after = stored.merged = self._merged(stored)
            if after != before:
                self._index.put(key, after.get("metadata", {}).get("labels") or {})
                self._version += 1
                stored.resource_version = self._version
                stored.managed[manager] = now
                if {k: v for k, v in after.items() if k != "metadata"} != {
                    k: v for k, v in before.items() if k != "metadata"
                }:
                    stored.generation += 1
                    stored.changed_at = self.clock()
            return 200, self._render(stored, key)

    def _delete(
        self, kind: Kind, namespace: str, name: str, options: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        key = (kind.plural, namespace, name)
        with self._lock:
            self._expire()
            stored = self._objects.get(key)
            if stored is None or stored.kind != kind:
                return 404, not_found(kind.group, kind.plural, name)
            uid = (options.get("preconditions") or {}).get("uid")
            if uid and uid != stored.uid:
                return 409, _status(409, f"precondition failed: uid {uid} is not {stored.uid}")
            rendered = self._render(stored, key)
            self._version += 1
            if self.deletion_delay > 0:
                if stored.deleting_since is None:
                    stored.deleting_since = self.clock()
                    self._terminating.add(key)
                    stored.resource_version = self._version
            else:
                del self._objects[key]
                self._index.remove(key)
            return 200, rendered

    # -- internals -----------------------------------------------------------------------------

    def _expire(self) -> None:
        if self.deletion_delay <= 0:
            return  # deletions are immediate: nothing ever terminates
        now = self.clock()
        for key in list(self._terminating):
            stored = self._objects.get(key)
            if stored is None or stored.deleting_since is None:
                self._terminating.discard(key)
            elif now - stored.deleting_since >= self.deletion_delay:
                del self._objects[key]
                self._index.remove(key)
                self._terminating.discard(key)

    @staticmethod
    def _merged(stored: _Stored) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for config in stored.applied.values():
            _merge(merged, config)
        return merged

    def _render(self, stored: _Stored, key: tuple[str, str, str]) -> dict[str, Any]:
        obj = copy.deepcopy(stored.merged)
        meta = obj.setdefault("metadata", {})
        meta.update(
            name=key[2],
            uid=stored.uid,
            resourceVersion=str(stored.resource_version),
            generation=stored.generation,
            creationTimestamp=stored.created,
            managedFields=[
                {
                    "manager": manager,
                    "operation": "Apply",
                    "apiVersion": stored.kind.api_version,
                    "time": when,
                }
                for manager, when in stored.managed.items()
            ],
        )
        if stored.kind.namespaced:
            meta["namespace"] = key[1]
        if stored.deleting_since is not None:
            meta["deletionTimestamp"] = stored.created
        if stored.status is not None:
            obj["status"] = copy.deepcopy(stored.status)
        if stored.kind == NAMESPACE:
            obj["status"] = {"phase": "Terminating" if stored.deleting_since is not None else "Active"}
        if stored.kind.kind == "Deployment":
            replicas = int(obj.get("spec", {}).get("replicas", 1))
            status: dict[str, Any] = {"observedGeneration": stored.generation, "replicas": replicas}
            observed = self.replica_source(obj) if self.replica_source else None
            if observed is not None:
                obj["status"] = {**status, **{k: v for k, v in observed.items() if v}}
                return obj
            ready = replicas if self.clock() - stored.changed_at >= self.ready_delay else 0
            if ready:
                status.update(readyReplicas=ready, availableReplicas=ready, updatedReplicas=ready)
            obj["status"] = status
        return obj
