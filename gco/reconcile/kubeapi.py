"""The cluster adapter over the Kubernetes REST API (urllib3): server-side apply, list, delete.

Why plain REST: gco renders plain dicts (validated against the OpenAPI schemas in tests), needs
only three verbs on six kinds (two of them CRDs), and the Lambda's cold start matters; the wire
protocol below is the documented one, and it is what tests exercise against the stand-in server.

- apply: `PATCH <object>?fieldManager=gco-reconciler&force=true` with
  `application/apply-patch+yaml` (JSON is YAML): one field manager owns what gco sets, and
  fields set by others (an HPA's replica count) are left alone.
- list: `GET /apis/<group>/<version>/namespaces/<ns>/<plural>?labelSelector=...` in each namespace
  where the grant (`gco.reconcile.access`) allows the kind and an endpoint's objects can be
  (`Grant.object_scopes`: in the system namespace only the routes), never cluster-wide (the
  reconciler may not), paged with `limit`/`continue`; a kind whose CRD is not installed (404) lists as empty.
  The lists of one call (and the deletes of one call) go out concurrently: one round trip.
- get: one object by name; 404 is None.
- An apply answered 404 for a kind the API server does not serve (its CRD is not installed) raises
  `KindNotServedError`, naming what provides the kind.
- delete: `DELETE` with `preconditions.uid`, so a delete never hits a newer object of the same
  name; 404 (gone) and 409 (replaced) both mean the observed object no longer exists.
- Retries: 429, 5xx, 409 on apply, timeouts, connection errors and bodies that cannot be decoded
  (a broken `Content-Encoding`), with capped exponential backoff and jitter (honouring
  `Retry-After`); a 401 mints a fresh token once. An apply that carries `metadata.resourceVersion`
  (an optimistic-concurrency precondition) is not retried on 409: it raises `ClusterConflictError`
  at once, since only a fresh read can make it succeed.
- Errors: every urllib3 error, and an answer that is not a JSON object where one is due, leaves
  this module as a `ClusterError` (`gco.reconcile.errors`), converted with `raise ... from`.
- The HTTP client is urllib3: botocore's own, so in Lambda the runtime's SDK provides it and the
  bundle does not carry it (`stacks.bundling.RUNTIME_PROVIDED`); only what urllib3 1.26 and 2.x both
  offer is used (`connection_from_url`, `urlopen` with `timeout`, `retries`, `redirect`; `status`,
  `headers`, `data`). One pool of keep-alive connections is shared by every thread. Against httpx,
  which this client used before, it costs the caller 1.5-3x less CPU per request
  (`benchmarks/kube_client.py`), and its pool does not scan every queued request under one lock on
  each request (httpcore's `_assign_requests_to_connections`: a million `is_queued` calls for 7,300
  requests in a profile at 300 endpoints written at once).
"""

from __future__ import annotations

import builtins
import json
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.util import parse_url

from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.errors import (
    ClusterAuthError,
    ClusterConflictError,
    ClusterRejectedError,
    ClusterUnavailableError,
    KindNotServedError,
)
from gco.reconcile.objects import (
    FIELD_MANAGER,
    KINDS,
    POD,
    Kind,
    ObjectRef,
    absent_selector,
    kind_of,
    selector,
    set_selector,
)

