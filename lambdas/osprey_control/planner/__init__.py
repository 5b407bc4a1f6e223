"""The parallelism planner: a cost model of one transformer training step under tensor (tp), pipeline (pp)
and data (dp) parallelism, a search over plans, and re-planning when the measured cluster changes.

Pure Python with no AWS import, so the CLI, the SDK runtime and a plan Lambda run the same code.
See docs/planner.md for the model, its calibration and the validation against published figures.
"""

from osprey_control.catalog import GPUS, GpuSpec
from osprey_control.planner.calibrate import Calibration, fit, measured_from_rows
from osprey_control.planner.config import ConfigProblem, PlanConfig, PlanConfigError, normalise_keys, resolve
from osprey_control.planner.costmodel import DEFAULT_EFFICIENCY, Efficiency, evaluate, stage_speeds
from osprey_control.planner.diagnose import no_plan_reason
from osprey_control.planner.hardware import INSTANCE_TYPES, Cluster, InstanceSpec, cluster
from osprey_control.planner.history import MeasuredStep, history_item, with_measurement
from osprey_control.planner.measure import DEFAULT_TOLERANCE, Observed, measure, settled
from osprey_control.planner.model import ModelSpec, OptimizerSharding, Precision, Recompute
from osprey_control.planner.order import out_of_rank_order
from osprey_control.planner.placement import node_speeds_from_rank_times
from osprey_control.planner.plan import Evaluation, Plan, PlanError, check_plan
from osprey_control.planner.record import (
    CURRENT_PLAN_FINE,
    PlanRecordError,
    plan_from_record,
    plan_id,
    plan_record,
    record_for_decision,
    record_from_item,
    record_item,
    withdrawal_for,
)
from osprey_control.planner.replan import (
    DEFAULT_HYSTERESIS,
    DEFAULT_INTERVAL,
    DEFAULT_PLACEMENT_HYSTERESIS,
    CurrentPlan,
    Measurement,
    ReplanDecision,
    interval_from_env,
    replan,
    validate_threshold,
)
from osprey_control.planner.request import (
    CLUSTER_KEYS,
    MODEL_KEYS,
    PlanRequest,
    PlanRequestError,
    RequestProblem,
    build_request,
    plan_key,
    request_from_item,
    stage_nodes_of,
)
from osprey_control.planner.search import (
    Knobs,
    SearchOptions,
    SearchResult,
    search,
    search_exhaustive,
    variants,
)
from osprey_control.planner.speeds import critical_stage_speed, node_speeds_json, rank_order_nodes

__all__ = [
    "CLUSTER_KEYS",
    "CURRENT_PLAN_FINE",
    "DEFAULT_EFFICIENCY",
    "DEFAULT_HYSTERESIS",
    "DEFAULT_INTERVAL",
    "DEFAULT_PLACEMENT_HYSTERESIS",
    "DEFAULT_TOLERANCE",
    "GPUS",
    "INSTANCE_TYPES",
    "MODEL_KEYS",
    "Calibration",
    "Cluster",
    "ConfigProblem",
    "CurrentPlan",
    "Efficiency",
    "Evaluation",
    "GpuSpec",
    "InstanceSpec",
    "Knobs",
    "MeasuredStep",
    "Measurement",
    "ModelSpec",
    "Observed",
    "OptimizerSharding",
    "Plan",
    "PlanConfig",
    "PlanConfigError",
    "PlanError",
    "PlanRecordError",
    "PlanRequest",
    "PlanRequestError",
    "Precision",
    "Recompute",
    "ReplanDecision",
    "RequestProblem",
    "SearchOptions",
    "SearchResult",
    "build_request",
    "check_plan",
    "cluster",
    "critical_stage_speed",
    "evaluate",
    "fit",
    "history_item",
    "interval_from_env",
    "measure",
    "measured_from_rows",
    "no_plan_reason",
    "node_speeds_from_rank_times",
    "node_speeds_json",
    "normalise_keys",
    "out_of_rank_order",
    "plan_from_record",
    "plan_id",
    "plan_key",
    "plan_record",
    "rank_order_nodes",
    "record_for_decision",
    "record_from_item",
    "record_item",
    "replan",
    "request_from_item",
    "resolve",
    "search",
    "search_exhaustive",
    "settled",
    "stage_nodes_of",
    "stage_speeds",
    "validate_threshold",
    "variants",
    "with_measurement",
    "withdrawal_for",
]
