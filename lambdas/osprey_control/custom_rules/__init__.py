"""Custom rules through AWS Lambda: the invoker the derive step hands the engine, and the per-rule lanes
(bulkheads) that keep one slow rule from holding up the others."""

from osprey_control.custom_rules.bulkhead import run_in_lanes
from osprey_control.custom_rules.invoker import DEFAULT_ALLOWED_PREFIX, LambdaRuleInvoker, RuleAllowList

__all__ = [
    "DEFAULT_ALLOWED_PREFIX",
    "LambdaRuleInvoker",
    "RuleAllowList",
    "run_in_lanes",
]
