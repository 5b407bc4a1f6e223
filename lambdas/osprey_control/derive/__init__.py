"""The derive step of a cycle: policies from SSM, custom rules through Lambda, the engine over a shard."""

from osprey_control.derive.invoker import DEFAULT_ALLOWED_PREFIX, LambdaRuleInvoker, RuleAllowList
from osprey_control.derive.policies import PolicySource, UnknownPolicyError
from osprey_control.derive.shard import DecisionStore, JobOutcome, ShardResult, derive_shard

__all__ = [
    "DEFAULT_ALLOWED_PREFIX",
    "DecisionStore",
    "JobOutcome",
    "LambdaRuleInvoker",
    "PolicySource",
    "RuleAllowList",
    "ShardResult",
    "UnknownPolicyError",
    "derive_shard",
]
