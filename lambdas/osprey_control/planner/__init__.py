"""The parallelism planner: a cost model of one transformer training step under tensor (tp), pipeline (pp)
and data (dp) parallelism, a search over plans, and re-planning when the measured cluster changes.

Pure Python with no AWS import, so the CLI, the SDK runtime and a plan Lambda run the same code.
See docs/planner.md for the model, its calibration and the validation against published figures.
"""

from osprey_control.catalog import GPUS, GpuSpec
from osprey_control.planner.costmodel import DEFAULT_EFFICIENCY, Efficiency, evaluate, stage_speeds
from osprey_control.planner.hardware import INSTANCE_TYPES, Cluster, InstanceSpec, cluster
from osprey_control.planner.model import ModelSpec, OptimizerSharding, Precision, Recompute
from osprey_control.planner.plan import Evaluation, Plan, PlanError, check_plan
from osprey_control.planner.record import (
    PlanRecordError,
    plan_from_record,
    plan_id,
    plan_record,
    record_for_decision,
    record_from_item,
    record_item,
)
from osprey_control.planner.replan import (
    CurrentPlan,
    Measurement,
    ReplanDecision,
    interval_from_env,
    replan,
)
from osprey_control.planner.request import (
    PlanRequest,
    PlanRequestError,
    build_request,
    request_from_item,
)
from osprey_control.planner.search import SearchOptions, SearchResult, search

__all__ = [
    "DEFAULT_EFFICIENCY",
    "GPUS",
    "INSTANCE_TYPES",
    "Cluster",
    "CurrentPlan",
    "Efficiency",
    "Evaluation",
    "GpuSpec",
    "InstanceSpec",
    "Measurement",
    "ModelSpec",
    "OptimizerSharding",
    "Plan",
    "PlanError",
    "PlanRecordError",
    "PlanRequest",
    "PlanRequestError",
    "Precision",
    "Recompute",
    "ReplanDecision",
    "SearchOptions",
    "SearchResult",
    "build_request",
    "check_plan",
    "cluster",
    "evaluate",
    "interval_from_env",
    "plan_from_record",
    "plan_id",
    "plan_record",
    "record_for_decision",
    "record_from_item",
    "record_item",
    "replan",
    "request_from_item",
    "search",
    "stage_speeds",
]
