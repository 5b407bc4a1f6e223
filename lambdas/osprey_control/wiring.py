"""The names that wire Osprey's parts together, in one place: the environment variables the CDK app sets on
each function and the handlers read, the SSM paths the app writes and the SDK and CLI read, the CloudWatch
metric names and dimensions one part publishes and another reads, and the tag, label and annotation keys the
SDK, the control plane and the apply role's IAM conditions agree on. Infra, handlers, SDK and runtime import
these; none spells them again. A name only one module uses stays in that module."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ALLOWED_RULE_PREFIX_VARIABLE",
    "APPLY_FAILURES_METRIC",
    "BACKEND_DIMENSION",
    "BATCH_JOB_EVENT",
    "BATCH_SERVICE_JOB_EVENT",
    "COLLECTION_LATENCY_METRIC",
    "CONFIG_PARAMETER",
    "CONFIG_PARAMETER_VARIABLE",
    "CONTAINER_INSIGHTS_DIMENSIONS",
    "CONTAINER_INSIGHTS_NAMESPACE",
    "CO_SCHEDULING_SUCCESS_RATE_METRIC",
    "CUSTOM_RULE_FAILURES_METRIC",
    "CWAGENT_DIMENSION",
    "CWAGENT_GPU_UTILIZATION_METRIC",
    "CWAGENT_MEMORY_TOTAL_METRIC",
    "CWAGENT_MEMORY_USED_METRIC",
    "CWAGENT_MEMORY_UTILIZATION_METRIC",
    "CWAGENT_NAMESPACE",
    "CYCLES_FAILED_METRIC",
    "CYCLES_SUCCEEDED_METRIC",
    "CYCLE_DURATION_METRIC",
    "CYCLE_SECONDS_VARIABLE",
    "DERIVATION_ERRORS_METRIC",
    "DERIVED_PRIORITY_ANNOTATION",
    "DERIVED_PRIORITY_METRIC",
    "DERIVED_PRIORITY_TAG",
    "EKS_CLUSTERS_VARIABLE",
    "EKS_INCLUDE_PODS_VARIABLE",
    "EKS_NAMESPACES_VARIABLE",
    "ENABLED_ENV",
    "ENABLED_KUBERNETES",
    "ENABLED_TAG",
    "ENVIRONMENT_PREFIX",
    "EVENTS_DROPPED_METRIC",
    "EVENT_SOURCES",
    "EVERY_N_CYCLES_VARIABLE",
    "FAILED_JOBS_METRIC",
    "FAILED_SHARDS_METRIC",
    "GANG_STATE_MACHINE_VARIABLE",
    "GANG_WAIT_METRIC",
    "GUARD_CYCLE_NOTE",
    "GUARD_EVALUATIONS_METRIC",
    "GUARD_FAILURES_METRIC",
    "GUARD_ORDER_NOTE",
    "GUARD_SIGNATURE_NOTE",
    "GUARD_STOOD_DOWN_METRIC",
    "HISTORY_RETENTION_VARIABLE",
    "INTERCONNECT_LATENCY_METRIC",
    "INVALID_POLICIES_METRIC",
    "JOBS_EVALUATED_METRIC",
    "JOB_DIMENSION",
    "KIND_DIMENSION",
    "KUBERNETES_PREFIX",
    "LEASE_SECONDS_VARIABLE",
    "METRICS_MISSING_METRIC",
    "METRICS_NAMESPACE",
    "METRICS_NAMESPACE_VARIABLE",
    "PER_JOB_METRICS_VARIABLE",
    "PLAN_EVERY_VARIABLE",
    "PLAN_HYSTERESIS_VARIABLE",
    "PLAN_PLACEMENT_HYSTERESIS_VARIABLE",
    "PLAN_WINDOW_VARIABLE",
    "POD_GPU_MEMORY_UTILIZATION_METRIC",
    "POD_GPU_UTILIZATION_METRIC",
    "POLICY_DIMENSION",
    "POLICY_PREFIX",
    "POLICY_PREFIX_VARIABLE",
    "PRIORITIES_APPLIED_METRIC",
    "PRIORITY_CHANGE_METRIC",
    "REASON_DIMENSION",
    "REBALANCE_EVENT",
    "RECOGNISE_BY_ENVIRONMENT_VARIABLE",
    "REGISTRY_SHARDS_VARIABLE",
    "REMAINING_SECONDS_METRIC",
    "RUNTIME_DIMENSIONS",
    "RUNTIME_HOST_VARIABLE",
    "RUNTIME_JOB_ID_VARIABLE",
    "RUNTIME_POD_NAMESPACE_VARIABLE",
    "RUNTIME_POD_NAME_VARIABLE",
    "SAGEMAKER_DIMENSION",
    "SAGEMAKER_GPU_MEMORY_UTILIZATION_METRIC",
    "SAGEMAKER_GPU_UTILIZATION_METRIC",
    "SAGEMAKER_NAMESPACE",
    "SAGEMAKER_TRAINING_EVENT",
    "SLOWEST_NODE_INDEX_METRIC",
    "SLOWEST_NODE_SPEED_METRIC",
    "SLURM_ALLOW_SIGNING_KEY_VARIABLE",
    "SLURM_BRIDGE_FUNCTION_VARIABLE",
    "SLURM_CA_PEM_VARIABLE",
    "SLURM_CLUSTER_VARIABLE",
    "SLURM_INSECURE_HTTP_VARIABLE",
    "SLURM_INSTANCE_TAG_VARIABLE",
    "SLURM_MAX_RESPONSE_VARIABLE",
    "SLURM_PRIORITY_RANGE_VARIABLE",
    "SLURM_TOKEN_SECRET_VARIABLE",
    "SLURM_URL_VARIABLE",
    "SLURM_USER_VARIABLE",
    "SPOT_INTERRUPTION_EVENT",
    "STEP_TIME_METRIC",
    "TABLE_NAME_VARIABLE",
    "TAG_PREFIX",
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
HISTORY_RETENTION_VARIABLE = "OSPREY_HISTORY_RETENTION_DAYS"
RECOGNISE_BY_ENVIRONMENT_VARIABLE = "OSPREY_RECOGNISE_BY_ENVIRONMENT"
EVERY_N_CYCLES_VARIABLE = "OSPREY_METRICS_EVERY_N_CYCLES"
EKS_CLUSTERS_VARIABLE = "OSPREY_EKS_CLUSTERS"
EKS_INCLUDE_PODS_VARIABLE = "OSPREY_EKS_INCLUDE_PODS"
# Comma-separated namespaces EKS discovery lists (empty: all namespaces, with a cluster-wide binding).
EKS_NAMESPACES_VARIABLE = "OSPREY_EKS_NAMESPACES"
PLAN_HYSTERESIS_VARIABLE = "OSPREY_PLAN_HYSTERESIS"
PLAN_PLACEMENT_HYSTERESIS_VARIABLE = "OSPREY_PLAN_PLACEMENT_HYSTERESIS"
PLAN_WINDOW_VARIABLE = "OSPREY_PLAN_WINDOW_SECONDS"
PLAN_EVERY_VARIABLE = "OSPREY_PLAN_EVERY_SECONDS"
# The Slurm bridge (docs/slurm.md): slurmrestd's URL, the cluster's name, the JWT secret and its user, the
# priority range, the ParallelCluster tag that scopes the node -> instance lookup; the apply function names the
# bridge it invokes.
SLURM_URL_VARIABLE = "OSPREY_SLURM_URL"
SLURM_CLUSTER_VARIABLE = "OSPREY_SLURM_CLUSTER"
SLURM_TOKEN_SECRET_VARIABLE = "OSPREY_SLURM_TOKEN_SECRET"
SLURM_USER_VARIABLE = "OSPREY_SLURM_USER"
SLURM_PRIORITY_RANGE_VARIABLE = "OSPREY_SLURM_PRIORITY_RANGE"
SLURM_INSTANCE_TAG_VARIABLE = "OSPREY_SLURM_INSTANCE_CLUSTER_TAG"
SLURM_BRIDGE_FUNCTION_VARIABLE = "OSPREY_SLURM_BRIDGE_FUNCTION"
# How the bridge reaches slurmrestd (docs/slurm.md, Securing the bridge): plain http only when asked, the CA that
# signed slurmrestd's certificate, whether a signing-key secret is accepted, the largest answer read.
SLURM_INSECURE_HTTP_VARIABLE = "OSPREY_SLURM_INSECURE_HTTP"
SLURM_CA_PEM_VARIABLE = "OSPREY_SLURM_CA_PEM"
SLURM_ALLOW_SIGNING_KEY_VARIABLE = "OSPREY_SLURM_ALLOW_SIGNING_KEY"
SLURM_MAX_RESPONSE_VARIABLE = "OSPREY_SLURM_MAX_RESPONSE_BYTES"
# The deployment's config parameter (CONFIG_PARAMETER), which the apply step and the gang watch read each
# invocation for the shadow/enforce mode (osprey_control.steps.mode). Unset: enforce everywhere.
CONFIG_PARAMETER_VARIABLE = "OSPREY_CONFIG_PARAMETER"

# SSM: one parameter per policy under the prefix; the deployment's whereabouts for the SDK and CLI.
POLICY_PREFIX = "/osprey/policies"
CONFIG_PARAMETER = "/osprey/config"

# CloudWatch namespace of the runtime's and the control plane's EMF metrics (default; the deployment can set
# another with METRICS_NAMESPACE_VARIABLE).
METRICS_NAMESPACE = "/aws/osprey"

# The in-job runtime's environment (osprey.runtime reads it; osprey.eks and osprey.slurm set it; the contract's
# readers ignore it, osprey_control.contract.RUNTIME_ENVIRONMENT). METRICS_NAMESPACE_VARIABLE is read there too.
RUNTIME_JOB_ID_VARIABLE = "OSPREY_JOB_ID"
RUNTIME_HOST_VARIABLE = "OSPREY_HOST"
RUNTIME_POD_NAMESPACE_VARIABLE = "OSPREY_K8S_NAMESPACE"
RUNTIME_POD_NAME_VARIABLE = "OSPREY_K8S_POD_NAME"

# --- CloudWatch metric names and dimensions ---------------------------------------------------------------------

# The in-job runtime's series: osprey.runtime prints them as EMF (in METRICS_NAMESPACE) from the job's lead
# process; the collector (osprey_control.metrics.queries) and the plan step (osprey_control.steps.plan) query
# them. Every series has exactly RUNTIME_DIMENSIONS; their values per backend are each backend's
# ``DRIVER.runtime`` (osprey_control.backends.runtime_naming).
RUNTIME_DIMENSIONS = ("Backend", "JobId", "Host")
INTERCONNECT_LATENCY_METRIC = "InterconnectLatencyMicroseconds"
REMAINING_SECONDS_METRIC = "RemainingSeconds"
STEP_TIME_METRIC = "StepTimeSeconds"
SLOWEST_NODE_SPEED_METRIC = "SlowestNodeSpeed"
SLOWEST_NODE_INDEX_METRIC = "SlowestNodeIndex"

# The GPU series AWS publishes and the collector reads (osprey.local's simulated fleet publishes the same): the
# CloudWatch agent's per-instance rollup (as infra/agent/cloudwatch-agent-gpu.json configures it), SageMaker's
# per-host sums over the host's GPUs, Container Insights' per-pod values.
CWAGENT_NAMESPACE = "CWAgent"
CWAGENT_DIMENSION = "InstanceId"
CWAGENT_GPU_UTILIZATION_METRIC = "nvidia_smi_utilization_gpu"
CWAGENT_MEMORY_UTILIZATION_METRIC = "nvidia_smi_utilization_memory"
CWAGENT_MEMORY_USED_METRIC = "nvidia_smi_memory_used"
CWAGENT_MEMORY_TOTAL_METRIC = "nvidia_smi_memory_total"
SAGEMAKER_NAMESPACE = "/aws/sagemaker/TrainingJobs"
SAGEMAKER_DIMENSION = "Host"  # "<training job name>/algo-N"
SAGEMAKER_GPU_UTILIZATION_METRIC = "GPUUtilization"
SAGEMAKER_GPU_MEMORY_UTILIZATION_METRIC = "GPUMemoryUtilization"
CONTAINER_INSIGHTS_NAMESPACE = "ContainerInsights"
CONTAINER_INSIGHTS_DIMENSIONS = ("ClusterName", "Namespace", "PodName")
POD_GPU_UTILIZATION_METRIC = "pod_gpu_utilization"
POD_GPU_MEMORY_UTILIZATION_METRIC = "pod_gpu_memory_utilization"

# The control plane's own EMF series (METRICS_NAMESPACE, docs/design.md §8): osprey_control.telemetry, the
# handlers, the gang watch and ingest publish them; infra's dashboard and alarms graph them and `osprey cost`
# prices them.
DERIVED_PRIORITY_METRIC = "DerivedPriority"
PRIORITY_CHANGE_METRIC = "PriorityChange"
JOBS_EVALUATED_METRIC = "JobsEvaluated"
METRICS_MISSING_METRIC = "MetricsMissing"
CUSTOM_RULE_FAILURES_METRIC = "CustomRuleFailures"
DERIVATION_ERRORS_METRIC = "DerivationErrors"
COLLECTION_LATENCY_METRIC = "CollectionLatencyMs"
PRIORITIES_APPLIED_METRIC = "PrioritiesApplied"
APPLY_FAILURES_METRIC = "ApplyFailures"
CYCLE_DURATION_METRIC = "CycleDurationMs"
CYCLES_SUCCEEDED_METRIC = "CyclesSucceeded"
CYCLES_FAILED_METRIC = "CyclesFailed"
FAILED_SHARDS_METRIC = "FailedShards"
FAILED_JOBS_METRIC = "FailedJobs"
CO_SCHEDULING_SUCCESS_RATE_METRIC = "CoSchedulingSuccessRate"
GANG_WAIT_METRIC = "GangWaitSeconds"
EVENTS_DROPPED_METRIC = "EventsDropped"
# Deployed policies whose stored value is refused: the total (0 included) and 1 per policy (Policy dimension).
INVALID_POLICIES_METRIC = "InvalidPolicies"
# The guard, per cycle and backend (osprey_control.metrics.guard): one GuardStoodDown value per guarded pool (1 it
# stood down to the native order, 0 it chose a policy order), the pools guarded and the pools whose guard failed.
GUARD_STOOD_DOWN_METRIC = "GuardStoodDown"
GUARD_EVALUATIONS_METRIC = "GuardEvaluations"
GUARD_FAILURES_METRIC = "GuardFailures"
# Their dimensions, which the dashboard's SEARCH expressions and the custom-rule alarm's query name as well.
POLICY_DIMENSION = "Policy"
BACKEND_DIMENSION = "Backend"  # the guard's metrics: a Backend value, never a pool (bounded: one per backend)
# The decision notes (``inputs.notes``) beside the guard's verdict text (osprey_control.guard.GUARD_NOTE) that
# the collect step writes and reads back next cycle, and ``osprey report`` and the CLI read: the order a pool
# got, the instant (ISO 8601) of the cycle that chose it, and the pool's signature then (the verdict stands
# while it is unchanged: osprey_control.metrics.guard_record).
GUARD_ORDER_NOTE = "guard-order"
GUARD_CYCLE_NOTE = "guard-cycle"
GUARD_SIGNATURE_NOTE = "guard-signature"
JOB_DIMENSION = "JobId"  # per-job metrics only: the registry's job key
REASON_DIMENSION = "Reason"
KIND_DIMENSION = "Kind"

# --- Tag, label and annotation keys -----------------------------------------------------------------------------

# The job contract's forms (osprey_control.contract builds every key of the osprey block from these prefixes):
# environment variables, AWS tags (and the Slurm marker), Kubernetes labels and annotations.
ENVIRONMENT_PREFIX = "OSPREY_"
TAG_PREFIX = "osprey:"
KUBERNETES_PREFIX = "osprey.aws/"
# The opt-in, in each form: the SDK writes it; ingest and discovery recognise a job by it; the appliers and gang
# adapters write only jobs that carry it; the apply role's IAM conditions require the tag.
ENABLED_ENV = "OSPREY_ENABLED"
ENABLED_TAG = "osprey:enabled"
ENABLED_KUBERNETES = "osprey.aws/enabled"
# Where Osprey records a priority no scheduler field takes: the SageMaker applier writes the tag (the only tag
# key the apply role may add), the EKS applier the annotation (EKS discovery reads it back); the contract's
# readers ignore both.
DERIVED_PRIORITY_TAG = "osprey:derived-priority"
DERIVED_PRIORITY_ANNOTATION = "osprey.aws/derived-priority"

# --- EventBridge events ---------------------------------------------------------------------------------------

# The events the CDK app's rules route to the ingest queue and ingest reads (detail-type -> the source
# EventBridge stamps on it; the rules match both). The job events' backends are ingest's routing table.
SAGEMAKER_TRAINING_EVENT = "SageMaker Training Job State Change"
BATCH_JOB_EVENT = "Batch Job State Change"
BATCH_SERVICE_JOB_EVENT = "Batch Service Job State Change"
SPOT_INTERRUPTION_EVENT = "EC2 Spot Instance Interruption Warning"
REBALANCE_EVENT = "EC2 Instance Rebalance Recommendation"
EVENT_SOURCES: Mapping[str, str] = {
    SAGEMAKER_TRAINING_EVENT: "aws.sagemaker",
    BATCH_JOB_EVENT: "aws.batch",
    BATCH_SERVICE_JOB_EVENT: "aws.batch",
    SPOT_INTERRUPTION_EVENT: "aws.ec2",
    REBALANCE_EVENT: "aws.ec2",
}