log = logging.getLogger(__name__)
TokenProvider = Callable[[bool], str]
RETRYABLE = frozenset({429, 500, 502, 503, 504})
MAX_PAGES = 1000
MAX_SET_VALUES = 50  # label values in one `in (...)` selector: the query string stays a few KB
MAX_IN_FLIGHT = 16  # requests one client issues at once for lists and deletes
MAX_CONNECTIONS = 64  # keep-alive connections to the API server (applies run on callers' threads too)
MERGE_PATCH = "application/merge-patch+json"  # a JSON merge patch (RFC 7386), as the API server names it
Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Bounded backoff: `attempts` tries in all, delays doubling from `base_delay` to `max_delay`."""

    attempts: int = 6
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after is not None:
            try:
                return min(self.max_delay, max(0.0, float(retry_after)))
            except ValueError:
                pass
        ceiling = min(self.max_delay, self.base_delay * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)


def static_token(token: str) -> TokenProvider:
    """A token provider that always returns `token` (the local stand-in's)."""
    return lambda refresh: token


class KubeCluster:
    """One cluster reached over HTTPS (or loopback HTTP), implementing the `Cluster` port.

    Raises:
        ClusterAuthError: every request: the API server refused the token (401) or the grant (403).
        ClusterUnavailableError: every request: the server could not be reached or kept failing
            after the retries.
    """

    def __init__(
        self,
        server: str,
        token: TokenProvider,
        *,
        verify: ssl.SSLContext | bool = True,
        field_manager: str = FIELD_MANAGER,
        grant: Grant = RECONCILER_GRANT,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.server = server.rstrip("/")
        self.field_manager = field_manager
        self.grant = grant
        self.retry = retry or RetryPolicy()
        self._token = token
        self._sleep = sleep
        self.timeout = timeout
        self._http = _pool(self.server, verify)
        # Paths go to the pool as they are, under the server's own path if it has one (a proxy's).
        self._base_path = (parse_url(self.server).path or "").rstrip("/")
        self._timeout = urllib3.Timeout(connect=timeout, read=timeout)
        # Requests of one call (a list's scopes, a plan's deletes) share this pool; it never runs
        # work that submits to it again, so concurrent callers only queue.
        self._pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="kube")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    # -- the port ------------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply; with `metadata.resourceVersion` set, applied only over that version.

        Raises:
            ClusterConflictError: the object carried a resourceVersion and the stored one differs
                (409): not retried here, the same request would fail again; the caller reads anew.
            KindNotServedError: the cluster serves no such kind (404 on the kind's path).
            ClusterRejectedError: any other refusal (`ClusterError`s as `_request` raises them).
        """
        ref = ObjectRef.of(obj)
        kind = kind_of(obj)
        conditional = bool((obj.get("metadata") or {}).get("resourceVersion"))
        response = self._request(
            "PATCH",
            kind.path(ref.namespace, ref.name),
            what=f"apply {ref}",
            params={"fieldManager": self.field_manager, "force": "true"},
            content=json.dumps(obj, separators=(",", ":")).encode(),
            headers={"Content-Type": "application/apply-patch+yaml"},
            retry_conflict=not conditional,
        )
        if response.status_code == 409 and conditional:
            raise ClusterConflictError(f"apply {ref}: HTTP 409: {_message(response)}", 409)
        if response.status_code == 404 and not _names_a_namespace(response):
            raise KindNotServedError(kind, f"apply {ref}: HTTP 404: {_message(response)}")
        if response.status_code >= 400:
            raise _rejected(response, f"apply {ref}")
        return _object(response, f"apply {ref}")

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        response = self._request(
            "GET", kind.path(namespace, name), what=f"get {kind.kind} {namespace}/{name}"
        )
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise _rejected(response, f"get {kind.kind} {namespace}/{name}")
        found = _object(response, f"get {kind.kind} {namespace}/{name}")
        found.setdefault("apiVersion", kind.api_version)
        found.setdefault("kind", kind.kind)
        return found

    def list(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every scope's list issued concurrently: one round trip, not one per kind and namespace."""
        return self._list_selected(selector(labels))

    def list_in(self, kind: Kind, namespace: str, labels: Mapping[str, str]) -> builtins.list[dict[str, Any]]:
        """One scope's list (a kind the caller knows lives in one namespace: the routes)."""
        return self._list_scope(namespace, kind, selector(labels))

    def list_any(
        self, key: str, values: Sequence[str], *, or_absent: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """One set-based list per scope for many label values (a batch's endpoints), chunked; with
        `or_absent`, one more per scope of the objects without the label (`!key`). Every list of the
        call goes out at once: one round trip."""
        selectors = [
            set_selector(key, values[start : start + MAX_SET_VALUES])
            for start in range(0, len(values), MAX_SET_VALUES)
        ]
        if or_absent:
            selectors.append(absent_selector(key))
        scopes = builtins.list(self.grant.object_scopes(KINDS))
        lists = [(namespace, kind, chosen) for chosen in selectors for namespace, kind in scopes]
        pages = self._concurrently(lambda scope: self._list_scope(*scope), lists)
        return [item for page in pages for item in page]

    def _list_selected(self, label_selector: str) -> builtins.list[dict[str, Any]]:
        scopes = builtins.list(self.grant.object_scopes(KINDS))
        pages = self._concurrently(lambda scope: self._list_scope(*scope, label_selector), scopes)
        return [item for page in pages for item in page]

    def _list_scope(self, namespace: str, kind: Kind, label_selector: str) -> builtins.list[dict[str, Any]]:
        found: builtins.list[dict[str, Any]] = []
        params: dict[str, str] = {"labelSelector": label_selector, "limit": "500"}
        for _ in range(MAX_PAGES):
            response = self._request(
                "GET",
                kind.collection(namespace),
                what=f"list {kind.plural} in {namespace}",
                params=params,
            )
            if response.status_code == 404:
                break  # the kind's CRD is not installed: nothing of it exists
            if response.status_code >= 400:
                raise _rejected(response, f"list {kind.plural}")
            body = _object(response, f"list {kind.plural} in {namespace}")
            for item in body.get("items") or []:
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                found.append(item)
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                break
            params = {**params, "continue": token}
        return found

    def proxy_get(self, namespace: str, pod: str, port: int, path: str) -> tuple[int, str]:
        """`GET path` of a pod's port through the API server's pod proxy: the pod's status and body.

        Authorized as `get` on `pods/proxy` (the request names the pod as `<pod>:<port>`). An answer
        of the pod is returned whatever its status; only the API server's own refusals raise.

        Raises:
            ClusterAuthError: the API server refused the request (401, 403).
            ClusterUnavailableError: no answer after the client's retries.
        """
        response = self._request(
            "GET",
            f"{POD.path(namespace, f'{pod}:{port}')}/proxy{path}",
            what=f"proxy to pod {namespace}/{pod}:{port}",
        )
        return response.status_code, response.text

    def annotate_pod(self, namespace: str, pod: str, annotations: Mapping[str, str]) -> bool:
        """Set annotations on a Pod with a JSON merge patch (RFC 7386); False when the Pod is gone.

        A merge patch, not an apply: an apply of a Pod that was deleted meanwhile would try to create
        it (authorized as `create pods`, which no grant has), where a merge patch answers 404.
        Authorized as `patch` on `pods`.

        Raises:
            ClusterAuthError: the API server refused the request (401, 403).
            ClusterRejectedError: it rejected the patch (a 4xx other than 404).
            ClusterUnavailableError: no answer after the client's retries.
        """
        what = f"annotate pod {namespace}/{pod}"
        response = self._request(
            "PATCH",
            POD.path(namespace, pod),
            what=what,
            content=json.dumps({"metadata": {"annotations": dict(annotations)}}).encode(),
            headers={"Content-Type": MERGE_PATCH},
        )
        if response.status_code == 404:
            return False
        if response.status_code >= 400:
            raise _rejected(response, what)
        return True

    def delete(self, refs: Sequence[ObjectRef]) -> None:
        """The deletes issued concurrently (they are independent); the first error is raised."""
        self._concurrently(self._delete_one, list(refs))

    def _delete_one(self, ref: ObjectRef) -> None:
        kind = kind_of({"apiVersion": ref.api_version, "kind": ref.kind})
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if ref.uid:
            options["preconditions"] = {"uid": ref.uid}
        response = self._request(
            "DELETE",
            kind.path(ref.namespace, ref.name),
            what=f"delete {ref}",
            content=json.dumps(options).encode(),
            headers={"Content-Type": "application/json"},
        )
        if response.status_code in (404, 409):
            return  # already gone, or a different object (uid) now holds the name
        if response.status_code >= 400:
            raise _rejected(response, f"delete {ref}")

    def _concurrently(self, work: Callable[[Item], Result], items: Sequence[Item]) -> builtins.list[Result]:
        """`work` over `items` on the client's pool, results in order; the first error is raised."""
        if len(items) <= 1:
            return [work(item) for item in items]
        return list(self._pool.map(work, items))

    # -- plumbing ------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        retry_conflict: bool = False,
    ) -> Answer:
        refreshed = False
        problem = "no attempt made"
        for attempt in range(self.retry.attempts):
            request_headers = {**(headers or {}), "Authorization": f"Bearer {self._token(refreshed)}"}
            request_headers["Accept"] = "application/json"
            url = self._base_path + path + ("?" + urlencode(params, quote_via=quote) if params else "")
            try:
                response = self._send(method, url, content, request_headers)
            except Urllib3Error as error:  # timeouts, refusals, resets, bad encodings: all retried
                problem = f"{type(error).__name__}"
                self._backoff(what, attempt, problem, None)
                continue
            status = response.status_code
            if status in (401, 403):
                if status == 401 and not refreshed:
                    refreshed = True
                    continue
                detail = _message(response) if status == 403 else ""
                raise ClusterAuthError(
                    f"{what}: the API server answered {status}" + (f": {detail}" if detail else ""), status
                )
            if status in RETRYABLE or (status == 409 and retry_conflict):
                problem = f"HTTP {status}"
                self._backoff(what, attempt, problem, response.headers.get("Retry-After"))
                continue
            return response
        raise ClusterUnavailableError(f"{what}: gave up after {self.retry.attempts} attempts ({problem})")

    def _send(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]) -> Answer:
        """One request and its whole answer: the one place a request leaves (`tracing.trace_kube_requests`
        records each as an X-Ray subsegment). `url` is the path and query on the server.

        Raises:
            urllib3.exceptions.HTTPError: no answer (refused, reset, timed out) or an undecodable body.
        """
        raw = self._http.urlopen(
            method, url, body=body, headers=headers, timeout=self._timeout, retries=False, redirect=False
        )
        return Answer(raw.status, raw.headers, raw.data)

    def _backoff(self, what: str, attempt: int, problem: str, retry_after: str | None) -> None:
        if attempt + 1 >= self.retry.attempts:
            return
        delay = self.retry.delay(attempt, retry_after)
        log.info("kubernetes %s: %s; retrying in %.2f s", what, problem, delay)
        self._sleep(delay)


@dataclass(frozen=True)
class Answer:
    """One answer of the API server: its status, headers and whole body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body decoded as JSON.

        Raises:
            ValueError: the body is not JSON (json.JSONDecodeError) or not UTF-8.
        """
        return json.loads(self.content)


def _pool(server: str, verify: ssl.SSLContext | bool) -> urllib3.HTTPConnectionPool:
    """Keep-alive connections to `server`, at most `MAX_CONNECTIONS`, a caller waiting for a free one.

    One host's pool, not a `PoolManager`: a client talks to one API server, and the manager's work on
    every request (parse the URL, find the host's pool, merge headers) was a quarter of the client's
    CPU per request (`benchmarks/kube_client.py`).

    `verify`: an SSL context (the cluster's CA, `eks.py`), True (the system's CAs) or False (loopback
    tests only).
    """
    options: dict[str, Any] = {"maxsize": MAX_CONNECTIONS, "block": True}
    if server.startswith("https:"):
        if isinstance(verify, ssl.SSLContext):
            options["ssl_context"] = verify
        elif verify:
            options["ssl_context"] = ssl.create_default_context()
        else:
            options["cert_reqs"] = ssl.CERT_NONE
    return urllib3.connection_from_url(server, **options)


def _object(response: Answer, what: str) -> dict[str, Any]:
    """The answer's JSON object.

    Raises:
        ClusterUnavailableError: the body is not JSON, or not an object (an intermediary's error
            page, a cut body): the call is retried later, like any unavailable API server.
    """
    try:
        body = response.json()
    except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ClusterUnavailableError(
            f"{what}: HTTP {response.status_code} answer is not JSON: {response.text[:100]!r}"
        ) from error
    if not isinstance(body, dict):
        raise ClusterUnavailableError(f"{what}: HTTP {response.status_code} answer is not a JSON object")
    return body


def _body(response: Answer) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(response: Answer) -> str:
    return str(_body(response).get("message", "")) or response.text[:200]


def _names_a_namespace(response: Answer) -> bool:
    """A 404 `Status` about the object's namespace (`namespaces "x" not found`), not its kind."""
    return (_body(response).get("details") or {}).get("kind") == "namespaces"


def _rejected(response: Answer, what: str) -> ClusterRejectedError:
    return ClusterRejectedError(
        f"{what}: HTTP {response.status_code}: {_message(response)}", response.status_code
    )
