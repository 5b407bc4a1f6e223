"""The derivation engine (docs/design.md §4): pure Python, no AWS import.

>>> from osprey_control.derivation import compile_policy, derive, JobMetrics, NodeMetrics
>>> decision = derive(compile_policy(policy), JobMetrics("j1", [NodeMetrics("i-1", {"gpu_utilization": 95})]), 50)
"""

from osprey_control.derivation.custom import (
    EVENT_VERSION,
    CustomRuleCall,
    CustomRuleError,
    CustomRuleInvoker,
    FailureReason,
    build_event,
    parse_answer,
)
from osprey_control.derivation.engine import (
    CompiledPolicy,
    Decision,
    PolicyLookup,
    Reason,
    RuleExplanation,
    compile_policy,
    derive,
)
from osprey_control.derivation.inputs import JobMetrics, NodeMetrics, mean_of_gpus
from osprey_control.derivation.job_signals import (
    AllocationInterval,
    ProgressReport,
    attained_service_gpu_hours,
    held_seconds,
    job_level_values,
    remaining_time_s,
)
from osprey_control.derivation.metrics_file import MetricsFileError, parse_metrics_document, read_metrics_file
from osprey_control.derivation.replay import (
    INPUTS_KEY,
    RecordedAnswers,
    ReplayedDecision,
    metrics_from_inputs,
    replay_job,
    summarize_inputs,
)
from osprey_control.derivation.reservation import (
    RESERVATION_NOTE,
    PoolJob,
    PoolSettings,
    Reservation,
    ReservationRole,
    plan_reservations,
    pool_settings,
    reservation_of,
)

__all__ = [
    "EVENT_VERSION",
    "INPUTS_KEY",
    "RESERVATION_NOTE",
    "AllocationInterval",
    "CompiledPolicy",
    "CustomRuleCall",
    "CustomRuleError",
    "CustomRuleInvoker",
    "Decision",
    "FailureReason",
    "JobMetrics",
    "MetricsFileError",
    "NodeMetrics",
    "PolicyLookup",
    "PoolJob",
    "PoolSettings",
    "ProgressReport",
    "Reason",
    "RecordedAnswers",
    "ReplayedDecision",
    "Reservation",
    "ReservationRole",
    "RuleExplanation",
    "attained_service_gpu_hours",
    "build_event",
    "compile_policy",
    "derive",
    "held_seconds",
    "job_level_values",
    "mean_of_gpus",
    "metrics_from_inputs",
    "parse_answer",
    "parse_metrics_document",
    "plan_reservations",
    "pool_settings",
    "read_metrics_file",
    "remaining_time_s",
    "replay_job",
    "reservation_of",
    "summarize_inputs",
]
