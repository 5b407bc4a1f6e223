"""Resolve CloudFormation intrinsics in a synthesized template against resources that already exist.

``osprey local`` and the end-to-end tests create the template's resources themselves (moto's CloudFormation
cannot make a state machine executable, docs/design.md §9), so every ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``
and ``Fn::Select`` in a property (a function's environment, the state machine's definition) has to be replaced
by the physical name or ARN of the resource created for it. :class:`Resolver` does that, and names the JSON
path of anything it cannot resolve instead of leaving a token behind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__: list[str] = []

_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


class LocalTemplateError(ValueError):
    """A template value that cannot be resolved (unknown resource, attribute or intrinsic)."""


@dataclass
class Physical:
    """What a created resource answers to: ``Ref`` and its ``Fn::GetAtt`` attributes."""

    ref: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class Resolver:
    """Resolves intrinsics against ``resources`` (logical id → :class:`Physical`) and the pseudo parameters."""

    region: str
    account: str
    stack_name: str
    resources: dict[str, Physical] = field(default_factory=dict)
    partition: str = "aws"

    def pseudo(self) -> Mapping[str, str]:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
            "AWS::StackId": (
                f"arn:{self.partition}:cloudformation:{self.region}:{self.account}:stack/{self.stack_name}/local"
            ),
        }

    def ref(self, name: str, path: str) -> str:
        pseudo = self.pseudo()
        if name in pseudo:
            return pseudo[name]
        if name not in self.resources:
            raise LocalTemplateError(f"{path}: Ref {name!r} names no resource created so far")
        return self.resources[name].ref

    def get_att(self, logical_id: str, attribute: str, path: str) -> str:
        physical = self.resources.get(logical_id)
        if physical is None:
            raise LocalTemplateError(f"{path}: Fn::GetAtt names {logical_id!r}, which was not created")
        if attribute not in physical.attributes:
            known = ", ".join(sorted(physical.attributes)) or "none"
            raise LocalTemplateError(
                f"{path}: Fn::GetAtt {logical_id}.{attribute} is not known (attributes: {known})"
            )
        return physical.attributes[attribute]

    def _sub(self, text: str, variables: Mapping[str, str], path: str) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return variables[name]
            if "." in name and name.split(".", 1)[0] in self.resources:
                logical_id, attribute = name.split(".", 1)
                return self.get_att(logical_id, attribute, path)
            return self.ref(name, path)

        # "${!Literal}" is CloudFormation's escape for a literal "${Literal}".
        return _SUB_VARIABLE.sub(replace, text).replace("${!", "${")

    def resolve(self, value: Any, path: str = "$") -> Any:
        """``value`` with every intrinsic replaced; plain values are returned as they are."""
        if isinstance(value, list):
            return [self.resolve(item, f"{path}[{index}]") for index, item in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            [(key, argument)] = value.items()
            where = f"{path}.{key}"
            if key == "Ref":
                return self.ref(str(argument), where)
            if key == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.get_att(str(logical_id), str(attribute), where)
            if key == "Fn::Join":
                separator, items = argument
                return str(separator).join(str(self.resolve(item, where)) for item in items)
            if key == "Fn::Sub":
                if isinstance(argument, str):
                    return self._sub(argument, {}, where)
                text, variables = argument
                resolved = {name: str(self.resolve(item, where)) for name, item in variables.items()}
                return self._sub(str(text), resolved, where)
            if key == "Fn::Select":
                index, items = argument
                return self.resolve(self.resolve(items, where)[int(index)], where)
            if key.startswith("Fn::") or key == "Condition":
                raise LocalTemplateError(f"{where}: intrinsic {key} is not supported by osprey local")
        return {key: self.resolve(item, f"{path}.{key}") for key, item in value.items()}
