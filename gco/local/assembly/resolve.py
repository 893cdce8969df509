"""CloudFormation's intrinsic functions in a template value, resolved against what the local stack made.

A function's `Environment` names the resources it uses by `Ref` and `Fn::GetAtt` (a table's name, a
state machine's ARN, a stream's ARN), joined or substituted into strings, and across stacks by
`Fn::ImportValue`. `Resolver` evaluates them as CloudFormation does at deploy (the CloudFormation
User Guide's "Intrinsic function reference": `Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`,
`Fn::Select`, `Fn::Split`, `Fn::ImportValue`, and the pseudo parameters `AWS::Region`,
`AWS::AccountId`, `AWS::Partition`, `AWS::URLSuffix`, `AWS::StackName`), with the values the local
stack gives for each logical id it created. A name it was not given is an `AssemblyError` naming it,
never an empty string.

Not modelled: `Fn::If` and conditions, `Fn::GetAZs`, `Fn::Base64`, `Fn::Cidr`, `Fn::FindInMap`
(gco's function environments use none of them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gco.local.errors import AssemblyError

ACCOUNT = "123456789012"  # moto's default account
_SUB = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass(frozen=True)
class Resolver:
    """Values for a stack's logical ids: `refs` (what `Ref` gives), `attributes` ((id, name) -> value
    for `Fn::GetAtt`), `exports` (export name -> value, every stack's) and the stack's Region."""

    region: str
    stack: str
    refs: Mapping[str, str] = field(default_factory=dict)
    attributes: Mapping[tuple[str, str], str] = field(default_factory=dict)
    exports: Mapping[str, str] = field(default_factory=dict)

    def pseudo(self) -> dict[str, str]:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack,
        }

    def resolve(self, value: Any, where: str = "") -> Any:
        """`value` with every intrinsic function evaluated.

        Raises:
            AssemblyError: a function this resolver does not know, or a name it was not given.
        """
        if isinstance(value, list):
            return [self.resolve(item, where) for item in value]
        if not isinstance(value, Mapping):
            return value
        if len(value) == 1:
            ((name, argument),) = value.items()
            if name == "Ref" or name.startswith("Fn::"):
                return self._function(name, argument, where)
        return {key: self.resolve(item, f"{where}.{key}" if where else key) for key, item in value.items()}

    def _function(self, name: str, argument: Any, where: str) -> Any:
        if name == "Ref":
            return self._ref(str(argument), where)
        if name == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else str(argument).split(".", 1)
            return self._lookup(self.attributes, (str(logical_id), str(attribute)), where)
        if name == "Fn::Join":
            separator, items = argument
            return str(separator).join(str(item) for item in self.resolve(items, where))
        if name == "Fn::Select":
            index, items = self.resolve(argument, where)
            return items[int(index)]
        if name == "Fn::Split":
            separator, text = self.resolve(argument, where)
            return str(text).split(str(separator))
        if name == "Fn::ImportValue":
            return self._lookup(self.exports, str(self.resolve(argument, where)), where)
        if name == "Fn::Sub":
            return self._sub(argument, where)
        raise AssemblyError(f"{self.stack} {where}: {name} is not resolved by the local stack")

    def _ref(self, name: str, where: str) -> str:
        pseudo = self.pseudo()
        if name in pseudo:
            return pseudo[name]
        return self._lookup(self.refs, name, where)

    def _sub(self, argument: Any, where: str) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        values = {key: str(self.resolve(item, where)) for key, item in variables.items()}

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in values:
                return values[name]
            if "." in name and name not in self.pseudo():
                logical_id, attribute = name.split(".", 1)
                return self._lookup(self.attributes, (logical_id, attribute), where)
            return self._ref(name, where)

        return _SUB.sub(one, str(text))

    def _lookup(self, table: Mapping[Any, str], key: Any, where: str) -> str:
        try:
            return table[key]
        except KeyError:
            raise AssemblyError(f"{self.stack} {where}: nothing local for {key!r}") from None
