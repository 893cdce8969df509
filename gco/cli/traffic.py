"""`gco inference invoke|canary|promote|rollback`: requests to an endpoint and its traffic split.

`invoke` parses, reads the record, picks the Region and sends one request (`gco.inference.invoke`); the
canary commands call the fenced actions of `gco.endpoints.canary`.
"""

from __future__ import annotations

import click

from gco import aws
from gco.cli.admission import admitter, allow_unvalidated_option, warn
from gco.cli.common import (
    STRICT_INT,
    connection_options,
    emit,
    name_argument,
    open_store,
    timeout_flag,
)
from gco.cli.inference import show
from gco.cli.progress import reconciler_watch
from gco.endpoints import canary as canary_actions
from gco.endpoints import names, operations
from gco.endpoints.record import EndpointRecord
from gco.errors import GcoInputError
from gco.inference.invoke import (
    API_KEY_ENV,
    GLOBAL,
    GLOBAL_URL_ENV,
    TIMEOUT_S,
    InvokeFailedError,
    InvokeResult,
    check_path,
    check_size,
    default_request,
    global_address,
    local_bases,
    parse_body,
    send,
    send_stream,
    serving_region,
    shown_body,
    stream_request,
    tls_verification,
)
from gco.inference.regional_outputs import invoke_urls
from gco.reconcile.proxy.routes import CANARY, PRIMARY


