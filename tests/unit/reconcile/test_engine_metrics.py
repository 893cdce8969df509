"""The TTFT query and the reading of Prometheus' instant-vector answers (pure)."""

from __future__ import annotations

import json
import re

import pytest

from gco.engines.sglang import TTFT_METRIC as SGLANG_TTFT_METRIC
from gco.engines.vllm import TTFT_METRIC
from gco.reconcile.engine_metrics import ENDPOINT_SERIES_LABEL, parse_vector, series_label, ttft_query
from gco.reconcile.errors import MetricsAnswerError
from gco.reconcile.objects import ENDPOINT_LABEL


def test_the_endpoint_label_is_named_as_kubernetes_service_discovery_writes_it() -> None:
    assert ENDPOINT_LABEL == "gco.dev/endpoint"
    assert ENDPOINT_SERIES_LABEL == series_label(ENDPOINT_LABEL) == "gco_dev_endpoint"


def test_the_query_is_a_quantile_of_the_bucket_rates_of_either_engine_by_endpoint() -> None:
    buckets = f'{{__name__=~"{TTFT_METRIC}_bucket|{SGLANG_TTFT_METRIC}_bucket"}}'
    assert ttft_query(0.99) == (
        f"histogram_quantile(0.99, sum by (le, gco_dev_endpoint) (rate({buckets}[5m])))"
    )
    assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", SGLANG_TTFT_METRIC)


def vector(*samples: tuple[dict[str, str], str]) -> str:
    result = [{"metric": labels, "value": [1733250000.5, value]} for labels, value in samples]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def test_finite_values_of_labelled_series_are_kept() -> None:
    body = vector(
        ({ENDPOINT_SERIES_LABEL: "chat"}, "0.25"),
        ({ENDPOINT_SERIES_LABEL: "idle"}, "NaN"),
        ({ENDPOINT_SERIES_LABEL: "huge"}, "+Inf"),
        ({"job": "kubernetes-pods"}, "1"),
    )
    assert parse_vector(body) == {"chat": 0.25}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("<html>", "not JSON"),
        (json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}), "parse error"),
        (json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}), "matrix"),
        (vector(({ENDPOINT_SERIES_LABEL: "chat"}, "x")), "without a value"),
    ],
)
def test_an_answer_that_is_no_instant_vector_is_refused(body: str, says: str) -> None:
    with pytest.raises(MetricsAnswerError, match=says):
        parse_vector(body)
