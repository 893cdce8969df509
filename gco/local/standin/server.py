"""The HTTP face of the stand-in API server: request parsing, authorization attributes, dispatch.

Kept apart from the object store (`store.py`) and the fault queue (`faults.py`): this module turns
a request into the API server's answer (authenticate, answer an injected fault, authorize with the
grant, resolve the path, serve from the store), as the REST subset `KubeCluster` uses: GET of one
object, label-selector lists paged with limit/continue, server-side apply (`PATCH`,
`application/apply-patch+yaml` with a JSON body and a fieldManager), DELETE with preconditions.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from gco.local.processes.headers import http_date
from gco.local.processes.listen import LISTEN_BACKLOG
from gco.local.standin.faults import FaultQueue
from gco.local.standin.limits import body_refusal
from gco.local.standin.status import Attributes, create_forbidden, forbidden, not_found, not_served
from gco.local.standin.status import status as _status
from gco.local.standin.store import ObjectStore
from gco.reconcile.access import Grant
from gco.reconcile.kubeapi import MERGE_PATCH
from gco.reconcile.objects import POD


@dataclass(frozen=True)
class Identity:
    """Who a bearer token authenticates as, and the grant RBAC gives that user."""

    user: str
    grant: Grant


class ServedAPI(Protocol):
    """What the handler serves from: the stand-in API server (`api.StandInKubeAPI`), named here by
    its shape so that this module does not import the one that imports it."""

    store: ObjectStore
    faults: FaultQueue
    fault_sleep: float
    requests: Counter[str]
    lists: Counter[tuple[str, str]]

    def identify(self, authorization: str) -> Identity | None: ...

    def authorize(self, attributes: Attributes, grant: Grant | None = None) -> bool: ...

    def pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...

    def proxy_to_pod(self, namespace: str, name: str, port: int, path: str) -> tuple[int, str] | None: ...

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, Any]
    ) -> dict[str, Any] | None: ...


PATH = re.compile(
    r"^/(?P<prefix>api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
# A pod's proxy subresource: `pods/<name>[:<port>]/proxy[/<path>]` (any depth of path).
POD_PROXY_PATH = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<pod>[^/:]+)(?::(?P<port>\d+))?/proxy(?P<rest>/.*)?$"
)


class PodText(bytes):
    """A pod's own answer relayed by the pod proxy (plain text, not the API server's JSON)."""


_METHOD_VERBS = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _verb(method: str, name: str | None, query: Mapping[str, str]) -> str:
    """The RBAC verb of a request, as the API server's request-info resolver names it
    (k8s.io/apiserver `pkg/endpoints/request/requestinfo.go`, `NewRequestInfo`; the verbs are listed
    at kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb):
    POST create, GET get, PUT update, PATCH patch, DELETE delete; without a name a GET is a list, or
    a watch with `watch=true` (or `1`), and a DELETE is a deletecollection.
    """
    verb = _METHOD_VERBS[method]
    if not name and verb == "get":
        return "watch" if query.get("watch") in ("true", "1") else "list"
    if not name and verb == "delete":
        return "deletecollection"
    return verb


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG  # socketserver's 5: see gco.local.processes.listen

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (an injected timeout, a closed pool) is not an error here."""
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    server_api: ServedAPI
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle delay per reply

    def log_message(self, format: str, *args: Any) -> None:
        return

    def date_time_string(self, timestamp: float | None = None) -> str:
        return http_date(timestamp)  # made once a second, not per answer (`headers.py`)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def _serve(self, method: str) -> None:
        api = self.server_api
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        api.requests[method] += 1
        identity = api.identify(self.headers.get("Authorization") or "")
        if identity is None:
            self._send(401, _status(401, "Unauthorized"))
            return
        fault = api.faults.take(method)
        if fault is not None and fault.timeout == "before":
            time.sleep(api.fault_sleep)
            self.close_connection = True
            return
        if fault is not None and fault.status is not None:
            self._send(fault.status, _status(fault.status, "injected fault"), {"Retry-After": "0"})
            return
        code, body = self._dispatch(method, raw, identity)
        if fault is not None and fault.timeout == "after":
            time.sleep(api.fault_sleep)
            self.close_connection = True
            return
        self._send(code, body)

    def _dispatch(self, method: str, raw: bytes, identity: Identity) -> tuple[int, dict[str, Any] | bytes]:
        api = self.server_api
        url = urlparse(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        proxied = POD_PROXY_PATH.match(url.path)
        if proxied is not None:
            return self._pod_proxy(method, proxied, identity, url.query)
        match = PATH.match(url.path)
        if not match:
            return 404, not_served()
        namespace, name = match["ns"], match["name"]
        prefix = match["prefix"]
        attributes = Attributes(
            user=identity.user,
            verb=_verb(method, name, query),
            group="" if prefix == "api/v1" else prefix.split("/")[1],
            resource=match["plural"],
            namespace=namespace,
            name=name,
            subresource=match["sub"] or "",
        )
        if not api.authorize(attributes, identity.grant):
            return 403, forbidden(attributes)
        too_large = body_refusal(len(raw))
        if too_large is not None:
            return too_large
        if (prefix, match["plural"]) == ("api/v1", POD.plural) and method == "GET" and name is None:
            pods = api.pods(namespace or "", query.get("labelSelector", ""))
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods}
        if (prefix, match["plural"]) == ("api/v1", POD.plural) and method == "PATCH" and name is not None:
            return self._patch_pod(namespace or "", name, raw)
        kind = api.store.kind_for(prefix, match["plural"])
        if not kind:
            return 404, not_served()
        if attributes.subresource or attributes.verb in ("watch", "create", "update"):
            # Authorized by their own verbs above; the stand-in serves none of them (api.py's limits).
            served = f"{attributes.verb} of {attributes.rbac_resource}"
            return 405, _status(405, f"the stand-in does not serve {served}")
        if not kind.namespaced:
            namespace = ""
        if method == "GET" and name is None:
            label_selector = query.get("labelSelector", "")
            api.lists[(kind.plural, label_selector)] += 1
            items, version = api.store.list_encoded(kind, namespace, label_selector)
            start = int(query.get("continue") or 0)
            limit = int(query.get("limit") or 0) or len(items) or 1
            meta: dict[str, Any] = {"resourceVersion": version}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            head = json.dumps({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta})
            # The items are already JSON (the store keeps each object's): spliced in, not re-encoded.
            return 200, b"".join(
                (head[:-1].encode(), b', "items": [', b", ".join(items[start : start + limit]), b"]}")
            )
        if namespace is None or name is None:
            return 405, _status(405, f"{method} needs a namespaced object path")
        if method == "GET":
            found = api.store.get(kind, namespace, name)
            return (200, found) if found is not None else (404, not_found(kind.group, kind.plural, name))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, _status(400, "body is not JSON")
        if method == "DELETE":
            return api.store.delete(kind, namespace, name, body)
        if self.headers.get("Content-Type") != "application/apply-patch+yaml":
            return 415, _status(415, "only server-side apply (application/apply-patch+yaml) is served")
        if not query.get("fieldManager"):
            return 400, _status(400, "fieldManager is required for apply")
        # An apply that creates the object is authorized a second time, as `create` with its name,
        # when the store finds no object (k8s.io/apiserver `handlers/patch.go`: `withAuthorization`).
        creating = replace(attributes, verb="create")
        return api.store.apply(
            kind,
            namespace,
            name,
            body,
            query["fieldManager"],
            query.get("force") == "true",
            may_create=lambda: api.authorize(creating, identity.grant),
            refused=create_forbidden(creating),
        )

    def _patch_pod(self, namespace: str, name: str, raw: bytes) -> tuple[int, dict[str, Any] | bytes]:
        """A JSON merge patch of a registered pod's annotations (what the reconciler sends, `kubeapi.
        annotate_pod`); any other patch of a pod is 415 or 405 here (not modelled)."""
        if self.headers.get("Content-Type") != MERGE_PATCH:
            return 415, _status(415, "the stand-in serves only merge patches of pods")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, _status(400, "body is not JSON")
        meta = body.get("metadata") if isinstance(body, dict) else None
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if (
            set(body) != {"metadata"}
            or set(meta or {}) != {"annotations"}
            or not isinstance(annotations, dict)
        ):
            return 405, _status(405, "the stand-in serves only patches of a pod's annotations")
        patched = self.server_api.annotate_pod(namespace, name, annotations)
        return (200, patched) if patched is not None else (404, not_found("", POD.plural, name))

    def _pod_proxy(
        self, method: str, match: re.Match[str], identity: Identity, query: str = ""
    ) -> tuple[int, dict[str, Any] | bytes]:
        """A request through a pod's proxy subresource, authorized as `<verb>` on `pods/proxy`; a GET is
        relayed to what the pod registered (`StandInKubeAPI.register_pod`), with its query string, as
        the API server's proxy passes it on (the sweep's Prometheus query, `gco.reconcile.engine_metrics`);
        anything else is 405."""
        api = self.server_api
        attributes = Attributes(
            user=identity.user,
            verb=_METHOD_VERBS.get(method, method.lower()),
            group="",
            resource=POD.plural,
            namespace=match["ns"],
            name=match["pod"],
            subresource="proxy",
        )
        if not api.authorize(attributes, identity.grant):
            return 403, forbidden(attributes)
        if method != "GET":
            return 405, _status(405, f"the stand-in does not serve {attributes.verb} of pods/proxy")
        path = (match["rest"] or "/") + (f"?{query}" if query else "")
        answer = api.proxy_to_pod(match["ns"], match["pod"], int(match["port"] or 0), path)
        if answer is None:
            return 404, not_found("", POD.plural, match["pod"])
        code, text = answer
        return code, PodText(text.encode())

    def _send(
        self, code: int, body: Mapping[str, Any] | bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        """Answer `body` as JSON (bytes are JSON already)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        kind = "text/plain" if isinstance(body, PodText) else "application/json"
        try:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (an injected timeout)
            self.close_connection = True
