"""The typed config: defaults, every bad value refused with one line naming the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from stacks.config import ConfigError, GcoConfig, parse_config, with_overrides
from tests.cdk.conftest import ROOT, cdk_json_config


def test_cdk_json_context_is_valid() -> None:
    config = parse_config(json.loads((ROOT / "cdk.json").read_text())["context"]["gco"])
    assert config.home_region in config.regions
    assert config.gpu_nodes.min_size <= config.gpu_nodes.desired_size <= config.gpu_nodes.max_size


def test_defaults_and_replica_regions() -> None:
    config = parse_config(None)
    assert config == GcoConfig()
    assert config.replica_regions == []
    two = parse_config({"regions": ["us-east-1", "eu-west-1"]})
    assert two.replica_regions == ["eu-west-1"]
    assert (
        parse_config({"regions": ["us-east-1", "eu-west-1"], "table_replicas": False}).replica_regions == []
    )
    assert two.name("reconciler", "eu-west-1") == "gco-reconciler-eu-west-1"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"home_region": "Mars"}, "gco.home_region"),
        ({"regions": ["us-east-1", "us-east-1"]}, "gco.regions"),
        ({"regions": []}, "gco.regions"),
        ({"regions": ["us-west-2"]}, "gco"),
        ({"proxy": {"image": "nginx:latest"}}, "gco.proxy.image"),
        ({"proxy": {"cpu_request": "0.25"}}, "gco.proxy.cpu_request"),
        ({"proxy": {"cpu_target": 150}}, "gco.proxy.cpu_target"),
        (
            {
                "gpu_nodes": {
                    "instance_types": ["g6e.xlarge"],
                    "min_size": 3,
                    "max_size": 2,
                    "desired_size": 2,
                }
            },
            "gco.gpu_nodes",
        ),
        (
            {
                "gpu_nodes": {
                    "instance_types": ["not a type"],
                    "min_size": 0,
                    "max_size": 1,
                    "desired_size": 0,
                }
            },
            "gco.gpu_nodes.instance_types",
        ),
        (
            {
                "system_nodes": {
                    "instance_types": ["m7i.large"],
                    "min_size": 0,
                    "max_size": 1,
                    "desired_size": 0,
                    "capacity_type": "reserved",
                }
            },
            "gco.system_nodes.capacity_type",
        ),
        ({"kubernetes_version": "latest"}, "gco.kubernetes_version"),
        ({"evidence_retention_days": 0}, "gco.evidence_retention_days"),
        ({"log_retention_days": 7}, "gco.log_retention_days"),
        ({"prefix": "GCO"}, "gco.prefix"),
        ({"account": "12345"}, "gco.account"),
        ({"runner": {"heartbeat_seconds": 5}}, "gco.runner.heartbeat_seconds"),
        ({"runner": {"instance_type": "big"}}, "gco.runner.instance_type"),
        ({"unknown": 1}, "gco.unknown"),
    ],
)
def test_bad_values_name_their_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    message = str(caught.value)
    assert message.startswith(f"{key}:")
    assert "\n" not in message


def test_non_object_context_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^gco: context value must be a JSON object$"):
        parse_config(["us-east-1"])


def test_app_py_fails_synth_with_one_line(tmp_path: object) -> None:
    bad = {**cdk_json_config(), "regions": ["us-east-1", "nowhere"]}
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"gco": bad}),
        "CDK_OUTDIR": str(tmp_path),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("gco config error")]
    assert lines == ["gco config error: gco.regions: 'nowhere' is not a Region name"]


def test_context_overrides_on_top_of_cdk_json() -> None:
    raw = {"regions": ["us-east-1"], "bundle_dependencies": True}
    context = {
        "gco": raw,
        "gco.bundle_dependencies": "false",
        "gco.regions": '["us-east-1", "eu-west-1"]',
        "gco.prefix": "team",
        "other": 1,
    }
    config = parse_config(with_overrides(raw, context))
    assert config.bundle_dependencies is False
    assert config.regions == ["us-east-1", "eu-west-1"]
    assert config.prefix == "team"
    assert with_overrides(raw, {"gco": raw}) is raw
    assert parse_config(with_overrides(None, {"gco.sweep_minutes": 10})).sweep_minutes == 10
