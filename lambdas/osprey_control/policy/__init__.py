"""Policy documents: the model, safe loading and the JSON Schema.

>>> from osprey_control.policy import load_policies
>>> policies = load_policies(["policies/training-policy.yaml"])
"""

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
    Metadata,
    Metric,
    PolicySpec,
    PriorityDerivationPolicy,
    Scaling,
)
from osprey_control.policy.rule_access import DEFAULT_ALLOWED_PREFIX, RuleAllowList, rule_arn_issues
from osprey_control.policy.schema import policy_json_schema

__all__ = [
    "API_VERSION",
    "DEFAULT_ALLOWED_PREFIX",
    "KIND",
    "MAX_FILE_BYTES",
    "METRIC_DEFAULT_RANGES",
    "Aggregation",
    "BuiltinRule",
    "CoScheduling",
    "CustomRule",
    "CustomRuleEntry",
    "GangFallback",
    "LoadedPolicy",
    "Metadata",
    "Metric",
    "PolicyIssue",
    "PolicySet",
    "PolicySpec",
    "PolicyValidationError",
    "PriorityDerivationPolicy",
    "RuleAllowList",
    "Scaling",
    "load_policies",
    "load_policy_files",
    "load_policy_text",
    "policy_from_mapping",
    "policy_json_schema",
    "rule_arn_issues",
]
