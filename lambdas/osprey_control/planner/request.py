"""The plan *request*: how a job asks the control plane's plan step to re-plan it.

One registry item per job, under its own prefix (the plan record is ``PLAN#<backend>#<native id>``):

    pk = PLANREQ#<backend>#<native id>, sk = PLANREQ
    version      "1"
    config       JSON string: the planner keys of ``osprey plan`` (``layers hidden heads seq vocab global-batch``,
                 ``gpus``, ``instance-type`` and/or ``gpu``, ``network-gbits`` ..., and ``max-virtual`` when the
                 job limits the search; docs/planner.md; :mod:`.request_keys`)
    current      JSON string: the plan the job runs now, ``{"tp", "pp", "dp", "micro_batch", "virtual"}``
    current_key  "tp,pp,dp,micro_batch,virtual", plus ``|`` and the node order when the job runs the plan's
                 nodes out of rank order (for conditional updates by the job)
    current_stage_nodes  JSON string, optional: the node indices per pipeline stage the job runs (it applied a
                 plan record's ``stage_nodes``); absent: Megatron's rank order
    since_step   N: the training step at which ``current`` was adopted
    step         N: the job's latest reported training step (``osprey.adjust_parallelism`` updates it)
    interval     N: the job's ``OSPREY_INTERVAL`` (steps between its decision points)
    created_at, updated_at   "2026-01-01T00:00:00Z"
    planned_at, plan_reason  written by the plan step: when it last planned the job, and replan's reason
    measured     written by the plan step: the step time it measured on each plan the job ran
                 (:mod:`osprey_control.planner.history`)
    node_speeds  JSON string, optional: every node's speed, with the latest progress (:mod:`.speeds`)

:func:`build_request` checks a job's inputs and returns the item; every problem names its field (``model.layers``,
``cluster.instance_type``, ``current.tp``, ``step``). :func:`request_from_item` reads an item back, raising
:class:`PlanRequestError` naming the attribute when it is broken. Pure Python, no AWS import.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from osprey_control.planner.config import PlanConfigError as _PlanConfigError
from osprey_control.planner.config import normalise_keys, resolve
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.history import MeasuredStep, history_from_item
from osprey_control.planner.model import ModelSpec
from osprey_control.planner.order import plan_key, stage_nodes_of
from osprey_control.planner.plan import Plan, PlanError, check_plan
from osprey_control.planner.replan import CurrentPlan
from osprey_control.planner.request_keys import (
    CLUSTER_KEYS,
    MODEL_KEYS,
    RequestProblem,
    field_of,
    model_values,
    section,
)
from osprey_control.planner.search import SearchOptions
from osprey_control.planner.speeds import NODE_SPEEDS_ATTRIBUTE, node_speeds_of
from osprey_control.registry import PLAN_REQUEST_PREFIX, PLAN_REQUEST_SK, is_job_pk, item_pk, key_from_pk

__all__ = [
    "CLUSTER_KEYS",
    "MODEL_KEYS",
    "PlanRequest",
    "PlanRequestError",
    "RequestProblem",
    "build_request",
    "plan_key",
    "request_from_item",
    "stage_nodes_of",
]

REQUEST_SK = PLAN_REQUEST_SK
REQUEST_VERSION = "1"
_DEGREES = ("tp", "pp", "dp", "micro_batch", "virtual")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class PlanRequestError(ValueError):
    """Invalid plan request inputs or a broken request item; ``errors`` lists every problem by field."""

    def __init__(self, errors: list[RequestProblem]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """A validated request: what :func:`osprey_control.planner.replan.replan` needs for one job."""

    job_id: str
    model: ModelSpec
    cluster: Cluster
    options: SearchOptions
    current: Plan
    since_step: int
    step: int
    interval: int
    config: dict[str, Any]
    created_at: str
    updated_at: str
    planned_at: str | None = None  # when the plan step last planned this job (it writes the attribute)
    measured: tuple[MeasuredStep, ...] = ()  # the plans the job ran, as the plan step measured them
    current_stage_nodes: tuple[tuple[int, ...], ...] = ()  # the node order the job runs; () = rank order
    node_speeds: tuple[float, ...] = ()  # every node's speed with the latest progress (planner.speeds)

    def current_plan(self) -> CurrentPlan:
        return CurrentPlan(
            model=self.model,
            cluster=self.cluster,
            plan=self.current,
            since_step=self.since_step,
            stage_nodes=self.current_stage_nodes,
        )


def _timestamp(moment: datetime | None) -> str:
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime(_TIME_FORMAT)


def _plan(current: Plan | Mapping[str, Any] | Any, errors: list[RequestProblem]) -> Plan | None:
    if isinstance(current, Plan):
        return current
    if not isinstance(current, Mapping):
        errors.append(RequestProblem("current", "must be a Plan or a mapping with tp, pp, dp, micro_batch"))
        return None
    values: dict[str, int] = {}
    for name in _DEGREES:
        value = current.get(name, 1 if name == "virtual" else None)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(RequestProblem(f"current.{name}", f"must be a positive integer, got {value!r}"))
        else:
            values[name] = value
    unknown = sorted(set(map(str, current)) - set(_DEGREES))
    if unknown:
        errors.append(
            RequestProblem(f"current.{unknown[0]}", f"unknown field; allowed: {', '.join(_DEGREES)}")
        )
    return Plan(**values) if len(values) == len(_DEGREES) and not unknown else None


def _step(name: str, value: Any, errors: list[RequestProblem], *, positive: bool = False) -> int:
    low = 1 if positive else 0
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a positive integer" if positive else "a non-negative integer"
        errors.append(RequestProblem(name, f"must be {kind} number of training steps, got {value!r}"))
        return low
    return value


def _resolve(
    config: dict[str, Any], current: Plan | None, errors: list[RequestProblem]
) -> tuple[ModelSpec, Cluster, SearchOptions] | None:
    try:
        resolved = resolve(config)
    except _PlanConfigError as problems:
        for problem in problems.errors:
            errors.append(RequestProblem(field_of(problem.key), problem.message))
        return None
    if current is not None:
        try:
            check_plan(resolved.model, resolved.cluster, current)
        except PlanError as error:
            errors.append(
                RequestProblem("current", f"{error} (the plan the job runs now must fit its cluster)")
            )
    return resolved.model, resolved.cluster, resolved.options


def build_request(
    job_pk: str,
    *,
    model: ModelSpec | Mapping[str, Any],
    cluster: Mapping[str, Any] | str,
    current: Plan | Mapping[str, Any],
    gpus: int | None = None,
    step: int = 0,
    since_step: int | None = None,
    interval: int = 60,
    max_virtual: int | None = None,
    now: datetime | None = None,
) -> dict[str, dict[str, str]]:
    """The request item (DynamoDB attribute values) for the job partition ``job_pk``.

    ``cluster`` is a mapping of :data:`CLUSTER_KEYS` (``gpus``, ``instance_type`` or ``gpu`` ...) or just an
    instance-type preset name; ``gpus`` defaults to the current plan's ``tp * pp * dp``; ``max_virtual``: the
    most pipeline chunks per GPU the job's training code runs (1: no interleaved schedule; default: the
    search's 8). Raises :class:`PlanRequestError` listing every problem by field."""
    errors: list[RequestProblem] = []
    if not is_job_pk(job_pk):
        errors.append(RequestProblem("job", f"must be a job key <backend>#<native id>, got {job_pk!r}"))
    plan = _plan(current, errors)
    model_keys = model_values(model, errors)
    cluster_values: dict[str, Any] = (
        {"instance-type": cluster}
        if isinstance(cluster, str)
        else section("cluster", cluster, CLUSTER_KEYS, errors)
    )
    if gpus is not None:
        cluster_values["gpus"] = gpus
    elif "gpus" not in cluster_values and plan is not None:
        cluster_values["gpus"] = plan.tp * plan.pp * plan.dp
    step = _step("step", step, errors)
    since = _step("since_step", step if since_step is None else since_step, errors)
    if since > step:
        errors.append(RequestProblem("since_step", f"must not be after step ({step}), got {since}"))
    interval = _step("interval", interval, errors, positive=True)
    search_values = {} if max_virtual is None else {"max-virtual": max_virtual}
    config = {**model_keys, **cluster_values, **search_values}
    resolved = _resolve(config, plan, errors)
    if resolved is not None and plan is not None and max_virtual is not None:
        limit = resolved[2].max_virtual
        config["max-virtual"] = limit  # as checked: an int, whatever the caller's spelling
        if plan.virtual > limit:
            # Checked when the job registers only: a job that later reports such a plan is still planned.
            errors.append(
                RequestProblem(
                    "current.virtual",
                    f"the job runs {plan.virtual} chunks per GPU, above its max_virtual {limit}: "
                    "raise max_virtual or give the plan it runs",
                )
            )
    if errors or plan is None:
        raise PlanRequestError(errors)
    moment = _timestamp(now)
    return {
        "pk": {"S": item_pk(PLAN_REQUEST_PREFIX, job_pk)},
        "sk": {"S": REQUEST_SK},
        "version": {"S": REQUEST_VERSION},
        "config": {"S": json.dumps(config, sort_keys=True)},
        "current": {"S": json.dumps(plan.to_dict(), sort_keys=True)},
        "current_key": {"S": plan_key(plan)},
        "since_step": {"N": str(since)},
        "step": {"N": str(step)},
        "interval": {"N": str(interval)},
        "created_at": {"S": moment},
        "updated_at": {"S": moment},
    }


