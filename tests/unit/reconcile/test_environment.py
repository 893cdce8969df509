"""The reconciler Lambdas' environment: what the stack writes is exactly what the runtime reads."""

from __future__ import annotations

import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.env import (
    AWS_REGION_ENV,
    CLUSTER_NAME_ENV,
    DEFAULT_TABLE,
    SWEEP_SECONDS_ENV,
    TABLE_ENV,
    WAIT_SECONDS_ENV,
)
from gco.reconcile.addons import ADDONS_ENV, KEDA, METRICS_SERVER
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.proxy.proxy_settings import DEFAULT_PROXY, PROXY_SETTINGS_ENV, ProxySettings


def test_written_environment_reads_back_identical() -> None:
    written = ReconcilerEnvironment(
        cluster_name="gco-us-west-2",
        region="us-west-2",
        table_name="endpoints",
        home_region="us-east-1",
        wait_seconds=2.5,
        sweep_seconds=600.0,
        proxy=ProxySettings(cpu_request="500m"),
        addons=frozenset({METRICS_SERVER, KEDA}),
    )
    env = written.to_env()
    assert env[ADDONS_ENV] == "keda,metrics-server"
    assert ReconcilerEnvironment.from_env(env) == written


def test_unset_and_empty_variables_take_the_defaults() -> None:
    read = ReconcilerEnvironment.from_env(
        {CLUSTER_NAME_ENV: "gco", AWS_REGION_ENV: "eu-west-1", WAIT_SECONDS_ENV: "", TABLE_ENV: ""}
    )
    assert (read.region, read.table_name, read.wait_seconds) == ("eu-west-1", DEFAULT_TABLE, 10.0)
    assert read.sweep_seconds == 300.0
    assert read.proxy == DEFAULT_PROXY and read.addons is None and read.home_region is None
    # Add-ons not known are not written, so the runtime keeps "not known" (nothing refused up front).
    assert ADDONS_ENV not in read.to_env()


@pytest.mark.parametrize(
    ("env", "variable", "says"),
    [
        ({CLUSTER_NAME_ENV: "", AWS_REGION_ENV: "us-east-1"}, CLUSTER_NAME_ENV, "not set"),
        (
            {CLUSTER_NAME_ENV: "gco", AWS_REGION_ENV: "us-east-1", WAIT_SECONDS_ENV: "-1"},
            WAIT_SECONDS_ENV,
            "'-1'",
        ),
        (
            {CLUSTER_NAME_ENV: "gco", AWS_REGION_ENV: "us-east-1", SWEEP_SECONDS_ENV: "0"},
            SWEEP_SECONDS_ENV,
            "'0'",
        ),
        (
            {CLUSTER_NAME_ENV: "gco", AWS_REGION_ENV: "us-east-1", PROXY_SETTINGS_ENV: "{"},
            PROXY_SETTINGS_ENV,
            "",
        ),
        (
            {
                CLUSTER_NAME_ENV: "gco",
                AWS_REGION_ENV: "us-east-1",
                PROXY_SETTINGS_ENV: '{"min_replicas": 0}',
            },
            PROXY_SETTINGS_ENV,
            "min_replicas",
        ),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], variable: str, says: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        ReconcilerEnvironment.from_env(env)
    assert caught.value.field == variable
    assert says in str(caught.value)
