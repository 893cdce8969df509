"""The stand-in API server's object store: what etcd and the apiserver's storage layer hold.

Objects keyed by (resource, namespace, name), merged per field manager as server-side apply does
(each manager's last applied configuration is kept; the object is their deep merge: maps merge,
lists and scalars are replaced whole), with uids, one resourceVersion counter, metadata.generation
bumped on spec changes, creationTimestamp and managedFields (manager and time only). Lists are
answered from a label index (`labels.py`), as the real server answers from its watch cache.
Deployment readiness is modelled here (see `ObjectStore`); authorization, the HTTP face and fault
injection are the other modules of this package.
"""

from __future__ import annotations

import builtins
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from gco.local.standin.labels import LabelIndex, matches
from gco.local.standin.limits import object_refusal
from gco.local.standin.secrets import stored_secret
from gco.local.standin.status import not_found, status
from gco.reconcile.objects import KINDS, NAMESPACE, SECRET, SYSTEM_KINDS, Kind

Key = tuple[str, str, str]  # (plural, namespace or "", name)
PREEXISTING_NAMESPACES = ("default", "kube-system")
DEPLOYMENT_KIND = "Deployment"  # the one kind whose rendered status follows the clock
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
    # The rendered object's JSON and the resourceVersion it was rendered at (see `list_encoded`).
    encoded: tuple[int, bytes] | None = None


