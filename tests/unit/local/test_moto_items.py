"""The local moto server builds an item with one size check, parses an update expression once per
text, and copies and writes out items node by node once, with moto's own results and errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.parsing.validators import UpdateExpressionValidator

from gco.local.moto.moto_items import ITEM_LIMIT, copy_item, copy_value, parsed_once, regular_json, sized_once

KEY = DynamoType({"S": "ep-1"})
ATTRS: dict[str, Any] = {
    "endpoint_name": {"S": "ep-1"},
    "desired_state": {"S": "deploying"},
    "target_regions": {"L": [{"S": "us-east-1"}, {"S": "eu-west-1"}]},
    "spec": {"M": {"image": {"S": "vllm/vllm-openai:v0.6.3"}, "port": {"N": "8000"}, "env": {"M": {}}}},
    "region_status": {"M": {"us-east-1": {"M": {"state": {"S": "running"}}}}},
}
TABLE = Table(
    "endpoints",
    "123456789012",
    "us-east-1",
    schema=[{"AttributeName": "endpoint_name", "KeyType": "HASH"}],
    attr=[{"AttributeName": "endpoint_name", "AttributeType": "S"}],
)
STATUS_UPDATE = "SET #n6.#n3 = :v4, #n7 = :v6"  # the store's status write (`RegionWrites`)


def size_of(key: str, value: Any) -> int:
    return int(bytesize(key) + value.size())


def shape(node: Any) -> Any:
    """A parse tree as nested tuples of node types and leaf values (no object addresses)."""
    if isinstance(node, list | tuple):
        return tuple(shape(child) for child in node)
    if hasattr(node, "children"):
        return (type(node).__name__, shape(node.children))
    return node if isinstance(node, str | int | float | None) else (type(node).__name__, repr(vars(node)))


def build(attrs: dict[str, Any], sizes: list[str] | None = None) -> Item:
    def counted(key: str, value: Any) -> int:
        if sizes is not None:
            sizes.append(key)
        return size_of(key, value)

    item = Item.__new__(Item)
    sized_once(DynamoType, counted, ITEM_LIMIT, ItemSizeTooLarge)(item, KEY, None, attrs)
    return item


def test_an_item_is_built_as_moto_builds_it_sizing_each_attribute_once() -> None:
    sizes: list[str] = []
    built = build(ATTRS, sizes)
    assert built == Item(KEY, None, ATTRS)
    assert built.to_json() == Item(KEY, None, ATTRS).to_json()
    assert sorted(sizes) == sorted(ATTRS)  # once each: moto sizes every earlier attribute again
    with pytest.raises(ItemSizeTooLarge):  # a later set (an update's SET) keeps moto's own check
        built.attrs["later"] = DynamoType({"S": "x" * ITEM_LIMIT})


@pytest.mark.parametrize("spread", [1, 4])
def test_an_item_over_the_limit_is_refused_as_moto_refuses_it(spread: int) -> None:
    big = {f"a{index}": {"S": "x" * (ITEM_LIMIT // spread)} for index in range(spread)}
    attrs = {"endpoint_name": {"S": "ep-1"}, **big}
    with pytest.raises(ItemSizeTooLarge):
        Item(KEY, None, attrs)
    with pytest.raises(ItemSizeTooLarge):
        build(attrs)
    just_under = {"endpoint_name": {"S": "ep-1"}, "a": {"S": "x" * (ITEM_LIMIT - 1000)}}
    assert build(just_under) == Item(KEY, None, just_under)


def test_an_update_expression_is_parsed_once_and_its_kept_tree_never_changes() -> None:
    calls: list[str] = []

    def make(text: str) -> Any:
        calls.append(text)
        return UpdateExpressionParser.make(text)

    kept = parsed_once(make)
    tree = kept(STATUS_UPDATE)
    assert kept(STATUS_UPDATE) is tree and calls == [STATUS_UPDATE]
    assert shape(tree) == shape(UpdateExpressionParser.make(STATUS_UPDATE))
    before = shape(copy.deepcopy(tree))
    item = Item(KEY, None, ATTRS)
    names = {"#n6": "region_status", "#n3": "us-east-1", "#n7": "updated_at"}
    values = {":v4": {"M": {"state": {"S": "creating"}}}, ":v6": {"S": "2026-12-05T00:00:00Z"}}
    validated = UpdateExpressionValidator(
        tree,
        expression_attribute_names=names,
        expression_attribute_values=values,
        item=item,
        table=TABLE,
    ).validate()
    validated.normalize()
    assert shape(tree) == before  # the validator worked on its own copy


def test_a_text_that_does_not_parse_raises_moto_error_every_time() -> None:
    kept = parsed_once(UpdateExpressionParser.make)
    for _ in range(2):
        with pytest.raises(Exception, match="Invalid UpdateExpression"):
            kept("SET = :v")


# Every kind of attribute value, nested: moto's own `__deepcopy__` and `to_regular_json` (unpatched in
# this process: `install` runs only in the moto server) are the reference.
EVERY_KIND: dict[str, Any] = {
    "s": {"S": "text"},
    "n": {"N": "8000"},
    "b": {"B": "aGVsbG8="},  # base64 on the wire: to_regular_json decodes it
    "raw": {"B": b"bytes"},  # raw bytes (after a projection round trip): kept
    "bool": {"BOOL": False},
    "null": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": ["aGk=", "eW8="]},
    "list": {"L": [{"S": "x"}, {"L": [{"N": "1"}, {"M": {"deep": {"SS": ["y"]}}}]}, {"NULL": True}]},
    "map": {
        "M": {
            "empty": {"M": {}},
            "status": {"M": {"us-east-1": {"M": {"state": {"S": "running"}, "ready": {"N": "1"}}}}},
            "env": {"L": []},
        }
    },
}


@pytest.mark.parametrize("name", sorted(EVERY_KIND))
def test_a_value_is_copied_and_written_out_as_moto_does_it(name: str) -> None:
    value = DynamoType(EVERY_KIND[name])
    copied = copy_value(value, {}, DynamoType)
    assert copied == copy.deepcopy(value) and copied.to_json() == copy.deepcopy(value).to_json()
    assert type(copied) is DynamoType and copied is not value
    assert regular_json(value, DynamoType) == value.to_regular_json()


def test_an_item_is_copied_as_moto_copies_it_and_shares_nothing_mutable() -> None:
    item = Item(KEY, DynamoType({"N": "7"}), {**ATTRS, **EVERY_KIND})
    copied = copy_item(item, {}, DynamoType, LimitedSizeDict)
    reference = copy.deepcopy(item)
    assert copied == reference and copied.to_json() == reference.to_json()
    assert type(copied.attrs) is LimitedSizeDict and copied.hash_key is not item.hash_key
    copied.attrs["region_status"].value["us-east-1"].value["state"] = DynamoType({"S": "deleted"})
    copied.attrs["list"].value[1].value.append(DynamoType({"S": "later"}))
    copied.attrs["ss"].value.append("c")
    assert item.to_json() == reference.to_json() != copied.to_json()  # the original is untouched
    with pytest.raises(ItemSizeTooLarge):  # the copy's later sets keep moto's size check
        copied.attrs["later"] = DynamoType({"S": "x" * ITEM_LIMIT})


def test_a_node_reached_twice_is_copied_once_as_copy_deepcopy_does() -> None:
    shared = DynamoType({"M": {"a": {"S": "x"}}})
    value = DynamoType({"L": []})
    value.value = [shared, shared]
    copied = copy_value(value, {}, DynamoType)
    reference = copy.deepcopy(value)
    assert copied.value[0] is copied.value[1] and reference.value[0] is reference.value[1]
    assert copied.value[0] is not shared


def test_writing_out_converts_each_node_once() -> None:
    depth = 12
    value: dict[str, Any] = {"S": "leaf"}
    for _ in range(depth):
        value = {"M": {"k": value}}
    tree = DynamoType(value)
    assert regular_json(tree, DynamoType) == tree.to_regular_json()
    deepcopies: list[int] = []
    original = DynamoType.__deepcopy__

    def counting_deepcopy(node: Any, memo: dict[int, Any]) -> Any:
        deepcopies.append(1)
        return original(node, memo)

    DynamoType.__deepcopy__ = counting_deepcopy
    try:
        tree.to_regular_json()
        moto_copies = len(deepcopies)
        deepcopies.clear()
        regular_json(tree, DynamoType)
    finally:
        DynamoType.__deepcopy__ = original
    assert deepcopies == [] and moto_copies >= depth * (depth + 1) // 2  # moto: each node d times
