"""The CloudWatch dashboards (bodies from `gco.deployment.dashboards`) and the alarms an operator is
paged by besides the reconciler's own: the front door's 5xx answers, the global API's with a global
address, and endpoints that stay short of ready replicas.

- `RegionalDashboard` (each Regional stack): dashboard `<prefix>-<region>`, and alarms to the Region's
  alarm topic: `<name>-FrontDoor5xx` (API Gateway's `5XXError` of the stage, summed over 5 minutes,
  above `FIVE_XX_THRESHOLD`); with a global address, `<name>-GlobalApi5xx`, the same of the Region's
  global API (`stacks/constructs/global_front_door.py`), which carries every keyed request and
  answers 500 when its authorizer fails (an authorizer that cannot be imported or times out never
  reaches its own log, but its callers' 5xx do reach this metric); and `<name>-EndpointsNotReady`
  (the sweep's count above 0 in each of `NOT_READY_PERIODS` sweeps in a row, so a rollout that
  becomes ready within that time does not page). Missing data is not breaching: no traffic is not an
  error, and a sweep that did not run is the reconciler's own `SweepErrors` alarm.
- `GlobalDashboard` (the global stack, home Region): dashboard `<prefix>-regions`, every Region's
  widgets side by side (a dashboard's metric widgets name their Region, so one dashboard reads all).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from gco.deployment.dashboards import (
    API_NAMESPACE,
    FIVE_XX_METRIC,
    global_dashboard,
    regional_dashboard,
)
from gco.reconcile.failures import METRICS_NAMESPACE, SWEEP_SERVICE
from gco.reconcile.replica_metrics import NOT_READY_METRIC

FIVE_XX_THRESHOLD = 5
NOT_READY_PERIODS = 3
# The alarms' names end in these (`<name>-<id>`); the endpoints-not-ready alarm is named for its metric.
FRONT_DOOR_5XX_ALARM = "FrontDoor5xx"
GLOBAL_API_5XX_ALARM = "GlobalApi5xx"


def notify(alarm: cloudwatch.Alarm, targets: Sequence[sns.ITopic]) -> cloudwatch.Alarm:
    """Send `alarm`'s changes into and out of ALARM to each topic of `targets`."""
    for topic in targets:
        alarm.add_alarm_action(actions.SnsAction(topic))
        alarm.add_ok_action(actions.SnsAction(topic))
    return alarm


def five_xx(api_name: str, stage: str) -> cloudwatch.Metric:
    """A REST API stage's 5xx answers, summed over 5 minutes."""
    return cloudwatch.Metric(
        namespace=API_NAMESPACE,
        metric_name=FIVE_XX_METRIC,
        dimensions_map={"ApiName": api_name, "Stage": stage},
        statistic="Sum",
        period=Duration.minutes(5),
    )


class RegionalDashboard(Construct):
    """The Region's dashboard and its front-door, global-API and readiness alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        api_name: str,
        stage: str,
        access_log_group: str,
        cluster_name: str,
        sweep_minutes: int,
        alarm_targets: Sequence[sns.ITopic],
        global_api_name: str | None = None,
    ) -> None:
        """`global_api_name`: the Region's global API, where a global address is configured."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        body = regional_dashboard(
            region=stack.region,
            api_name=api_name,
            stage=stage,
            access_log_group=access_log_group,
            cluster_name=cluster_name,
            global_api_name=global_api_name,
        )
        self.dashboard = cloudwatch.CfnDashboard(
            self, "Dashboard", dashboard_name=name, dashboard_body=stack.to_json_string(body)
        )
        not_ready = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=NOT_READY_METRIC,
            dimensions_map={"service": SWEEP_SERVICE},
            statistic="Maximum",
            period=Duration.minutes(max(5, sweep_minutes)),
        )
        specs: list[tuple[str, cloudwatch.Metric, int, int]] = [
            (FRONT_DOOR_5XX_ALARM, five_xx(api_name, stage), FIVE_XX_THRESHOLD, 1),
            (NOT_READY_METRIC, not_ready, 0, NOT_READY_PERIODS),
        ]
        if global_api_name is not None:
            specs.append((GLOBAL_API_5XX_ALARM, five_xx(global_api_name, stage), FIVE_XX_THRESHOLD, 1))
        self.alarms = []
        for alarm_id, metric, threshold, periods in specs:
            alarm = cloudwatch.Alarm(
                self,
                alarm_id,
                alarm_name=f"{name}-{alarm_id}",
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.alarms.append(notify(alarm, alarm_targets))


class GlobalDashboard(Construct):
    """One dashboard across every Region of the deployment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        api_names: dict[str, str],
        cluster_names: dict[str, str],
        stage: str,
        global_api_names: dict[str, str] | None = None,
    ) -> None:
        """`global_api_names`: Region -> its global API, where a global address is configured."""
        super().__init__(scope, construct_id)
        body = global_dashboard(
            api_names=api_names,
            cluster_names=cluster_names,
            stage=stage,
            global_api_names=global_api_names,
        )
        self.dashboard = cloudwatch.CfnDashboard(
            self, "Dashboard", dashboard_name=name, dashboard_body=Stack.of(self).to_json_string(body)
        )
