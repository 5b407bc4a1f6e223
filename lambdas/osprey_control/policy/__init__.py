"""Policy documents: the model, safe loading and the JSON Schema.

>>> from osprey_control.policy import load_policies
>>> policies = load_policies(["policies/training-policy.yaml"])
"""

import importlib
from typing import TYPE_CHECKING

from osprey_control.policy.loader import (
    MAX_FILE_BYTES,
    LoadedPolicy,
    PolicyIssue,
    PolicySet,
    PolicyValidationError,
    load_policies,
    load_policy_files,
    load_policy_text,
    policy_from_mapping,
)
from osprey_control.policy.model import (
    API_VERSION,
    KIND,
    METRIC_DEFAULT_RANGES,
    Aggregation,
    BuiltinRule,
    CoScheduling,
    CustomRule,
    CustomRuleEntry,
    GangFallback,
    GuardSpec,
    Metadata,
    Metric,
    PolicySpec,
    PriorityDerivationPolicy,
    ReservationSettings,
    Scaling,
)
from osprey_control.policy.rule_access import DEFAULT_ALLOWED_PREFIX, RuleAllowList, rule_arn_issues
from osprey_control.policy.schema import policy_json_schema
from osprey_control.policy.shipped import DEFAULT_POLICY_NAME, shipped_policy_dir, shipped_policy_file
from osprey_control.policy.stored import (
    InvalidPolicy,
    InvalidPolicyError,
    StoredPolicyError,
    json_nesting_error,
    parameter_name,
    parameter_tier,
    parse_stored_policy,
    policy_parameter_value,
)
from osprey_control.policy.yaml_errors import UnsafeYamlError

if TYPE_CHECKING:  # PyYAML only where a document is read: no handler imports it
    from osprey_control.policy.safe_yaml import read_documents

__all__ = [
    "API_VERSION",
    "DEFAULT_ALLOWED_PREFIX",
    "DEFAULT_POLICY_NAME",
    "KIND",
    "MAX_FILE_BYTES",
    "METRIC_DEFAULT_RANGES",
    "Aggregation",
    "BuiltinRule",
    "CoScheduling",
    "CustomRule",
    "CustomRuleEntry",
    "GangFallback",
    "GuardSpec",
    "InvalidPolicy",
    "InvalidPolicyError",
    "LoadedPolicy",
    "Metadata",
    "Metric",
    "PolicyIssue",
    "PolicySet",
    "PolicySpec",
    "PolicyValidationError",
    "PriorityDerivationPolicy",
    "ReservationSettings",
    "RuleAllowList",
    "Scaling",
    "StoredPolicyError",
    "UnsafeYamlError",
    "json_nesting_error",
    "load_policies",
    "load_policy_files",
    "load_policy_text",
    "parameter_name",
    "parameter_tier",
    "parse_stored_policy",
    "policy_from_mapping",
    "policy_json_schema",
    "policy_parameter_value",
    "read_documents",
    "rule_arn_issues",
    "shipped_policy_dir",
    "shipped_policy_file",
]


def __getattr__(name: str) -> object:
    # read_documents needs PyYAML, which the Lambda functions do not ship: loaded on first use only.
    if name != "read_documents":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module("osprey_control.policy.safe_yaml").read_documents
    globals()[name] = value
    return value
