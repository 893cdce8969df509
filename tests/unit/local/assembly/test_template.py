"""A template's functions, mappings and schedules as the local stack reads them (assembly.template)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.local.assembly.reader import AssetManifest, StackArtifact
from gco.local.assembly.template import (
    DEFAULT_BATCH_SIZE,
    UNTIL_EXPIRED,
    every_seconds,
    functions,
    mappings,
    scheduled_event,
    schedules,
)
from gco.local.errors import AssemblyError


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [("rate(5 minutes)", 300), ("rate(1 minute)", 60), ("rate(2 hours)", 7200), ("rate(1 day)", 86400),
     ("cron(0 12 * * ? *)", None), ("rate(five minutes)", None)],
)  # fmt: skip
def test_rate_expressions(expression: str, seconds: int | None) -> None:
    assert every_seconds(expression) == seconds


def stack(tmp_path: Path, resources: dict[str, object]) -> StackArtifact:
    (tmp_path / "asset.abc").mkdir()
    (tmp_path / "asset.abc" / "handler.py").write_text("def handler(e, c): return e\n")
    assets = AssetManifest(tmp_path, {"abc": tmp_path / "asset.abc"})
    return StackArtifact("s", "us-east-1", {"Resources": resources}, assets)


def test_defaults_are_the_services_and_references_are_followed(tmp_path: Path) -> None:
    code = {"S3Bucket": "b", "S3Key": "abc.zip"}
    target = {"Arn": {"Fn::GetAtt": ["Fn", "Arn"]}, "Id": "T"}
    made = stack(
        tmp_path,
        {
            "Fn": {"Type": "AWS::Lambda::Function",
                   "Properties": {"Handler": "handler.handler", "Runtime": "python3.13", "Code": code}},
            "Inline": {"Type": "AWS::Lambda::Function",
                       "Properties": {"Handler": "index.handler", "Runtime": "nodejs20.x",
                                      "Code": {"ZipFile": "exports.handler = 1"}}},
            "Map": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"FunctionName": {"Ref": "Fn"}}},
            "Rule": {"Type": "AWS::Events::Rule",
                     "Properties": {"Name": "r", "ScheduleExpression": "rate(1 minute)",
                                    "Targets": [target]}},
            "Pattern": {"Type": "AWS::Events::Rule", "Properties": {"EventPattern": {"source": ["x"]}}},
        },
    )  # fmt: skip
    found = functions(made)
    assert (
        found["Fn"].timeout_s == 3 and found["Fn"].memory_mb == 128 and found["Fn"].handler_file() is not None
    )
    assert found["Inline"].code is None and found["Inline"].inline == "exports.handler = 1"
    (mapping,) = mappings(made).values()
    assert (mapping.function, mapping.batch_size, mapping.retry_attempts) == (
        "Fn",
        DEFAULT_BATCH_SIZE,
        UNTIL_EXPIRED,
    )
    (rule,) = schedules(made).values()
    assert (rule.targets, rule.every_s, rule.retry_attempts) == (("Fn",), 60, 185)
    event = scheduled_event(rule, "us-east-1", "123456789012", "2026-12-07T00:00:00Z")
    assert event["detail-type"] == "Scheduled Event" and event["resources"] == [
        "arn:aws:events:us-east-1:123456789012:rule/r"
    ]


def test_a_function_whose_asset_is_missing_is_an_error_naming_it(tmp_path: Path) -> None:
    made = stack(
        tmp_path, {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Code": {"S3Key": "zzz.zip"}}}}
    )
    with pytest.raises(AssemblyError, match="no asset zzz"):
        functions(made)
