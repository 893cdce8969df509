"""Where callers reach an endpoint: each Region's invoke URL, from its Regional stack's outputs.

The Regional stack (`stacks/constructs/front_door.py`) outputs `InvokeUrl`, the base URL of the Region's
IAM-authorized API; endpoint `NAME` answers at `<InvokeUrl>/NAME/...`. `gco inference status` reads
it from CloudFormation in each target Region (`gco.inference.regional_outputs.invoke_urls`: a Region whose
stack is not there shows no URL). This module holds names and limits only, no AWS call.

`GENERATION_TIMEOUT_S` is the one limit of a request's time on the whole path: the front door's
integration timeout (API Gateway streams a response for at most 15 minutes), and the wait of every
hop behind it (the load balancer's idle timeout, the proxy's read and send timeouts, the local
stack's relays, `gco inference invoke`), so no hop cuts a generation the front door still allows.
`MAX_REQUEST_BYTES` is the one limit of a request's size behind the front door.
"""

from __future__ import annotations

import json
import os

INVOKE_URL_OUTPUT = "InvokeUrl"
# Each Region's front door (its REST API, load balancer and VPC link) is named `<prefix>-inference-<region>`.
FRONT_DOOR_PART = "inference"
# With a global address, each Region's global API, its authorizer and their log groups are named
# `<prefix>-global-<region>...` (docs/global.md).
GLOBAL_API_PART = "global"
# API Gateway's longest streamed response (docs.aws.amazon.com/apigateway/latest/developerguide/
# response-transfer-mode.html: "The maximum duration for response streaming is 15 minutes").
GENERATION_TIMEOUT_S = 900
# The global address's two request headers (docs/global.md): the serving Region the global front
# door's authorizer chose, which the Region's proxy acts on, and the mark of a request the proxy
# already forwarded to another Region once (never forwarded again, never moved by the authorizer).
SERVE_REGION_HEADER = "X-Gco-Serve-Region"
HOP_HEADER = "X-Gco-Hop"
HOP_VALUE = "1"
# The one limit of a request body on every way in, answered 413 where it is exceeded: the Regional
# proxy (nginx `client_max_body_size`, rendered by `gco.reconcile.proxy.proxy_conf`; the local
# stack's in-process router and Service network) and the fake engine. Below the front door's own:
# API Gateway REST APIs take a payload of at most 10 MB, not adjustable (docs.aws.amazon.com/
# apigateway/latest/developerguide/api-gateway-execution-service-limits-table.html, "Payload
# size"), answering 413 above it. Equal to TGI's default (text-generation-inference
# launcher/src/main.rs: `payload_limit`, "Payload size limit in bytes", default 2000000), so a
# request the proxy passes is one TGI takes; vLLM's and SGLang's OpenAI servers (FastAPI on
# uvicorn) set no body limit of their own, only a prompt's length in tokens (vLLM
# `--max-model-len`, answered 400). 2 MB of prompt is far more text than any served context holds.
MAX_REQUEST_BYTES = 2_000_000
PREFIX_ENV = "GCO_PREFIX"
DEFAULT_PREFIX = "gco"


def deployment_prefix(prefix: str | None = None) -> str:
    """The deployment's name prefix: `prefix`, else GCO_PREFIX, else `gco`."""
    return prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX


def regional_stack_name(region: str, prefix: str | None = None) -> str:
    """`<prefix>-regional-<region>`, as `app.py` names the Regional stacks (prefix from GCO_PREFIX)."""
    return f"{deployment_prefix(prefix)}-regional-{region}"


def global_stack_name(prefix: str | None = None) -> str:
    """`<prefix>-global`, as `app.py` names the global stack (`GcoConfig.name("global")`)."""
    return f"{deployment_prefix(prefix)}-global"


# API Gateway writes a REST API stage's access logs with the CloudWatch Logs role set in the account's
# settings, one per account and Region ("CloudWatch Logs role ARN must be set in account settings to
# enable logging" otherwise; API Gateway developer guide, "Set up CloudWatch logging for REST APIs").
# A Regional stack with `api_gateway_account: create` creates this role and sets it; `gco doctor`
# tells the role apart from one set by anything else by this name.
LOGGING_ROLE_STEM = "api-gateway-logs"


def logging_role_name(prefix: str, region: str) -> str:
    """`<prefix>-api-gateway-logs-<region>`: the start of the role's name (the stack appends the
    8 characters of its creation, `stacks/constructs/retained.py`)."""
    return f"{prefix}-{LOGGING_ROLE_STEM}-{region}"


def error_body(message: str, kind: str, code: str) -> bytes:
    """An error answer in the shape OpenAI's API gives and its SDKs read into their exceptions
    (`{"error": {"message", "type", "code"}}`): every answer gco's ways in give of their own (the
    global address's, the Regional proxy's), so a client parses one shape whoever refused."""
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()
