"""``osprey.adjust_parallelism()``: ask, every ``OSPREY_INTERVAL`` steps, whether the control plane recommends
another parallel plan (tp, pp, dp, micro-batch, virtual stages) for this job.

Call it from the training loop with the step number and the plan the job runs now. On steps that are not a
multiple of ``OSPREY_INTERVAL`` (default 60) it returns None at once, without any I/O, so every rank reaches
the same decision points. On the others it reads the job's plan record (``osprey_control.planner.record``)
and returns its plan when it differs from ``current`` (whenever there is one, if ``current`` is None), else
None. It never raises and never blocks training for long: the read runs on a daemon thread that is abandoned
after ``timeout_s`` (default 1 s), and any failure (no table, no record, throttling, a malformed record, a
timeout) is None.

Where the record comes from, first match wins:

- ``OSPREY_PLAN_FILE``: a local JSON file holding one plan record (the same format). For ``osprey local``,
  experiments and tests: rewrite the file and the job picks the new plan up at its next decision point.
- the registry table (``table=`` or ``OSPREY_TABLE_NAME``): item ``pk = JOB#<backend>#<native id>``,
  ``sk = PLAN``, read with ``GetItem`` through ``client=`` (a boto3 DynamoDB client; default: one with
  ``timeout_s`` connect/read timeouts and a single attempt). The job's key is ``job_key=`` or
  ``OSPREY_JOB_KEY`` (``<backend>#<native id>``, e.g. ``sagemaker-queued#<service job id>``), else the
  backend and job id the runtime detects (``osprey.runtime.job_dimensions``).

Every decision is appended to the JSON-lines trace named by ``OSPREY_LOG`` (if set), one object per line:
``{"time", "step", "rank", "interval", "source", "job", "decision", "current", "recommended", "plan_id",
"reason", "expected_saving_fraction", "error", "progress", "node_speeds", "placement", "elapsed_s"}``
(``node_speeds``: ``reported``, or ``ignored: <why>`` when they were not valid and the progress went without
them; ``placement``: why the record's node order was not offered, else null), where ``decision`` is
``new-plan``, ``new-placement`` (the same degrees, a straggler moved: the job re-orders its process groups,
``osprey.runtime.process_group_ranks``), ``unchanged``, ``placement-stale`` (the same degrees on a node order
made for other slow nodes: see below), ``no-record``, ``world-size-mismatch`` (the record is for another
number of GPUs), ``no-source`` (neither a plan file nor a table) or ``error``.

A record's node order (``stage_nodes``) was made for the nodes that were slow when the plan step planned.
When the job passes ``node_speeds`` and the record is the plan step's (not ``OSPREY_PLAN_FILE``'s, an
operator's instruction), the order is checked against them: it is offered only if it does not
leave the last (critical) stage slower than the alternative, the job's current order for a placement-only
record (else ``placement-stale``: None; a node recovered, or the job restarted on other hosts whose node
ranks name other machines), rank order for a new plan (else the plan comes without it:
``recommended_record()["stage_nodes"]`` is None). The same call reports the speeds, so the plan step places
the nodes that are slow now.

In a multi-process job, call it on one rank and broadcast the answer (``examples/train.py`` does), so all
ranks re-shape together even if the record changes between their reads.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from osprey.planning import job_partition_key, update_progress
from osprey_control.planner import (
    DEFAULT_INTERVAL,
    Plan,
    PlanRecordError,
    critical_stage_speed,
    interval_from_env,
    node_speeds_json,
    plan_from_record,
    plan_key,
    rank_order_nodes,
    record_from_item,
    stage_nodes_of,
)
from osprey_control.registry import PlanItems
from osprey_control.wiring import TABLE_NAME_VARIABLE

__all__ = ["DEFAULT_TIMEOUT_S", "adjust_parallelism", "recommended_record"]

DEFAULT_TIMEOUT_S = 1.0
_LOG = logging.getLogger("osprey.parallelism")
_CLIENTS: dict[float, Any] = {}
_RECOMMENDED: dict[str, dict[str, Any]] = {}


def recommended_record() -> dict[str, Any] | None:
    """The whole plan record behind the last new plan ``adjust_parallelism`` returned in this process (its
    ``stage_nodes`` and ``options`` too: the Plan holds only the degrees), or None before any. A copy."""
    record = _RECOMMENDED.get("record")
    return json.loads(json.dumps(record)) if record is not None else None


class _Outcome:
    def __init__(self) -> None:
        self.record: dict[str, Any] | None = None
        self.error: str | None = None


def _as_plan(current: Plan | Mapping[str, Any] | None) -> Plan | None:
    if current is None or isinstance(current, Plan):
        return current
    record = {"version": "1", "virtual": 1, **dict(current)}
    return plan_from_record(record)


def _default_client(timeout_s: float) -> Any:
    if timeout_s not in _CLIENTS:
        import boto3  # noqa: PLC0415 - only when the job reads the registry itself
        from botocore.config import Config  # noqa: PLC0415

        config = Config(
            connect_timeout=timeout_s, read_timeout=timeout_s, retries={"mode": "standard", "max_attempts": 1}
        )
        # A session of its own: this runs on a worker thread, and boto3's default session is not thread-safe.
        _CLIENTS[timeout_s] = boto3.session.Session().client("dynamodb", config=config)
    return _CLIENTS[timeout_s]


def _read_file(path: Path, outcome: _Outcome) -> None:
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return
    except (OSError, ValueError) as error:
        outcome.error = f"OSPREY_PLAN_FILE {path}: {error}"
        return
    if not isinstance(record, dict):
        outcome.error = f"OSPREY_PLAN_FILE {path}: must hold one JSON object (a plan record)"
        return
    outcome.record = record


def _read_table(client: Any, table: str, pk: str, outcome: _Outcome) -> None:
    try:
        item = PlanItems(table, client).record(pk)
        if item is not None:
            outcome.record = record_from_item(item)
    except Exception as error:
        outcome.error = f"{type(error).__name__}: {error}"


def _with_deadline(target: Any, timeout_s: float, outcome: _Outcome) -> None:
    worker = threading.Thread(target=target, name="osprey-adjust-parallelism", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        outcome.record = None
        outcome.error = f"timed out after {timeout_s:g} s (the read goes on in the background, ignored)"


def _trace(env: Mapping[str, str], entry: dict[str, Any]) -> None:
    path = env.get("OSPREY_LOG")
    log = _LOG.warning if entry["decision"] == "error" else _LOG.info
    log("adjust_parallelism %s", entry["decision"], extra={"osprey": entry})
    if not path:
        return
    try:
        with Path(path).open("a") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")
    except OSError as error:
        _LOG.warning("adjust_parallelism: cannot append to OSPREY_LOG %s: %s", path, error)


def adjust_parallelism(
    step: int,
    current: Plan | Mapping[str, Any] | None = None,
    *,
    client: Any = None,
    table: str | None = None,
    job_key: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval: int | None = None,
    stage_nodes: Sequence[Sequence[int]] | None = None,
    node_speeds: Sequence[float] | None = None,
) -> Plan | None:
    """The recommended plan when it differs from ``current`` (a Plan or a mapping with tp, pp, dp,
    micro_batch and optionally virtual), or has the same degrees placed on another node order than the job
    runs (``stage_nodes``, the order it applied; None: rank order), on steps that are a multiple of
    ``OSPREY_INTERVAL``; else None. ``node_speeds`` (``osprey.planning.node_speeds``) goes on the job's
    progress report, so the plan step places every slow node. Never raises (see the module docstring for sources, the trace and the
    time bound)."""
    env = os.environ if environ is None else environ
    started = time.monotonic()
    entry: dict[str, Any] = {
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "step": step,
        "rank": env.get("RANK"),
        "source": None,
        "job": None,
        "current": None,
        "recommended": None,
        "plan_id": None,
        "reason": None,
        "expected_saving_fraction": None,
        "error": None,
        "progress": None,
        "node_speeds": None,
        "placement": None,
    }
    try:
        every = interval if interval is not None else interval_from_env(env)
    except ValueError as error:
        every, entry["error"] = DEFAULT_INTERVAL, str(error)
    entry["interval"] = every
    if every < 1 or step % every:
        return None
    result: Plan | None = None
    try:
        now = _as_plan(current)
        entry["current"] = now.to_dict() if now else None
        order = stage_nodes_of(stage_nodes)
        speeds = _valid_speeds(node_speeds, entry)
        result = _decide(
            now,
            entry,
            env,
            client=client,
            table=table,
            job_key=job_key,
            timeout_s=timeout_s,
            order=order,
            speeds=speeds,
        )
    except Exception as error:
        entry["decision"], entry["error"] = "error", f"{type(error).__name__}: {error}"
        result = None
    entry["elapsed_s"] = round(time.monotonic() - started, 6)
    _trace(env, entry)
    return result


def _valid_speeds(node_speeds: Sequence[float] | None, entry: dict[str, Any]) -> list[float] | None:
    """The speeds to report, or None; bad ones are left out (the trace says why) so the progress report, which
    the plan step needs, is still written."""
    if node_speeds is None:
        return None
    try:
        node_speeds_json(node_speeds)
    except ValueError as error:
        entry["node_speeds"] = f"ignored: {error}"
        return None
    entry["node_speeds"] = "reported"
    return list(node_speeds)


def _decide(
    now: Plan | None,
    entry: dict[str, Any],
    env: Mapping[str, str],
    *,
    client: Any,
    table: str | None,
    job_key: str | None,
    timeout_s: float,
    order: tuple[tuple[int, ...], ...] = (),
    speeds: list[float] | None = None,
) -> Plan | None:
    outcome = _Outcome()
    plan_file = env.get("OSPREY_PLAN_FILE")
    table_name = table or env.get(TABLE_NAME_VARIABLE)
    if plan_file:
        entry["source"] = f"file:{plan_file}"
        _read_file(Path(plan_file), outcome)
    elif table_name:
        pk = job_partition_key(job_key, env)
        entry["source"], entry["job"] = f"dynamodb:{table_name}", pk
        if pk is None:
            entry["decision"] = "error"
            entry["error"] = "cannot tell this job's registry key; set OSPREY_JOB_KEY=<backend>#<native id>"
            return None

        def read() -> None:
            dynamodb = client if client is not None else _default_client(timeout_s)
            _read_table(dynamodb, table_name, pk, outcome)
            try:
                entry["progress"] = update_progress(
                    dynamodb, table_name, pk, entry["step"], now, stage_nodes=order, node_speeds=speeds
                )
            except Exception as error:
                entry["progress"] = f"error: {type(error).__name__}: {error}"

        _with_deadline(read, timeout_s, outcome)
    else:
        entry["decision"] = "no-source"
        return None
    if outcome.error is not None:
        entry["decision"], entry["error"] = "error", outcome.error
        return None
    if outcome.record is None:
        entry["decision"] = "no-record"
        return None
    try:
        recommended = plan_from_record(outcome.record)
    except PlanRecordError as error:
        entry["decision"], entry["error"] = "error", f"plan record: {error}"
        return None
    entry["recommended"] = recommended.to_dict()
    for name in ("plan_id", "reason", "expected_saving_fraction"):
        entry[name] = outcome.record.get(name)
    if now is not None and recommended.tp * recommended.pp * recommended.dp != now.tp * now.pp * now.dp:
        entry["decision"] = "world-size-mismatch"
        return None
    placed = stage_nodes_of(outcome.record.get("stage_nodes"))
    # A plan file is an operator's instruction (and no speeds go anywhere from it): its order is not second-
    # guessed. A record of the plan step's is checked against the speeds the job measured.
    measured = None if plan_file else speeds
    if now is not None and recommended == now:
        # Same degrees: new only if the record moves a node the job runs elsewhere (a straggler moved off
        # the critical stage), compared as the identity of the two orders the plan step also uses.
        if not placed or plan_key(now, placed) == plan_key(now, order):
            entry["decision"] = "unchanged"
            return None
        entry["placement"] = _stale_placement(placed, order, measured, better=True)
        if entry["placement"] is not None:
            entry["decision"] = "placement-stale"
            return None
        entry["decision"] = "new-placement"
        _RECOMMENDED["record"] = dict(outcome.record)
        return recommended
    entry["decision"] = "new-plan"
    entry["placement"] = _stale_placement(placed, (), measured, better=False)
    stale = entry["placement"] is not None
    _RECOMMENDED["record"] = {**outcome.record, "stage_nodes": None} if stale else dict(outcome.record)
    return recommended


def _stale_placement(
    placed: tuple[tuple[int, ...], ...],
    running: tuple[tuple[int, ...], ...],
    speeds: list[float] | None,
    *,
    better: bool,
) -> str | None:
    """Why the record's node order ``placed`` does not fit the job's nodes as measured now, or None: it must
    make the critical stage faster than ``running`` (the job's order; () for rank order) when ``better``,
    and no slower when not. None as well without an order or without speeds from the job."""
    if not placed or speeds is None:
        return None
    nodes = sum(len(stage) for stage in placed)
    if len(speeds) != nodes:
        return f"made for {nodes} nodes, the job reports {len(speeds)}"
    against = running or rank_order_nodes(nodes, len(placed))
    offered, now = critical_stage_speed(placed, speeds), critical_stage_speed(against, speeds)
    if offered < now or (better and offered == now):
        return (
            f"the order would run the critical stage at {offered:.3f} of nominal speed, "
            f"the job's {'order' if running else 'rank order'} at {now:.3f}: made for other slow nodes"
        )
    return None
