"""The names that wire Osprey's parts together, in one place: the environment variables the CDK app sets on
each function and the handlers read, the SSM paths the app writes and the SDK and CLI read, and the metrics
namespace. Infra, handlers and SDK import these; none spells them again."""

from __future__ import annotations

__all__ = [
    "ALLOWED_RULE_PREFIX_VARIABLE",
    "CONFIG_PARAMETER",
    "CYCLE_SECONDS_VARIABLE",
    "GANG_STATE_MACHINE_VARIABLE",
    "LEASE_SECONDS_VARIABLE",
    "METRICS_NAMESPACE",
    "METRICS_NAMESPACE_VARIABLE",
    "PER_JOB_METRICS_VARIABLE",
    "POLICY_PREFIX",
    "POLICY_PREFIX_VARIABLE",
    "REGISTRY_SHARDS_VARIABLE",
    "TABLE_NAME_VARIABLE",
]

# Environment of the control plane's functions (set by infra/osprey_infra, read by osprey_handlers).
TABLE_NAME_VARIABLE = "OSPREY_TABLE_NAME"
REGISTRY_SHARDS_VARIABLE = "OSPREY_REGISTRY_SHARDS"
METRICS_NAMESPACE_VARIABLE = "OSPREY_METRICS_NAMESPACE"
POLICY_PREFIX_VARIABLE = "OSPREY_POLICY_PREFIX"
ALLOWED_RULE_PREFIX_VARIABLE = "OSPREY_ALLOWED_RULE_PREFIX"
PER_JOB_METRICS_VARIABLE = "OSPREY_PER_JOB_METRICS"
LEASE_SECONDS_VARIABLE = "OSPREY_LEASE_SECONDS"
CYCLE_SECONDS_VARIABLE = "OSPREY_CYCLE_SECONDS"
GANG_STATE_MACHINE_VARIABLE = "OSPREY_GANG_STATE_MACHINE_ARN"

# SSM: one parameter per policy under the prefix; the deployment's whereabouts for the SDK and CLI.
POLICY_PREFIX = "/osprey/policies"
CONFIG_PARAMETER = "/osprey/config"

# CloudWatch namespace of the runtime's and the control plane's EMF metrics (default; the deployment can set
# another with METRICS_NAMESPACE_VARIABLE).
METRICS_NAMESPACE = "/aws/osprey"