def tree_copy(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists, scalars): what `copy.deepcopy` returns for one,
    several times faster (no memo, no reduce protocol). The store copies every object it renders
    (each list answer copies every object listed), so this is most of the server's CPU per call."""
    if isinstance(value, dict):
        return {key: tree_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [tree_copy(item) for item in value]
    if isinstance(value, tuple):
        return tuple([tree_copy(item) for item in value])
    return value


def _merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = tree_copy(value)


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


def _stale(stored: _Stored | None, precondition: object) -> bool:
    """Whether an apply's resourceVersion precondition fails against the stored object.

    The API server compares the version only when it updates an object (its registry's
    `Store.Update`: a mismatch is a Conflict). Creating through an apply never compares it (the
    create-on-update path; storage drops the version), so a precondition on an object that does
    not exist does not fail: the object is created (kubernetes/kubernetes#106745).
    """
    return (
        stored is not None
        and precondition not in (None, "")
        and str(precondition) != str(stored.resource_version)
    )


def _modified(kind: Kind, name: str) -> dict[str, Any]:
    """The 409 `Status` of a failed resourceVersion precondition, as the API server words it."""
    message = (
        f'Operation cannot be fulfilled on {kind.plural}{"." + kind.group if kind.group else ""} "{name}": '
        "the object has been modified; please apply your changes to the latest version and try again"
    )
    return status(409, message, {"name": name, "group": kind.group, "kind": kind.plural})


def installed_kinds(crds: frozenset[str] | None) -> dict[tuple[str, str], Kind]:
    """The resources served, by (path prefix, plural): built-in kinds and the installed CRDs' kinds."""
    custom = {"ScaledObject"} if crds is None else crds
    installed = [kind for kind in KINDS if "." not in kind.api_version.split("/")[0] or kind.kind in custom]
    installed += [kind for kind in KINDS if kind.api_version.endswith("k8s.io/v1")]
    installed += [*SYSTEM_KINDS, SECRET]
    return {(kind.prefix.lstrip("/"), kind.plural): kind for kind in installed}


class ObjectStore:
    """The stored objects of one cluster; thread-safe (one lock around every read and write).

    Deployment readiness: `status.readyReplicas` reaches the replica count `ready_delay` seconds
    (on `clock`) after the last spec change, unless a `replica_source` (the local stack's engine
    runner, `gco.local.region.kubelet`, which runs real processes) reports the replicas. A deleted object
    stays, terminating, for `deletion_delay` seconds. Namespaces are objects: an object may only be
    applied into an existing one.
    """

    def __init__(
        self,
        *,
        namespaces: Sequence[str] = (),
        ready_delay: float = 0.0,
        deletion_delay: float = 0.0,
        crds: frozenset[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ready_delay = ready_delay
        self.deletion_delay = deletion_delay
        self.clock = clock
        self.kinds = installed_kinds(crds)
        self.replica_source: ReplicaSource | None = None  # called under the lock
        self.created_at: dict[Key, float] = {}  # clock at each object's creation
        self._objects: dict[Key, _Stored] = {}
        self._index: LabelIndex[Key] = LabelIndex()
        self._terminating: set[Key] = set()  # deleted, waiting out deletion_delay
        self._lock = threading.RLock()
        self._version = 0
        for namespace in (*PREEXISTING_NAMESPACES, *namespaces):
            self.apply_as(
                "kube-apiserver", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )

    # -- reads ---------------------------------------------------------------------------------

    def kind_for(self, prefix: str, plural: str) -> Kind | None:
        """The kind served at `/<prefix>/.../<plural>`, or None (not served: no CRD)."""
        return self.kinds.get((prefix, plural))

    def objects(self) -> list[dict[str, Any]]:
        """Every stored object as the API would return it (terminating ones included)."""
        with self._lock:
            self._expire()
            return [self._render(stored, key) for key, stored in sorted(self._objects.items())]

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(key[2] for key in self._objects if key[0] == NAMESPACE.plural)

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            self._expire()
            key = (kind.plural, namespace, name)
            stored = self._objects.get(key)
            return None if stored is None or stored.kind != kind else self._render(stored, key)

    def list(
        self, kind: Kind, namespace: str | None, label_selector: str
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects of `kind` (in `namespace`, or all) matching the selector, and the list's version."""
        with self._lock:
            matched = self._matching(kind, namespace, label_selector)
            return [self._render(stored, key) for key, stored in matched], str(self._version)

    def list_encoded(
        self, kind: Kind, namespace: str | None, label_selector: str
    ) -> tuple[builtins.list[bytes], str]:
        """`list` with each object as its JSON, as the HTTP face answers it.

        An object's JSON is kept until its resourceVersion changes (every change of what is
        rendered bumps it), except a Deployment's, whose status follows the clock and the replica
        source: a list of unchanged objects costs no copy and no encoding, as the real API server
        answers lists from its watch cache rather than re-reading and re-encoding every object.
        """
        with self._lock:
            matched = self._matching(kind, namespace, label_selector)
            return [self._encoded(stored, key) for key, stored in matched], str(self._version)

    def _matching(
        self, kind: Kind, namespace: str | None, label_selector: str
    ) -> builtins.list[tuple[Key, _Stored]]:
        """The stored objects a list answers, sorted by key (call with the lock held)."""
        self._expire()
        candidates = self._index.candidates(label_selector)
        scope = (
            self._objects.items()
            if candidates is None
            else ((key, self._objects[key]) for key in candidates if key in self._objects)
        )
        return sorted(
            (key, stored)
            for key, stored in scope
            if stored.kind == kind
            and (namespace is None or key[1] == namespace)
            and matches(stored.merged.get("metadata", {}).get("labels") or {}, label_selector)
        )

    def _encoded(self, stored: _Stored, key: Key) -> bytes:
        if stored.kind.kind == DEPLOYMENT_KIND:
            return json.dumps(self._render(stored, key)).encode()
        if stored.encoded is None or stored.encoded[0] != stored.resource_version:
            stored.encoded = (stored.resource_version, json.dumps(self._render(stored, key)).encode())
        return stored.encoded[1]

    # -- writes --------------------------------------------------------------------------------

    def apply_as(
        self, manager: str, obj: Mapping[str, Any], *, force: bool = True
    ) -> tuple[int, dict[str, Any]]:
        """Server-side apply as another field manager (an operator, an autoscaler) without HTTP."""
        meta = obj.get("metadata") or {}
        kind = next(
            k
            for k in self.kinds.values()
            if k.kind == obj.get("kind") and k.api_version == obj.get("apiVersion")
        )
        return self.apply(kind, str(meta.get("namespace")), str(meta.get("name")), dict(obj), manager, force)

    def write_status(self, kind: Kind, namespace: str, name: str, new: Mapping[str, Any]) -> bool:
        """Replace an object's status as its controller does (the status subresource: no new
        generation); False when the object is not there."""
        with self._lock:
            stored = self._objects.get((kind.plural, namespace, name))
            if stored is None or stored.kind != kind:
                return False
            if stored.status != new:
                self._version += 1
                stored.resource_version = self._version
                stored.status = tree_copy(dict(new))
            return True

    def apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: dict[str, Any],
        manager: str,
        force: bool,
        *,
        may_create: Callable[[], bool] = lambda: True,
        refused: dict[str, Any] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Server-side apply of `body` by `manager`: the answer's code and body (the object or a `Status`).

        A non-forced apply that changes a value another manager set answers 409; a forced one
        takes those fields from the other managers. A `metadata.resourceVersion` in the body is a
        precondition (`_stale`): 409 when the stored object's differs. When no object of that key
        exists, `may_create` decides whether the caller may create it (the API server authorizes
        such an apply as `create` too, before admission, so before the namespace check): 403 with
        `refused` otherwise, nothing stored.
        """
        meta = body.get("metadata") or {}
        precondition = meta.get("resourceVersion")
        if body.get("apiVersion") != kind.api_version or body.get("kind") != kind.kind:
            return 400, status(
                400, f"body is {body.get('apiVersion')}/{body.get('kind')}, path is {kind.kind}"
            )
        if meta.get("name") != name or meta.get("namespace", namespace) != namespace:
            return 400, status(400, "metadata.name/namespace do not match the path")
        config = tree_copy(body)
        config.pop("status", None)
        for server_field in SERVER_METADATA:
            config["metadata"].pop(server_field, None)
        if kind == SECRET:
            checked = stored_secret(config)
            if isinstance(checked, str):
                return 422, status(422, checked)
        refused_size = object_refusal(kind, config)
        if refused_size is not None:
            return refused_size
        if kind.namespaced:
            config["metadata"]["namespace"] = namespace
        else:
            namespace = ""
            config["metadata"].pop("namespace", None)
        key = (kind.plural, namespace, name)
        with self._lock:
            self._expire()
            stored = self._objects.get(key)
            if stored is None and not may_create():
                return 403, refused or status(403, "create is forbidden")
            if kind.namespaced and (NAMESPACE.plural, "", namespace) not in self._objects:
                return 404, not_found("", NAMESPACE.plural, namespace)
            if stored is not None and stored.deleting_since is not None:
                return 409, status(409, f"{kind.kind} {name} is being deleted")
            if _stale(stored, precondition):
                return 409, _modified(kind, name)
            if stored is not None and not force:
                conflict = self._conflict(stored, manager, config)
                if conflict is not None:
                    return 409, status(409, conflict)
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if stored is None:
                return 201, self._create(kind, key, manager, config, now)
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

    def delete(
        self, kind: Kind, namespace: str, name: str, options: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """DELETE with `preconditions.uid` (409 on mismatch): immediate, or after `deletion_delay`."""
        key = (kind.plural, namespace, name)
        with self._lock:
            self._expire()
            stored = self._objects.get(key)
            if stored is None or stored.kind != kind:
                return 404, not_found(kind.group, kind.plural, name)
            uid = (options.get("preconditions") or {}).get("uid")
            if uid and uid != stored.uid:
                return 409, status(409, f"precondition failed: uid {uid} is not {stored.uid}")
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

    @staticmethod
    def _conflict(stored: _Stored, manager: str, config: dict[str, Any]) -> str | None:
        """The conflict a non-forced apply meets: a value it changes that another manager set."""
        mine = dict(_leaves(config))
        for other, applied in stored.applied.items():
            if other != manager:
                for path, value in _leaves(applied):
                    if path in mine and mine[path] != value and path[0] != "metadata":
                        return f"conflict with field manager {other} on {'.'.join(path)}"
        return None

    def creations(self) -> dict[Key, float]:
        """When each object was created, copied under the store's lock: a reader iterating
        `created_at` itself while a request creates an object would fail."""
        with self._lock:
            return dict(self.created_at)

    def _create(self, kind: Kind, key: Key, manager: str, config: dict[str, Any], now: str) -> dict[str, Any]:
        self._version += 1
        stored = _Stored(kind, {manager: config}, str(uuid.uuid4()), now, self._version, 1, self.clock())
        stored.managed[manager] = now
        stored.merged = self._merged(stored)
        self._objects[key] = stored
        self._index.put(key, stored.merged.get("metadata", {}).get("labels") or {})
        self.created_at[key] = stored.changed_at
        return self._render(stored, key)

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

    def _render(self, stored: _Stored, key: Key) -> dict[str, Any]:
        obj: dict[str, Any] = tree_copy(stored.merged)
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
            obj["status"] = tree_copy(stored.status)
        if stored.kind == NAMESPACE:
            obj["status"] = {"phase": "Terminating" if stored.deleting_since is not None else "Active"}
        if stored.kind.kind == DEPLOYMENT_KIND:
            obj["status"] = self._deployment_status(stored, obj)
        return obj

    def _deployment_status(self, stored: _Stored, obj: dict[str, Any]) -> dict[str, Any]:
        replicas = int(obj.get("spec", {}).get("replicas", 1))
        result: dict[str, Any] = {"observedGeneration": stored.generation, "replicas": replicas}
        observed = self.replica_source(obj) if self.replica_source else None
        if observed is not None:
            return {**result, **{k: v for k, v in observed.items() if v}}
        ready = replicas if self.clock() - stored.changed_at >= self.ready_delay else 0
        if ready:
            result.update(readyReplicas=ready, availableReplicas=ready, updatedReplicas=ready)
        return result
