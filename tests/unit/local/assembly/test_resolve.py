"""CloudFormation intrinsics resolved against the local stack's values (gco.local.assembly.resolve)."""

from __future__ import annotations

import pytest

from gco.local.assembly.resolve import ACCOUNT, Resolver
from gco.local.errors import AssemblyError

RESOLVER = Resolver(
    region="us-west-2",
    stack="gco-regional-us-west-2",
    refs={"Table": "gco-inference-endpoints", "Queue": "https://sqs/dlq"},
    attributes={("Table", "StreamArn"): "arn:aws:dynamodb:us-west-2:1:table/t/stream/1"},
    exports={"gco-global:TableName": "gco-inference-endpoints"},
)


def test_refs_attributes_joins_and_pseudo_parameters() -> None:
    value = {
        "A": {"Ref": "Table"},
        "B": {"Fn::GetAtt": ["Table", "StreamArn"]},
        "C": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":states:", {"Ref": "AWS::Region"}, ":",
                                 {"Ref": "AWS::AccountId"}, ":stateMachine:x"]]},
        "D": {"Fn::Select": [1, {"Fn::Split": ["/", {"Fn::GetAtt": "Table.StreamArn"}]}]},
        "E": {"Fn::ImportValue": "gco-global:TableName"},
        "F": {"Fn::Sub": "${Table}@${AWS::Region}/${Table.StreamArn}"},
        "G": {"Fn::Sub": ["${Name}-x", {"Name": {"Ref": "Queue"}}]},
        "H": ["plain", 3],
    }  # fmt: skip
    assert RESOLVER.resolve(value) == {
        "A": "gco-inference-endpoints",
        "B": "arn:aws:dynamodb:us-west-2:1:table/t/stream/1",
        "C": f"arn:aws:states:us-west-2:{ACCOUNT}:stateMachine:x",
        "D": "t",
        "E": "gco-inference-endpoints",
        "F": "gco-inference-endpoints@us-west-2/arn:aws:dynamodb:us-west-2:1:table/t/stream/1",
        "G": "https://sqs/dlq-x",
        "H": ["plain", 3],
    }


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"Ref": "Bucket"}, "'Bucket'"),
        ({"Fn::GetAtt": ["Table", "Arn"]}, "('Table', 'Arn')"),
        ({"Fn::ImportValue": "other:Export"}, "'other:Export'"),
        ({"Fn::If": ["C", "a", "b"]}, "Fn::If is not resolved"),
    ],
)
def test_what_the_local_stack_did_not_make_is_an_error_naming_it(value: object, named: str) -> None:
    with pytest.raises(AssemblyError, match=r"Environment\.X") as caught:
        RESOLVER.resolve({"X": value}, "Environment")
    assert named in str(caught.value)
