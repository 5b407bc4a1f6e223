"""``osprey.request_planning()``: ask the control plane to re-plan this job's parallelism as the cluster changes.

A job calls it once (at start, or after every re-shape it chooses itself) with its model, its cluster and the
plan it runs::

    osprey.request_planning(
        model={"layers": 32, "hidden": 4096, "heads": 32, "seq": 2048, "vocab": 51200, "global_batch": 512},
        cluster="p4de.24xlarge",                       # or {"gpus": 64, "gpu": "A100-80GB", "network_gbits": 400}
        current={"tp": 2, "pp": 1, "dp": 32, "micro_batch": 16},
    )

It writes the job's plan request (``sk = PLANREQ``, format in :mod:`osprey_control.planner.request`) to the
registry table; every cycle the plan step measures the job's network from CloudWatch, re-plans, and writes the
job's plan record (``sk = PLAN``) when a switch pays, which :func:`osprey.adjust_parallelism` returns. Inputs are
checked before anything is written: :class:`PlanRequestError` lists every problem by field (``model.layers``,
``cluster.instance_type``, ``current.tp``).

The table is ``table=`` or ``OSPREY_TABLE_NAME``; the job is ``job_key=`` or ``OSPREY_JOB_KEY``
(``<backend>#<native id>``) or what :func:`osprey.runtime.job_dimensions` detects, as for ``adjust_parallelism``.
IAM for the job's role: ``dynamodb:PutItem`` (this call) and ``dynamodb:UpdateItem`` (the step and plan
``adjust_parallelism`` reports at each decision point, :func:`report_plan_progress`) on the table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from osprey_control.planner import (
    ModelSpec,
    Plan,
    PlanRequestError,
    RequestProblem,
    build_request,
    interval_from_env,
    node_speeds_from_rank_times,
    node_speeds_json,
    out_of_rank_order,
    plan_key,
    stage_nodes_of,
)
from osprey_control.registry import JOB_PREFIX, PlanItems, ProgressUpdate
from osprey_control.wiring import TABLE_NAME_VARIABLE

__all__ = [
    "PlanRequestError",
    "job_partition_key",
    "node_speeds",
    "report_plan_progress",
    "request_planning",
    "update_progress",
]


def job_partition_key(job_key: str | None, env: Mapping[str, str]) -> str | None:
    """``JOB#<backend>#<native id>`` from ``job_key``, ``OSPREY_JOB_KEY`` or the detected backend and job id."""
    key = job_key or env.get("OSPREY_JOB_KEY")
    if not key:
        from osprey.runtime import job_dimensions  # noqa: PLC0415 - pulls the contract (pydantic): only here

        dimensions = job_dimensions(env)
        if dimensions["Backend"] == "unknown" or dimensions["JobId"] == "unknown":
            return None
        key = f"{dimensions['Backend']}#{dimensions['JobId']}"
    return f"{JOB_PREFIX}{key}"  # build_request checks it (is_job_pk) and names the problem


def _where(table: str | None, job_key: str | None, env: Mapping[str, str]) -> tuple[str, str]:
    errors: list[RequestProblem] = []
    table_name = table or env.get(TABLE_NAME_VARIABLE)
    if not table_name:
        errors.append(RequestProblem("table", "no registry table; pass table= or set OSPREY_TABLE_NAME"))
    pk = job_partition_key(job_key, env)
    if pk is None:
        errors.append(
            RequestProblem(
                "job_key", "cannot tell this job's registry key; set OSPREY_JOB_KEY=<backend>#<native id>"
            )
        )
    if errors or table_name is None or pk is None:
        raise PlanRequestError(errors)
    return table_name, pk


