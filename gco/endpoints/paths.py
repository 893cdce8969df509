"""Request paths that stay inside the endpoint they name.

Every endpoint is reached at `/inference/<name>/...` through its Region's proxy, and an IAM
policy may allow a caller one endpoint's path and no other (docs/deploy.md). That holds only if
the path a policy matches (the path as sent) and the path the proxy routes (nginx decodes
`%XX` and resolves `.` and `..` before it picks a location: the "normalised URI" of
https://nginx.org/en/docs/http/ngx_http_core_module.html#location) name the same endpoint. So a
path is refused, by the proxy (400) and by `gco inference invoke` (exit 2), when, before any
decoding, it holds:

- a dot segment, written plainly or percent-encoded (`/../`, `/%2e%2e/`, `/./`): resolving it
  moves the request to another endpoint's prefix, or the proxy's own `/healthz`;
- an encoded slash or backslash (`%2f`, `%5c`) or an encoded NUL (`%00`): decoded, they make
  new segments (or end the string) where the policy saw none;
- a backslash or any character outside a URL's printable ASCII (a control character, CR/LF, a
  space): servers differ on what they make of them;
- and, for the proxy, when the route's prefix as sent is not exactly `/inference/<name>` followed
  by `/`, `?` or the end (`/inference/%63hat` decodes to `/inference/chat`, which a policy on
  `/inference/chat/*` never saw).

What is left decodes to the same segments it was sent as, under the same prefix.
"""

from __future__ import annotations

import re

# Every endpoint is reached at INGRESS_PREFIX + its name, through its Region's shared proxy.
INGRESS_PREFIX = "/inference/"
MAX_PATH = 8192  # nginx's default large_client_header_buffers is 8k: a longer request line is 414
# Percent-encodings that decode to a separator or end the string (case-insensitive, as decoded).
ENCODED_SEPARATORS = ("%2f", "%5c", "%00")
# A dot segment: `.` or `..`, each dot plain or as %2e, between slashes (or at the end).
DOT_SEGMENT = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?=/|$)", re.IGNORECASE)
# Printable ASCII without the space and backslash (RFC 3986 characters and a few it leaves out).
PATH_CHARS = re.compile(r"[!-\[\]-~]*")
QUERY_CHARS = re.compile(r"[!-~]*")  # printable ASCII without the space


def escape_reason(path: str) -> str | None:
    """Why a path (as sent, query string excluded) could be routed other than it reads, or None."""
    if len(path) > MAX_PATH:
        return f"is longer than {MAX_PATH} characters ({len(path)})"
    if not PATH_CHARS.fullmatch(path):
        bad = next(char for char in path if not PATH_CHARS.fullmatch(char))
        return f"holds {bad!r}, which a URL path may not hold unencoded"
    lowered = path.lower()
    for encoded in ENCODED_SEPARATORS:
        if encoded in lowered:
            return f"holds an encoded separator {encoded!r}"
    if DOT_SEGMENT.search(path):
        return "holds a dot segment ('.' or '..', plain or %2e-encoded)"
    return None


def target_reason(target: str) -> str | None:
    """Why the proxy refuses a request target (its path and query, as sent), or None: the one rule
    of the in-process router and of `gco inference invoke --path` (which checks the target the
    proxy will see, `/inference/<name><path>`). The path must pass `escape_reason`; the query is
    not a path (`?next=/../x` is kept), but the whole target must fit in `MAX_PATH` characters
    (nginx answers a longer request line 414) and the query must be printable ASCII without a
    space (nginx refuses the request line otherwise)."""
    path, _, query = target.partition("?")
    reason = escape_reason(path)
    if reason is not None:
        return reason
    if len(target) > MAX_PATH:
        return f"is longer than {MAX_PATH} characters with its endpoint's prefix and query ({len(target)})"
    if not QUERY_CHARS.fullmatch(query):
        bad = next(char for char in query if not QUERY_CHARS.fullmatch(char))
        return f"holds {bad!r} in its query, which a URL may not hold unencoded"
    return None


def stays_in(path: str, endpoint: str) -> bool:
    """Whether a path as sent (query excluded) is exactly under `/inference/<endpoint>` and safe."""
    prefix = f"{INGRESS_PREFIX}{endpoint}"
    under = path == prefix or path.startswith(prefix + "/")
    return under and escape_reason(path) is None


# The same rules for nginx, matched against `$request_uri` (the request line's URI as sent, query
# included: `[^?]*` keeps the match to the path). PCRE `\x5c` is a backslash: nginx's quoted
# strings would unescape a written one.
NGINX_REFUSED = (
    r"^[^?]*(%2f|%5c|%00|\x5c)",
    r"^[^?]*/(\.|%2e){1,2}(/|\?|$)",
)


# A routed request's prefix written exactly, as sent: `/inference/` and a name of the characters a
# name may hold, then `/`, the query or the end. Such a name decodes to itself, so the endpoint
# nginx looks up (from the decoded, normalized `$uri`) is the one the request line names.
NGINX_ROUTE_CHECK = "^" + re.escape(INGRESS_PREFIX) + r"[a-z0-9-]+(/|\?|$)"
