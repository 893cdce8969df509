"""A stand-in for the Kubernetes API server (EKS's), over HTTP on loopback, for tests and the local stack.

There is no kube-apiserver on these machines; this serves the REST subset `KubeCluster` uses, so
the adapter's real wire code is what runs against it. It is put together from this package's
parts, one concern each:

- `store.py`, the objects: `GET` of one object and label-selector lists (one namespace or all;
  equality, `!=` and `in` terms) answered from a label index (`labels.py`) as the real server
  answers from its watch cache rather than by reading every object; server-side apply merged per
  field manager (maps merge, lists and scalars are replaced whole; a manager that stops setting a
  field drops it unless another sets it; a non-forced apply that changes a value another manager
  set answers 409, a forced one takes those fields; an apply carrying `metadata.resourceVersion`
  answers 409 Conflict when the stored object's differs, and creates an object that does not
  exist without comparing it, as the real server does); `DELETE` with `preconditions.uid` (409 on
  mismatch), immediate or after a termination delay; resourceVersions (one counter),
  metadata.generation bumped on spec changes, uids, creationTimestamp, managedFields (manager and
  time only); Deployment readiness (`status.readyReplicas` reaches the replica count `ready_delay`
  seconds after the last spec change on the injectable clock, unless a `replica_source`, the local
  stack's engine runner `gco.local.region.kubelet`, reports the replicas); namespaces as objects (an
  object may only be applied into an existing namespace: 404 `namespaces "x" not found`;
  `default` and `kube-system` exist from the start); a kind whose CRD is not installed (`crds`) is
  answered 404 `the server could not find the requested resource`, as for any resource the server
  does not serve;
- `server.py`, the HTTP face: authentication (a bearer token names a user; 401 otherwise) and
  authorization: every request is checked against that user's grant of `gco.reconcile.access` (the
  definitions the Regional stack turns into RBAC: the reconciler's by default, and for any further
  token its own `Identity`, such as the GPU runner's read-only grant), as RBAC would check it: verb,
  API group, resource (`plural/subresource` for a subresource such as `status` or `scale`),
  namespace (none for a cluster-wide request) and resource name; anything else is answered 403 with
  the API server's `Status` (reason Forbidden, its message, `status.py`) before the path is even
  resolved. Each request's verb is the one the API server's request-info resolver gives it
  (k8s.io/apiserver `pkg/endpoints/request/requestinfo.go`): GET of an object `get`, of a collection
  `list` (`watch` with `watch=true`), POST `create`, PUT `update`, PATCH `patch`, DELETE of an object
  `delete`, of a collection `deletecollection`. A server-side apply is authorized as `patch`, and
  when the object does not exist, a second time as `create` with the object's name before it is
  stored (k8s.io/apiserver `pkg/endpoints/handlers/patch.go`: the apply's create validation runs
  `withAuthorization` with verb "create"; kubernetes.io/docs/reference/using-api/api-concepts/
  #patch-and-apply), so a grant without `create` fails the first apply of an object and passes a
  later one. A `resourceNames` rule matches only a request that names its object, so it never
  grants a list, a watch, a collection delete or a `POST` create (kubernetes.io/docs/reference/
  access-authn-authz/rbac/#referring-to-resources). Requests the stand-in authorizes but does not
  serve (watches, `POST`/`PUT`, subresources) are answered 405 once authorized; 415 for a PATCH that
  is not an apply, 400 without a fieldManager;
- `secrets.py`, Secrets stored as the API server stores them (`data` base64, `stringData` folded
  into `data` and never stored), authorized by the same grant as every kind: the reconciler's
  allows them by name in endpoint namespaces only, never a list or a watch;
- `faults.py`, injected faults (any status such as 429/500/409, and timeouts that drop the request
  before or after it takes effect), answered before authorization as API Priority and Fairness does.
- `network_policy.py`, the NetworkPolicies stored here enforced on connections to pods (`admits`,
  asked by the local Service network before it relays a request to an endpoint's pod), with the
  Kubernetes semantics and the limits that module names.

The API server's size and name limits are enforced on every write (`limits.py`). A pod registered with
`register_pod` (the local proxy) is listed with the Pods of its namespace and answers `GET` through its
proxy subresource (`pods/<name>:<port>/proxy/<path>`, authorized as `get` of `pods/proxy`); its
annotations take a JSON merge patch (authorized as `patch` of `pods`; each change gives the pod a new
resourceVersion, which the local proxy's kubelet model, `gco.local.region.volume`, takes as the pod
update that makes the kubelet sync it). A controller's status (an autoscaler's) is written with
`write_status`, without HTTP. The other Pods are read only: a `GET` list of `pods` in a namespace
is answered (authorized as `list pods`, as RBAC checks it) from the `pod_source`
hook, the local stack's kubelet (`gco.local.region.kubelet`), which reports one Pod per replica it runs
with its container's status (ready, restartCount, `CrashLoopBackOff`, the last termination's exit code
and signal); without the hook the list is empty.

It does not model: watches, `POST` creates, `PUT` updates and subresources (authorized, then
405), admission, defaulting or schema validation, writes to pods other than a merge patch of a
registered pod's annotations, ReplicaSets,
HPA/KEDA controllers (a Deployment without replicas has 1; `gco.local.region.autoscaler` scales and
writes HPA status for the local stack), resource quotas and limit ranges, garbage collection of
dependants, namespace deletion (and the deletion of its objects), finalizers beyond the fixed
termination delay, strategic merge keys (lists are atomic), YAML bodies (only JSON, which is valid
YAML), RBAC objects themselves (the grant is fixed at start), or impersonation.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from http.server import ThreadingHTTPServer
from typing import Any

from gco.local.standin import server
from gco.local.standin.faults import Fault, FaultQueue
from gco.local.standin.labels import matches
from gco.local.standin.network_policy import Peer, Port, admits
from gco.local.standin.server import Identity
from gco.local.standin.status import Attributes
from gco.local.standin.store import Key, ObjectStore, ReplicaSource
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT, Grant
from gco.reconcile.kube_tokens import TOKEN_PREFIX as EKS_TOKEN_PREFIX
from gco.reconcile.objects import ENDPOINT_LABEL, NAMESPACE, NETWORK_POLICY, Kind

PodServer = Callable[[int, str], tuple[int, str]]  # (port, path) -> (status, body) of a pod
RECONCILER_USER = "arn:aws:sts::000000000000:assumed-role/gco-reconciler/gco-reconciler"
RUNNER_USER = "arn:aws:sts::000000000000:assumed-role/gco-runner-us-east-1/i-0123456789abcdef0"


RUNNER_IDENTITY = Identity(RUNNER_USER, RUNNER_GRANT)


class StandInKubeAPI:
    """The stand-in API server; use as a context manager or `start()`/`stop()`.

    Parameters:
        token: the bearer token it accepts (None: any bearer token), as `user`.
        user: the user the token authenticates as.
        grant: what that user may do (default: the reconciler's grant, as the stack binds it).
        identities: further tokens, each with its own user and grant (the runner's read-only one).
        namespaces: namespaces that exist from the start besides `default` and `kube-system`.
        ready_delay: seconds from a Deployment's spec change to all replicas ready.
        deletion_delay: seconds a deleted object stays (terminating) before it is gone.
        crds: the custom-resource kinds installed (default: KEDA's ScaledObject).
        clock: monotonic seconds, injectable for tests.
        fault_sleep: how long a timeout fault holds the connection (longer than the client's timeout).
        authenticator: who an EKS token (`k8s-aws-v1.`) is, as EKS's authenticator and access entries
            say (`gco.local.assembly.eks.IamTokens`); None: such tokens are judged as any other.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        user: str = RECONCILER_USER,
        grant: Grant = RECONCILER_GRANT,
        identities: Mapping[str, Identity] | None = None,
        namespaces: Sequence[str] = (),
        ready_delay: float = 0.0,
        deletion_delay: float = 0.0,
        crds: frozenset[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        fault_sleep: float = 1.0,
        authenticator: Callable[[str], Identity | None] | None = None,
    ) -> None:
        self.token = token
        self.authenticator = authenticator
        self.user = user
        self.grant = grant
        self.identities = dict(identities or {})
        self.fault_sleep = fault_sleep
        self.store = ObjectStore(
            namespaces=namespaces,
            ready_delay=ready_delay,
            deletion_delay=deletion_delay,
            crds=crds,
            clock=clock,
        )
        self.faults = FaultQueue()
        self.forbidden: list[Attributes] = []  # every request refused 403, for tests
        self.requests: Counter[str] = Counter()  # HTTP requests by method
        # List requests (GET of a collection) by resource and label selector, for tests.
        self.lists: Counter[tuple[str, str]] = Counter()
        # (namespace, label selector) -> the Pods there; set by the local stack's kubelet.
        self.pod_source: Callable[[str, str], list[dict[str, Any]]] | None = None
        # Pods registered with what answers their proxy subresource (the local proxy's).
        self._served_pods: dict[tuple[str, str], tuple[dict[str, Any], PodServer]] = {}
        self._pod_versions = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> StandInKubeAPI:
        api = self

        class Handler(server.Handler):
            server_api = api

        http = server.QuietServer(("127.0.0.1", 0), Handler)
        self._server = http
        self.url = f"http://127.0.0.1:{http.server_address[1]}"
        self._thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.05}, name="standin-kube-api", daemon=True
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

    # -- authorization -------------------------------------------------------------------------

    def identify(self, authorization: str) -> Identity | None:
        """The identity of an `Authorization` header: a further token's, else the main user's (any bearer
        token when `token` is None); None (401) without a bearer token or with an unknown one."""
        scheme, _, token = authorization.partition(" ")
        if scheme != "Bearer" or not token:
            return None
        if token in self.identities:
            return self.identities[token]
        if self.authenticator is not None and token.startswith(EKS_TOKEN_PREFIX):
            return self.authenticator(token)
        if self.token is None or token == self.token:
            return Identity(self.user, self.grant)
        return None

    def authorize(self, attributes: Attributes, grant: Grant | None = None) -> bool:
        """RBAC as the stack binds it: the grant's rules (the main user's unless given); a refusal is
        recorded in `forbidden`."""
        allowed = (grant or self.grant).allows(
            attributes.verb, attributes.group, attributes.rbac_resource, attributes.namespace, attributes.name
        )
        if not allowed:
            with self._lock:
                self.forbidden.append(attributes)
        return allowed

    # -- test and controller controls (no HTTP) ------------------------------------------------

    def inject(self, fault: Fault) -> None:
        """Queue a fault for the next matching request (`faults.py`)."""
        self.faults.inject(fault)

    def writes(self) -> int:
        """Write requests served over HTTP (applies and deletes), refused ones included."""
        return self.requests["PATCH"] + self.requests["DELETE"]

    @property
    def replica_source(self) -> ReplicaSource | None:
        return self.store.replica_source

    @replica_source.setter
    def replica_source(self, source: ReplicaSource | None) -> None:
        self.store.replica_source = source

    @property
    def created_at(self) -> dict[Key, float]:
        """(plural, namespace, name) -> clock at the object's creation."""
        return self.store.created_at

    def objects(self) -> list[dict[str, Any]]:
        """Every stored object as the API would return it (terminating ones included)."""
        return self.store.objects()

    def endpoint_objects(self) -> list[dict[str, Any]]:
        """The stored objects that belong to an endpoint (labelled with one), without gco's shared ones."""
        return [obj for obj in self.objects() if ENDPOINT_LABEL in (obj["metadata"].get("labels") or {})]

    def namespaces(self) -> list[str]:
        return self.store.namespaces()

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(kind, namespace, name)

    def list(
        self, kind: Kind, namespace: str | None, label_selector: str
    ) -> tuple[list[dict[str, Any]], str]:
        return self.store.list(kind, namespace, label_selector)

    def admits(self, target: Peer, port: Port, source: Peer) -> bool:
        """Whether the stored NetworkPolicies admit a connection from `source` to `port` of the pod
        `target` (`network_policy.py`: the Kubernetes rules it models)."""
        policies, _ = self.store.list(NETWORK_POLICY, target.namespace, "")
        labels: dict[str, dict[str, str]] = {}
        for name in self.store.namespaces():
            stored = self.store.get(NAMESPACE, "", name)
            labels[name] = dict(((stored or {}).get("metadata") or {}).get("labels") or {})
        return admits(policies, labels, target, port, source)

    def pods(self, namespace: str, label_selector: str) -> builtins.list[dict[str, Any]]:
        """The Pods in `namespace` matching `label_selector`: the kubelet's, and the registered ones."""
        found = self.pod_source(namespace, label_selector) if self.pod_source is not None else []
        with self._lock:
            registered = [pod for (ns, _), (pod, _) in self._served_pods.items() if ns == namespace]
        return found + [
            pod for pod in registered if matches(pod["metadata"].get("labels") or {}, label_selector)
        ]

    def register_pod(self, pod: dict[str, Any], serve: PodServer) -> None:
        """List `pod` in its namespace, and answer its proxy subresource with `serve(port, path)`."""
        meta = pod["metadata"]
        with self._lock:
            meta["resourceVersion"] = str(next(self._pod_versions))
            self._served_pods[(meta["namespace"], meta["name"])] = (pod, serve)

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge `annotations` into a registered pod's as a JSON merge patch does (RFC 7386: a null
        value removes the key), with a new resourceVersion when they changed, as the API server
        stores no update that changes nothing; None: no such pod."""
        with self._lock:
            found = self._served_pods.get((namespace, name))
            if found is None:
                return None
            meta = found[0]["metadata"]
            merged = dict(meta.get("annotations") or {})
            for key, value in annotations.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = str(value)
            if merged != (meta.get("annotations") or {}):
                meta["annotations"] = merged
                meta["resourceVersion"] = str(next(self._pod_versions))
            return copy.deepcopy(found[0])

    def pod_version(self, namespace: str, name: str) -> str | None:
        """A registered pod's resourceVersion (changed by each update); None: no such pod."""
        with self._lock:
            found = self._served_pods.get((namespace, name))
        return None if found is None else str(found[0]["metadata"].get("resourceVersion"))

    def proxy_to_pod(self, namespace: str, name: str, port: int, path: str) -> tuple[int, str] | None:
        """What a registered pod answers to `GET path` on `port`; None: no such pod."""
        with self._lock:
            found = self._served_pods.get((namespace, name))
        return None if found is None else found[1](port, path)

    def apply_as(
        self, manager: str, obj: Mapping[str, Any], *, force: bool = True
    ) -> tuple[int, dict[str, Any]]:
        """Server-side apply as another field manager (an operator, an autoscaler) without HTTP."""
        return self.store.apply_as(manager, obj, force=force)

    def write_status(self, kind: Kind, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        """Replace an object's status as its controller does; False when the object is not there."""
        return self.store.write_status(kind, namespace, name, status)
