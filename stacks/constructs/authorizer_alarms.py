"""The global authorizer's two alarms (`stacks/constructs/global_front_door.py`), to the Region's alarm
topic: an authorizer that fails answers 500 to every keyed caller, and DNS does not notice (the health
check does not pass through it).

- `<name>-Failures`: the decisions the code could not make (a table unreadable), counted from the
  function's log line `FAILURE_MESSAGE` by a metric filter, Sum over 1 minute, above 0. Exact, but it
  counts only what the code lived to write.
- `<name>-Errors`: what never reaches that line. An import error (`Runtime.ImportModuleError`), a
  timeout or memory exhausted ends the invocation before, or without, any line of the handler; Lambda
  counts each in the function's own `AWS/Lambda` `Errors` metric (dimension `FunctionName`): "Function
  errors include exceptions that your code throws and exceptions that the Lambda runtime throws. The
  runtime returns errors for issues such as timeouts and configuration errors", and `Invocations`
  includes "invocations that result in a function error" (Lambda Developer Guide, "Types of metrics
  for Lambda functions", https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html).
  `Errors` also counts every 401, which the authorizer answers by failing, and callers with bad keys
  must not page anyone: the 401s are taken out, counted by a second metric filter on the decision
  lines whose `EFFECT_FIELD` is `REFUSED`. The logged failures stay in (they are errors, not 401s), so
  a table outage trips both alarms. `Throttles` are added, and counted as calls: a throttled
  authorizer is a 500 to its caller as surely as a crashed one (it has no reserved concurrency, so it
  is throttled only when the Region's account concurrency is spent), and the metric costs one more
  line of the same expression, no alarm of its own.

  The alarm is on the share of calls that failed so, in percent, per minute:
  `100 * (errors + throttles - refusals) / (invocations + throttles)` (each `FILL`ed with 0; no call,
  0), above `ERROR_RATE_PERCENT` in `ERROR_RATE_MINUTES` minutes in a row. A share over two minutes
  rather than a count above 0 in one, because `Errors` is timestamped "when the function was invoked,
  not when the error occurred" (same page) and a log line when it is written: a 401 invoked at the end
  of one minute and logged in the next adds 1 to the first minute and takes 1 from the second, which
  must not page alone, nor the remainders of a flood of bad keys, small beside its calls. An import
  error fails every call: 100 % in every minute with traffic.
  Metric math (`FILL`, `IF`): CloudWatch User Guide, "Using math expressions with CloudWatch metrics",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from gco.global_access.authorizer import (
    DECISION_MESSAGE,
    EFFECT_FIELD,
    FAILURE_MESSAGE,
    FAILURE_METRIC,
    METRICS_NAMESPACE,
    REFUSAL_METRIC,
    REFUSED,
)
from stacks.constructs.dashboards import notify

# Lambda's JSON log format writes a record's message as `message` and each of its `extra` fields
# beside it (the Python runtime's formatter: github.com/aws/aws-lambda-python-runtime-interface-client,
# awslambdaric/lambda_runtime_log_utils.py, `JsonFormatter.format`).
MESSAGE = "message"
FAILURES_ALARM = "Failures"
ERRORS_ALARM = "Errors"
ERROR_RATE_PERCENT = 10
ERROR_RATE_MINUTES = 2
# Calls that failed without a line of the code to say why, in percent of calls (module docstring).
ERROR_RATE = "IF(calls > 0, 100 * (FILL(errors, 0) + FILL(throttles, 0) - FILL(refusals, 0)) / calls, 0)"


def _count(
    scope: Construct,
    construct_id: str,
    log_group: logs.ILogGroup,
    metric_name: str,
    fields: dict[str, str],
) -> logs.MetricFilter:
    """A metric filter counting the log group's lines whose JSON `fields` have the given values."""
    patterns = [logs.FilterPattern.string_value(f"$.{key}", "=", value) for key, value in fields.items()]
    return logs.MetricFilter(
        scope,
        construct_id,
        log_group=log_group,
        filter_pattern=patterns[0] if len(patterns) == 1 else logs.FilterPattern.all(*patterns),
        metric_namespace=METRICS_NAMESPACE,
        metric_name=metric_name,
        metric_value="1",
        default_value=0,
    )


def authorizer_alarms(
    scope: Construct,
    *,
    name: str,
    function: lambda_.IFunction,
    log_group: logs.ILogGroup,
    alarm_targets: Sequence[sns.ITopic],
) -> list[cloudwatch.Alarm]:
    """The failures alarm and the errors alarm of the authorizer `function` (module docstring).

    Parameters:
        scope: the construct that holds them (the global front door: their ids are its children's).
        name: the function's name, which starts each alarm's name (`<name>-Failures`, `<name>-Errors`).
        function: the authorizer.
        log_group: the function's log group (JSON log format: a record's `extra` fields are top-level).
        alarm_targets: the topics told when an alarm changes state.

    Returns:
        The two alarms, failures first.
    """
    minute = Duration.minutes(1)
    failures = _count(scope, "AuthorizerFailures", log_group, FAILURE_METRIC, {MESSAGE: FAILURE_MESSAGE})
    refusals = _count(
        scope,
        "AuthorizerRefusals",
        log_group,
        REFUSAL_METRIC,
        {MESSAGE: DECISION_MESSAGE, EFFECT_FIELD: REFUSED},
    )
    throttles = function.metric_throttles(statistic="Sum", period=minute)
    calls = cloudwatch.MathExpression(
        expression="FILL(invocations, 0) + FILL(throttles, 0)",
        using_metrics={
            "invocations": function.metric_invocations(statistic="Sum", period=minute),
            "throttles": throttles,
        },
        period=minute,
    )
    error_rate = cloudwatch.MathExpression(
        expression=ERROR_RATE,
        using_metrics={
            "calls": calls,
            "errors": function.metric_errors(statistic="Sum", period=minute),
            "throttles": throttles,
            "refusals": refusals.metric(statistic="Sum", period=minute),
        },
        label="calls failed without a logged reason (%)",
        period=minute,
    )
    failures_alarm = cloudwatch.Alarm(
        scope,
        "AuthorizerFailuresAlarm",
        alarm_name=f"{name}-{FAILURES_ALARM}",
        metric=failures.metric(statistic="Sum", period=minute),
        threshold=0,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    errors_alarm = cloudwatch.Alarm(
        scope,
        "AuthorizerErrorsAlarm",
        alarm_name=f"{name}-{ERRORS_ALARM}",
        metric=error_rate,
        threshold=ERROR_RATE_PERCENT,
        evaluation_periods=ERROR_RATE_MINUTES,
        datapoints_to_alarm=ERROR_RATE_MINUTES,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    return [notify(alarm, alarm_targets) for alarm in (failures_alarm, errors_alarm)]
