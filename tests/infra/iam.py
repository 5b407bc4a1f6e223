"""Reading a synthesized template's IAM grants per Osprey function, and deciding whether a DynamoDB call is
among them (the least-privilege tests' small IAM evaluator: actions, the table or an index, LeadingKeys)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DynamoCall",
    "actions",
    "allowed",
    "function_statements",
    "leading_keys",
    "resource_kind",
    "resources",
    "string_like",
]


def function_statements(template: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each ``osprey_handlers`` module's role's statements, by module (``lease``, ``gang_watch``, ...)."""
    resources = template["Resources"]
    role_of = {
        function["Properties"]["Handler"].split(".")[1]: function["Properties"]["Role"]["Fn::GetAtt"][0]
        for function in resources.values()
        if function["Type"] == "AWS::Lambda::Function"
        and str(function["Properties"].get("Handler", "")).startswith("osprey_handlers.")
    }
    statements: dict[str, list[dict[str, Any]]] = {module: [] for module in role_of}
    for policy in resources.values():
        if policy["Type"] != "AWS::IAM::Policy":
            continue
        roles = {role["Ref"] for role in policy["Properties"]["Roles"]}
        for module, role in role_of.items():
            if role in roles:
                statements[module] += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def actions(statement: dict[str, Any]) -> set[str]:
    found = statement["Action"]
    return {found} if isinstance(found, str) else set(found)


def resources(statement: dict[str, Any]) -> list[Any]:
    found = statement["Resource"]
    return found if isinstance(found, list) else [found]


def resource_kind(resource: Any) -> str:
    """``table``, ``index/<name>`` (or ``index/*``) for a registry-table resource; its JSON otherwise."""
    if isinstance(resource, dict) and "Fn::GetAtt" in resource and "Table" in resource["Fn::GetAtt"][0]:
        return "table"
    if isinstance(resource, dict) and "Fn::Join" in resource:
        parts = resource["Fn::Join"][1]
        head, tail = parts[0], parts[-1]
        if isinstance(head, dict) and "Table" in json.dumps(head) and str(tail).startswith("/index/"):
            return "index/" + str(tail).removeprefix("/index/")
    return json.dumps(resource, sort_keys=True)


@dataclass(frozen=True)
class DynamoCall:
    """One IAM check a DynamoDB request makes: ``action`` on ``resource`` (``table`` or ``index/<name>``),
    with the item's partition key when it has one."""

    action: str
    resource: str
    partition_key: str | None = None


def string_like(pattern: str, value: str) -> bool:
    """IAM's StringLike: ``*`` matches any run of characters, ``?`` any one; nothing else is special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


def leading_keys(statement: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The statement's ``dynamodb:LeadingKeys`` condition: its operator and values (None when it has none)."""
    for operator, values in statement.get("Condition", {}).items():
        if "dynamodb:LeadingKeys" in values:
            found = values["dynamodb:LeadingKeys"]
            return operator, [found] if isinstance(found, str) else list(found)
    return None


def _keys_allow(statement: dict[str, Any], partition_key: str | None) -> bool:
    condition = leading_keys(statement)
    if condition is None:
        return True
    operator, values = condition
    if partition_key is None:  # a request with no partition key: ForAllValues over nothing holds
        return operator.startswith("ForAllValues:")
    if operator.endswith("StringLike"):
        return any(string_like(value, partition_key) for value in values)
    if operator.endswith("StringEquals"):
        return partition_key in values
    raise ValueError(f"LeadingKeys operator this evaluator does not know: {operator}")


def allowed(call: DynamoCall, statements: list[dict[str, Any]]) -> bool:
    for statement in statements:
        if statement["Effect"] != "Allow" or call.action not in actions(statement):
            continue
        kinds = {resource_kind(resource) for resource in resources(statement)}
        index_wildcard = call.resource.startswith("index/") and "index/*" in kinds
        if call.resource not in kinds and not index_wildcard:
            continue
        if not _keys_allow(statement, call.partition_key):
            continue
        return True
    return False
