"""The filters of a DynamoDB stream's event source mapping, checked at synth.

Lambda accepts a pattern that can never match (a matcher on a map attribute, `{"M": [{"exists":
true}]}`) and then hands the function nothing, silently; `gco.deployment.event_filter` refuses such a
pattern, so the synth fails with the pattern's path instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_lambda as lambda_

from gco.deployment.event_filter import MAX_FILTERS, EventFilterError, check_stream_pattern


def stream_filters(*patterns: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`FilterCriteria` filters of a DynamoDB stream mapping, each pattern checked first.

    Raises:
        EventFilterError: a pattern Lambda would refuse or never match, or too many of them.
    """
    if len(patterns) > MAX_FILTERS:
        raise EventFilterError("filters", f"at most {MAX_FILTERS} filters per mapping")
    for pattern in patterns:
        check_stream_pattern(pattern)
    return [dict(lambda_.FilterCriteria.filter(dict(pattern))) for pattern in patterns]