@click.command()
@name_argument
@click.option(
    "--region",
    "regions",
    multiple=True,
    help=f"Region to invoke [default: the global address where {GLOBAL_URL_ENV} and {API_KEY_ENV} (its "
    "key) are set, which says which Region answered; else the first target Region running it].",
)
@click.option("--prompt", default=None, help="Prompt of the framework's completion request.")
@click.option(
    "--body", "body_text", default=None, metavar="JSON", help="The whole request body (a JSON object)."
)
@click.option(
    "--path", default=None, help="Path under the endpoint [default: the framework's completion path]."
)
@timeout_flag(TIMEOUT_S, "Seconds to wait for the answer (or the next streamed event).")
@click.option(
    "--stream", is_flag=True, help="Ask for server-sent events and print the text as each token arrives."
)
@connection_options
def invoke(
    name: str,
    regions: tuple[str, ...],
    prompt: str | None,
    body_text: str | None,
    path: str | None,
    timeout: float,
    stream: bool,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Send one request to NAME through its Region's route and print the answer.

    \b
    Example:
      gco inference invoke chat --region us-west-2 --prompt 'Say hello.' -o json
    """
    if len(regions) > 1:
        raise GcoInputError("--region", f"give one Region to invoke (got {len(regions)})")
    region = names.region(regions[0], "--region", allow_new=True) if regions else None
    if prompt is not None and body_text is not None:
        raise GcoInputError("--body", "give --prompt or --body, not both")
    if path is not None:
        check_path(path, name)
    body = parse_body(body_text) if body_text is not None else None
    check_size(
        body if body is not None else {"prompt": prompt or ""}, "--body" if body is not None else "--prompt"
    )
    tls_verification()  # a bad GCO_INVOKE_CA_BUNDLE is bad input, before any call
    bases = local_bases()
    routed = global_address() if region is None else None
    through, headers = routed if routed is not None else (None, {})
    store = open_store(endpoint_url, table_name)
    record = operations.fresh(store, name)
    # Without --region, a Region whose observation is fresh is tried before a stale one.
    stale = {} if region or through else reconciler_watch(store.table_name, endpoint_url).stale(record)
    target = GLOBAL if through else serving_region(record, region, stale)
    default_path, default_body = (stream_request if stream else default_request)(record.spec, prompt)
    if through:
        url: str | None = f"{through}/inference/{name}"
    elif bases:
        base = bases.get(target)
        url = f"{base.rstrip('/')}/{name}" if base else None
    else:
        found = invoke_urls(
            name, [target], lambda r: aws.client("cloudformation", region=r, endpoint_url=endpoint_url)
        )
        url = found.get(target)
    if not url:
        raise InvokeFailedError(f"no invoke URL for {target} (is its Regional stack deployed?)")
    url += path or default_path
    if stream:
        result = _streamed(
            target,
            url,
            body or default_body,
            signed=not bases and not through,
            timeout=timeout,
            output=output,
            framework=record.spec.framework,
            headers=headers,
        )
    else:
        signed = not bases and not through
        result = send(target, url, body or default_body, signed=signed, timeout=timeout, headers=headers)
    if output != "table":
        emit(result.model_dump(mode="json"), output)
    elif result.first_event_ms is None and result.region == GLOBAL:  # no Region named itself
        click.echo(
            f"the global address {result.status} {result.latency_ms:.0f} ms, answered by the global "
            "address itself: no Region served the request"
        )
        click.echo(f"POST {result.url}")
        click.echo(shown_body(result.body))
    elif result.first_event_ms is None:
        answered = answered_by(record, result.version, result.status)
        via = " (through the global address)" if through else ""
        click.echo(f"{result.region}{via} {result.status} {result.latency_ms:.0f} ms, answered by {answered}")
        click.echo(f"POST {result.url}")
        click.echo(shown_body(result.body))
    if not 200 <= result.status < 300:
        where = "at the global address" if result.region == GLOBAL else f"in {result.region}"
        raise InvokeFailedError(f"{name} {where} answered {result.status}")


def _streamed(
    region: str,
    url: str,
    body: dict[str, object],
    *,
    signed: bool,
    timeout: float,
    output: str,
    framework: str,
    headers: dict[str, str] | None = None,
) -> InvokeResult:
    """Stream the answer: its text to stdout as it comes (not with `--output json`), then one line on
    stderr with the Region, status, first-event and total times."""
    printing = output == "table"
    result = send_stream(
        region,
        url,
        body,
        signed=signed,
        timeout=timeout,
        framework=framework,
        on_text=lambda piece: click.echo(piece, nl=False) if printing else None,
        headers=headers,
    )
    if printing and result.first_event_ms is not None:
        click.echo("")
        click.echo(
            f"{result.region} {result.status} first event {result.first_event_ms:.0f} ms, "
            f"{result.latency_ms:.0f} ms in all",
            err=True,
        )
    return result


# What a proxy answers itself when the upstream it picked did not answer (nginx's 502 Bad Gateway,
# 503, 504 Gateway Timeout; the in-process router's 502): no engine of that version answered.
PROXY_FAILURES = frozenset({502, 503, 504})


def answered_by(record: EndpointRecord, version: str | None, status: int = 200) -> str:
    """Which version answered, with its image: `primary (IMAGE)` / `canary (IMAGE)`; for a 502, 503
    or 504 the proxy itself, naming the version whose engines did not answer."""
    if status in PROXY_FAILURES:
        picked = f"{version}'s" if version in (PRIMARY, CANARY) else "its"
        return f"the Region's proxy, not an engine ({picked} upstream did not answer)"
    if version == CANARY and record.spec.canary is not None:
        return f"{CANARY} ({record.spec.canary.image})"
    if version == PRIMARY:
        return f"{PRIMARY} ({record.spec.image})"
    return "version not reported"


@click.command()
@name_argument
@click.option("--image", required=True, help="The canary's container image.")
@click.option(
    "--weight", required=True, type=STRICT_INT, help="Percent of requests the canary takes (0-100)."
)
@click.option(
    "--replicas", default=None, type=STRICT_INT, help="Canary replicas per Region [default: kept, else 1]."
)
@allow_unvalidated_option
@connection_options
def canary(
    name: str,
    image: str,
    weight: int,
    replicas: int | None,
    allow_unvalidated: str | None,
    endpoint_url: str | None,
    table_name: str | None,
    output: str,
) -> None:
    """Give NAME a canary taking --weight percent of its requests.

    \b
    Example:
      gco inference canary chat --image vllm/vllm-openai:v0.6.4 --weight 10
    """
    store = open_store(endpoint_url, table_name)
    hook = admitter("canary", endpoint_url, allow_unvalidated)
    show(canary_actions.set_canary(store, name, image, weight, replicas, admit=hook), output)
    warn(hook)


@click.command()
@name_argument
@connection_options
def promote(name: str, endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Make NAME's canary its version; the canary goes.

    \b
    Example:
      gco inference promote chat
    """
    show(canary_actions.promote(open_store(endpoint_url, table_name), name), output)


@click.command()
@name_argument
@connection_options
def rollback(name: str, endpoint_url: str | None, table_name: str | None, output: str) -> None:
    """Remove NAME's canary; its own version answers every request.

    \b
    Example:
      gco inference rollback chat
    """
    show(canary_actions.rollback(open_store(endpoint_url, table_name), name), output)


COMMANDS = (invoke, canary, promote, rollback)
