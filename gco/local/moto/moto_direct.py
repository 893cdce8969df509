"""The local moto server's DynamoDB and DynamoDB Streams calls handed straight to moto's handlers.

moto's server routes every request through its domain dispatcher and a Flask app per service (URL
map, request context, CORS hooks, a Response built from the handler's tuple) before the service's
handler runs. For the JSON-protocol calls of DynamoDB and its streams, which all go to `POST /`
and name their operation in `X-Amz-Target`, that routing decides nothing: the target's prefix
names the handler. Profiled at 1,000 endpoints written at once (py-spy), the routing was about a
fifth of the server's samples, and the server (one Python process, which applies writes one at a
time) was the busiest process of the local stack; its CPU over that run fell from about 28 s to
about 20 s. That is a cost of the stand-in, not of DynamoDB, so
`DirectDispatch` calls the handler's `dispatch` with the request the Flask app would have built
(moto's `Request`, marked as arriving over a WSGI server) and writes its answer as moto's Flask
view does (`moto.core.utils.convert_to_flask_response`): the same status, headers and body, error
bodies included, since the handler builds them. Every other request (S3, Step Functions, moto's
own API, a DynamoDB call with another method or path) keeps moto's routing.

Within the handler, moto finds the method of the call's action by listing the handler class's
functions (`inspect.getmembers`) on every call, about a thirtieth of the server's CPU at 1,000
endpoints: `install` keeps that list per class (a class's functions do not change while it serves).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
# The X-Amz-Target prefixes of the JSON-protocol services answered directly: DynamoDB, its streams.
DYNAMODB_TARGET = "DynamoDB_20120810"
STREAMS_TARGET = "DynamoDBStreams_20120810"


def _default_handlers() -> dict[str, Any]:  # pragma: no cover - imported in the moto server process
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    return {DYNAMODB_TARGET: DynamoHandler, STREAMS_TARGET: DynamoDBStreamsHandler}


class DirectDispatch:
    """A WSGI middleware: `POST /` calls of DynamoDB and its streams go to moto's handler directly.

    Parameters:
        app: moto's own WSGI app, for every other request.
        handlers: X-Amz-Target prefix -> moto response class (its `dispatch(request, url, headers)`);
            moto's DynamoDB and DynamoDB Streams handlers by default.
    """

    def __init__(self, app: WsgiApp, handlers: dict[str, Any] | None = None) -> None:
        from moto.core.request import Request

        class ServerRequest(Request):  # type: ignore[misc]  # moto is not followed by mypy
            """The request moto's Flask app builds (`BackendRequest`), without Flask."""

            from_wsgi_server = True

        self.app = app
        self.handlers = _default_handlers() if handlers is None else handlers
        self._request_class = ServerRequest

    def handler_for(self, environ: dict[str, Any]) -> Any | None:
        """The moto handler that answers this request directly, or None (moto routes it)."""
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO", "/") not in ("", "/"):
            return None
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        return self.handlers.get(target.partition(".")[0]) if "." in target else None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        handler = self.handler_for(environ)
        if handler is None:
            return self.app(environ, start_response)
        from botocore.exceptions import ClientError
        from werkzeug.wrappers import Response

        request = self._request_class(environ)
        try:
            result = handler.dispatch(request, request.raw_url, dict(request.headers))
        except ClientError as error:  # as moto's Flask view answers it
            result = 400, {}, error.response["Error"]["Message"]
        status, headers, body = result if len(result) == 3 else (200, {}, result)
        response = Response(response=body, status=status, headers=headers)
        return response(environ, start_response)


def kept_method_names(method_names: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """`method_names` (a class -> its function names) computed once per class."""
    return functools.lru_cache(maxsize=None)(method_names)


def install() -> None:  # pragma: no cover - runs in the moto server process
    """Keep this process's moto's handler method names per class (before it serves)."""
    from moto.core import responses

    responses.method_names_from_class = kept_method_names(responses.method_names_from_class)
