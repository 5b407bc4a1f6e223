"""The JSON Schema of a policy document, for editors (yaml-language-server) and ``osprey policy schema``."""

from __future__ import annotations

from typing import Any

from osprey_control.policy.errors import ALLOWED
from osprey_control.policy.model import PriorityDerivationPolicy

__all__ = ["policy_json_schema"]

SCHEMA_ID = "https://osprey.aws/schemas/priority-derivation-policy-v1.json"


def policy_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) for one ``PriorityDerivationPolicy`` document."""
    schema = PriorityDerivationPolicy.model_json_schema(by_alias=True, mode="validation")
    _describe(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Osprey PriorityDerivationPolicy",
        **{key: value for key, value in schema.items() if key != "title"},
    }


def _describe(node: Any) -> None:
    """Give every property the same 'allowed' text the validator prints, and drop generated titles."""
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name, prop in properties.items():
                if isinstance(prop, dict):
                    prop.pop("title", None)
                    if name in ALLOWED and "description" not in prop:
                        prop["description"] = ALLOWED[name]
        for value in node.values():
            _describe(value)
    elif isinstance(node, list):
        for item in node:
            _describe(item)