def _string(item: Mapping[str, Any], name: str, errors: list[RequestProblem]) -> str:
    value = item.get(name)
    text = value.get("S") if isinstance(value, Mapping) else None
    if not isinstance(text, str):
        errors.append(RequestProblem(name, "missing, or not a string attribute"))
        return ""
    return text


def _optional_string(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    text = value.get("S") if isinstance(value, Mapping) else None
    return text if isinstance(text, str) else None


def _number(
    item: Mapping[str, Any], name: str, errors: list[RequestProblem], *, positive: bool = False
) -> int:
    value = item.get(name)
    text = value.get("N") if isinstance(value, Mapping) else None
    try:
        number = float(str(text))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number != int(number) or number < (1 if positive else 0):
        errors.append(
            RequestProblem(
                name, f"must be a {'positive' if positive else 'non-negative'} integer, got {text!r}"
            )
        )
        return 1 if positive else 0
    return int(number)


def _json(text: str, name: str, errors: list[RequestProblem]) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        errors.append(RequestProblem(name, f"not valid JSON ({error})"))
        return None


def request_from_item(item: Mapping[str, Any]) -> PlanRequest:
    """The request held by a ``PLANREQ`` item; raises :class:`PlanRequestError` naming what is broken."""
    errors: list[RequestProblem] = []
    pk = _string(item, "pk", errors)
    version = _string(item, "version", errors)
    if version and version != REQUEST_VERSION:
        errors.append(RequestProblem("version", f"expected {REQUEST_VERSION!r}, got {version!r}"))
    config = _json(_string(item, "config", errors), "config", errors)
    current = _json(_string(item, "current", errors), "current", errors)
    since_step = _number(item, "since_step", errors)
    step = _number(item, "step", errors)
    interval = _number(item, "interval", errors, positive=True)
    created_at, updated_at = _string(item, "created_at", errors), _string(item, "updated_at", errors)
    if errors:
        raise PlanRequestError(errors)
    if not isinstance(config, dict):
        raise PlanRequestError([RequestProblem("config", "must be a JSON object of planner keys")])
    plan = _plan(current, errors)
    flat, problems = normalise_keys(config)
    errors.extend(RequestProblem(f"config.{p.key}", p.message) for p in problems)
    resolved = None if errors else _resolve(flat, plan, errors)
    if errors or resolved is None or plan is None:
        raise PlanRequestError(errors)
    model, cluster, options = resolved
    return PlanRequest(
        job_id=str(key_from_pk(pk, PLAN_REQUEST_PREFIX)),
        model=model,
        cluster=cluster,
        options=options,
        current=plan,
        since_step=since_step,
        step=step,
        interval=interval,
        config=flat,
        created_at=created_at,
        updated_at=updated_at,
        planned_at=_optional_string(item, "planned_at"),
        measured=history_from_item(item),
        current_stage_nodes=_running_order(item),
        node_speeds=node_speeds_of(_optional_string(item, NODE_SPEEDS_ATTRIBUTE)),
    )


def _running_order(item: Mapping[str, Any]) -> tuple[tuple[int, ...], ...]:
    """The job's running node order (``current_stage_nodes``); unreadable is rank order, not an error."""
    text = _optional_string(item, "current_stage_nodes")
    if not text:
        return ()
    try:
        return stage_nodes_of(json.loads(text))
    except ValueError:
        return ()