def request_planning(
    model: ModelSpec | Mapping[str, Any],
    cluster: Mapping[str, Any] | str,
    current: Plan | Mapping[str, Any],
    *,
    gpus: int | None = None,
    step: int = 0,
    interval: int | None = None,
    max_virtual: int | None = None,
    job_key: str | None = None,
    table: str | None = None,
    client: Any = None,
    environ: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> dict[str, dict[str, str]]:
    """Write (or replace) this job's plan request; returns the item written.

    ``model``: a :class:`ModelSpec` or a mapping of ``layers hidden heads seq vocab global_batch`` (plus
    ``recompute sequence_parallel optimizer_sharding precision``, each a value or ``any`` for the plan step to
    search, ``flash_attention comm_overlap tied_embeddings gated_mlp``, ``on`` or ``off``, and for Llama-style
    models ``ffn_hidden kv_heads``); ``cluster``: an
    instance-type preset (``"p5.48xlarge"``, ``"p6-b200.48xlarge"``) or a mapping of ``gpus gpus_per_node
    instance_type gpu peak_tflops peak_tflops_fp8 gpu_memory_gib hbm_gbytes nvlink_gbytes network_gbits
    memory_headroom``; ``current``: the plan the job runs now (``virtual`` defaults to 1), adopted at ``step``.
    ``gpus`` defaults to ``tp * pp * dp``, ``interval`` to ``OSPREY_INTERVAL`` (60). ``max_virtual``: the most
    pipeline chunks per GPU the job's training code runs, so the plan step recommends nothing it cannot run
    (1 for a pipeline without Megatron's interleaved schedule, such as DeepSpeed's; default 8). Raises
    :class:`PlanRequestError` (a ValueError) naming every bad field before anything is written."""
    env = os.environ if environ is None else environ
    table_name, pk = _where(table, job_key, env)
    try:
        every = interval_from_env(env) if interval is None else interval
    except ValueError as error:
        raise PlanRequestError([RequestProblem("interval", str(error))]) from None
    item = build_request(
        pk,
        model=model,
        cluster=cluster,
        current=current,
        gpus=gpus,
        step=step,
        interval=every,
        max_virtual=max_virtual,
        now=now,
    )
    PlanItems(table_name, client).put_request(item)
    return item


def update_progress(
    client: Any,
    table: str,
    pk: str,
    step: int,
    current: Plan | None,
    *,
    stage_nodes: Sequence[Sequence[int]] | None = None,
    node_speeds: Sequence[float] | None = None,
    now: datetime | None = None,
) -> str:
    """Record the job's step (and the plan it runs, in the node order ``stage_nodes`` if it applied one, and
    every node's speed, ``node_speeds``, if it measured them) on its request item: ``updated``, ``adopted``
    (the plan or its order changed: ``since_step`` is now ``step``) or ``no-request``. Conditional writes
    only; raises on AWS errors, and ``PlanRequestError`` naming ``node_speeds`` when they are not positive
    numbers (nothing written)."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        speeds = node_speeds_json(node_speeds) if node_speeds is not None else None
    except ValueError as error:
        raise PlanRequestError([RequestProblem("node_speeds", str(error))]) from None
    update = ProgressUpdate(step, stamp, node_speeds_json=speeds)
    if current is not None:
        order = stage_nodes_of(stage_nodes)
        update = ProgressUpdate(
            step,
            stamp,
            plan_key(current, order),
            json.dumps(current.to_dict(), sort_keys=True),
            json.dumps([list(stage) for stage in order]) if out_of_rank_order(order) else None,
            speeds,
        )
    return PlanItems(table, client).update_progress(pk, update)


def node_speeds(rank_compute_seconds: Sequence[float], gpus_per_node: int) -> list[float]:
    """Every node's speed from every rank's compute time per step (in rank order, e.g.
    ``osprey.runtime.gather_compute_times``): the median rank's time over the node's slowest rank's. Pass
    it to ``adjust_parallelism(..., node_speeds=...)`` so the plan step sees every slow node, not only the
    slowest. ``ValueError`` when the times are not positive or do not fill whole nodes."""
    return node_speeds_from_rank_times(list(rank_compute_seconds), gpus_per_node)


def report_plan_progress(
    step: int,
    current: Plan | Mapping[str, Any] | None = None,
    *,
    job_key: str | None = None,
    table: str | None = None,
    client: Any = None,
    environ: Mapping[str, str] | None = None,
    stage_nodes: Sequence[Sequence[int]] | None = None,
    node_speeds: Sequence[float] | None = None,
) -> str:
    """Tell the plan step where the job is: its training step and (optionally) the plan it runs now, with
    the node order it runs it in when it applied a plan record's ``stage_nodes``, and every node's speed
    (:func:`node_speeds`).
    ``adjust_parallelism`` does this at every decision point; call it yourself only without that. Returns
    ``updated``, ``adopted`` or ``no-request`` (no plan request for this job: nothing written)."""
    env = os.environ if environ is None else environ
    table_name, pk = _where(table, job_key, env)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise PlanRequestError([RequestProblem("step", f"must be a non-negative integer, got {step!r}")])
    plan: Plan | None = None
    if current is not None:
        from osprey_control.planner import plan_from_record  # noqa: PLC0415

        plan = (
            current
            if isinstance(current, Plan)
            else plan_from_record({"version": "1", "virtual": 1, **current})
        )
    return update_progress(
        client, table_name, pk, step, plan, stage_nodes=stage_nodes, node_speeds=node_speeds
    )
