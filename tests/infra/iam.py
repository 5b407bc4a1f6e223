"""Reading a synthesized template's IAM grants per Osprey function, and deciding whether a DynamoDB call is
among them (the least-privilege tests' small IAM evaluator: actions, the table or an index, LeadingKeys)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DynamoCall", "actions", "allowed", "function_statements", "resource_kind", "resources"]


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


def allowed(call: DynamoCall, statements: list[dict[str, Any]]) -> bool:
    for statement in statements:
        if statement["Effect"] != "Allow" or call.action not in actions(statement):
            continue
        kinds = {resource_kind(resource) for resource in resources(statement)}
        index_wildcard = call.resource.startswith("index/") and "index/*" in kinds
        if call.resource not in kinds and not index_wildcard:
            continue
        condition = statement.get("Condition", {})
        leading = condition.get("ForAllValues:StringEquals", {}).get("dynamodb:LeadingKeys")
        if leading is not None and call.partition_key not in leading:
            continue
        return True
    return False
