"""The plan step of the cycle: re-plan every active job that asked to be planned, write a plan record on a switch.

For every active job (the registry's ``active-jobs`` index, one shard or all) with a plan request
(``sk = PLANREQ``, :mod:`osprey_control.planner.request`, read with ``BatchGetItem``, 100 keys a call):

1. measure the job's network from CloudWatch (``GetMetricData`` MetricStat, at most 500 queries a call, the
   runtime's ``InterconnectLatencyMicroseconds`` and ``StepTimeSeconds`` of the lead host, the only one that
   publishes them (every rank of a synchronous job has the same step time and collective latency);
   :mod:`.measure` turns them into a :class:`~osprey_control.planner.replan.Measurement`, missing data keeps
   nominal values);
2. ``replan(current, measured, hysteresis, placement_hysteresis, interval=<the job's OSPREY_INTERVAL>)`` at
   the request's step
   (the job reports its step at each ``adjust_parallelism`` decision point);
3. note on the request when it was planned, and the step time measured on its current plan (the request's
   ``measured``, :mod:`.history`: the next calibration fits every plan the job has run);
4. on ``switch`` only, ``PutItem`` the plan record (``sk = PLAN``, :mod:`osprey_control.planner.record`)
   conditional on ``attribute_not_exists(pk) OR plan_id <> :plan_id``: the same recommendation is never
   rewritten, so its ``created_at`` stays the time it was first made;
5. when the current plan is fine (``no-better-plan``, ``below-hysteresis``), ``GetItem`` the record and, if
   it still recommends another plan the job has not read yet, replace it with the current plan (reason
   ``withdrawn``, conditional on its ``plan_id``; ``record.withdrawal_for``).

One job's failure (a broken request, an AWS error on its write) is that job's: it is reported in ``errors``
and every other job is still planned. A failed metrics call leaves its jobs on nominal values (noted).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from osprey_control.aws import client_for, is_transient
from osprey_control.metrics import (
    MAX_QUERIES_PER_CALL,
    SeriesSpec,
    fetch_latest,
    lead_series,
    metric_data_query,
)
from osprey_control.planner import (
    CURRENT_PLAN_FINE,
    DEFAULT_HYSTERESIS,
    DEFAULT_PLACEMENT_HYSTERESIS,
    DEFAULT_TOLERANCE,
    MeasuredStep,
    Observed,
    PlanRecordError,
    PlanRequest,
    ReplanDecision,
    history_item,
    measure,
    plan_key,
    record_for_decision,
    record_from_item,
    record_item,
    replan,
    request_from_item,
    settled,
    validate_threshold,
    with_measurement,
    withdrawal_for,
)
from osprey_control.registry import (
    DEFAULT_SHARDS,
    MAX_KEYS_PER_BATCH_GET,
    Fence,
    FenceLostError,
    JobKey,
    JobRecord,
    JobRegistry,
    PlanItems,
    job_pk,
    key_from_pk,
)
from osprey_control.steps.deadline import Deadline
from osprey_control.wiring import (
    INTERCONNECT_LATENCY_METRIC,
    METRICS_NAMESPACE,
    SLOWEST_NODE_INDEX_METRIC,
    SLOWEST_NODE_SPEED_METRIC,
    STEP_TIME_METRIC,
)

__all__ = [
    "MAX_KEYS_PER_BATCH_GET",
    "MAX_QUERIES_PER_CALL",
    "PlanStepConfig",
    "PlanStepReport",
    "run_plan_step",
]

logger = logging.getLogger(__name__)

MAX_REPORTED = 20  # per list in the report: the state machine's payload stays small
# Per reported error message: an exception's text can be any length (the log has it whole).
MESSAGE_CHARS = 600
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_EARLY_SLACK_S = 5.0


@dataclass(frozen=True, slots=True)
class PlanStepConfig:
    table_name: str
    namespace: str = METRICS_NAMESPACE
    shards: int = DEFAULT_SHARDS
    hysteresis: float = DEFAULT_HYSTERESIS
    placement_hysteresis: float = DEFAULT_PLACEMENT_HYSTERESIS
    window_seconds: int = 600
    period_seconds: int = 60
    tolerance: float = DEFAULT_TOLERANCE
    # Plan a job at most this often (0: every run). Between, its metrics are not even queried.
    min_interval_seconds: int = 0

    def __post_init__(self) -> None:
        validate_threshold("hysteresis", self.hysteresis)
        validate_threshold("placement_hysteresis", self.placement_hysteresis)
        if self.period_seconds < 60 or self.period_seconds % 60:
            raise ValueError(f"period_seconds must be a multiple of 60, got {self.period_seconds!r}")
        if self.window_seconds < self.period_seconds:
            raise ValueError("window_seconds must be at least period_seconds")
        if self.min_interval_seconds < 0:
            raise ValueError(f"min_interval_seconds must be >= 0, got {self.min_interval_seconds!r}")


@dataclass(slots=True)
class PlanStepReport:
    """What one plan step did, for the state machine (lists capped at :data:`MAX_REPORTED`)."""

    jobs: int = 0  # active jobs seen
    requests: int = 0  # of which asked to be planned
    skipped: int = 0  # of which were planned less than min_interval_seconds ago
    planned: int = 0  # replan ran
    switches: int = 0  # replan said switch
    written: int = 0  # plan records written (a switch to the plan already recommended writes nothing)
    withdrawn: int = 0  # stale recommendations replaced by the job's current plan
    decisions: Counter[str] = field(default_factory=Counter)
    missing_data: int = 0  # planned jobs with a metric missing (its nominal value was kept)
    # planned jobs whose model was fitted to their measured step time: job -> factor and error before/after
    calibrations: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def error(self, job: str, kind: str, message: str, *, transient: bool = False) -> None:
        logger.warning("job not planned", extra={"job": job, "kind": kind, "error": message})
        self.errors.append({"job": job, "kind": kind, "message": message, "transient": transient})

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "requests": self.requests,
            "skipped": self.skipped,
            "planned": self.planned,
            "switches": self.switches,
            "written": self.written,
            "withdrawn": self.withdrawn,
            "decisions": dict(sorted(self.decisions.items())),
            "missingData": self.missing_data,
            "calibrated": len(self.calibrations),
            "calibrations": self.calibrations[:MAX_REPORTED],
            "records": self.records[:MAX_REPORTED],
            "errors": [
                {**error, "message": str(error["message"])[:MESSAGE_CHARS]}
                for error in self.errors[:MAX_REPORTED]
            ],
            "errorCount": len(self.errors),
        }


def _requests(plans: PlanItems, pks: Sequence[str], report: PlanStepReport) -> dict[str, dict[str, Any]]:
    """The request item of each of ``pks`` that has one; a request DynamoDB left unread is planned next cycle."""
    items, unread = plans.requests(pks)
    for pk in unread:
        report.error(
            str(key_from_pk(pk)),
            "request-unread",
            "DynamoDB left the plan request unprocessed (throughput); the job is planned next cycle",
            transient=True,
        )
    return items


def _series(records: Iterable[JobRecord], namespace: str) -> list[SeriesSpec]:
    """Latency, step time and the slowest node of each job's lead host, on the runtime's [Backend, JobId,
    Host] dimensions: four series per job, whatever its size."""
    jobs = list(records)
    return [
        *lead_series(jobs, "latency", INTERCONNECT_LATENCY_METRIC, osprey_namespace=namespace),
        *lead_series(jobs, "step_time", STEP_TIME_METRIC, osprey_namespace=namespace),
        *lead_series(jobs, "node_speed", SLOWEST_NODE_SPEED_METRIC, osprey_namespace=namespace),
        *lead_series(jobs, "node_index", SLOWEST_NODE_INDEX_METRIC, osprey_namespace=namespace),
    ]


def _metrics(
    client: Any, specs: Sequence[SeriesSpec], config: PlanStepConfig, end: datetime
) -> tuple[dict[str, Observed], dict[str, str]]:
    """Per job (``str(JobKey)``): the latest value of its lead host's series; and why a job has none (failed
    call)."""
    start = end - timedelta(seconds=config.window_seconds)
    latest: dict[str, tuple[datetime, float]] = {}
    failed: dict[str, str] = {}
    for offset in range(0, len(specs), MAX_QUERIES_PER_CALL):
        chunk = range(offset, min(offset + MAX_QUERIES_PER_CALL, len(specs)))
        queries = [metric_data_query(f"q{index}", specs[index], config.period_seconds) for index in chunk]
        try:
            # The collector's pagination; series statuses do not matter here (a missing value stays nominal).
            chunk_latest, _, _ = fetch_latest(client, queries, start, end)
        except Exception as error:  # one failed call costs only its own jobs their data
            logger.warning("plan metrics call failed", extra={"offset": offset, "error": repr(error)})
            for index in chunk:
                failed[str(specs[index].job)] = f"GetMetricData failed: {type(error).__name__}: {error}"
            continue
        latest.update(chunk_latest)
    values: dict[str, dict[str, float]] = {}
    for index, spec in enumerate(specs):
        found = latest.get(f"q{index}")
        if found is not None and str(spec.job) not in failed:
            values.setdefault(str(spec.job), {})[spec.metric_name] = found[1]
    observed = {
        job: Observed(
            latency_us=found.get(INTERCONNECT_LATENCY_METRIC),
            step_time_s=found.get(STEP_TIME_METRIC),
            slowest_node_speed=found.get(SLOWEST_NODE_SPEED_METRIC),
            slowest_node_index=found.get(SLOWEST_NODE_INDEX_METRIC),
        )
        for job, found in values.items()
    }
    return observed, failed


def _due(request: PlanRequest, config: PlanStepConfig, now: datetime) -> bool:
    """Whether the job was last planned at least ``min_interval_seconds`` ago (a cycle 5 s early counts)."""
    if config.min_interval_seconds <= 0 or not request.planned_at:
        return True
    try:
        last = datetime.strptime(request.planned_at, _TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return True
    return (now - last).total_seconds() + _EARLY_SLACK_S >= config.min_interval_seconds


def _measured_history(request: PlanRequest, observed: Observed, at: str) -> dict[str, Any] | None:
    """The job's measured plans with this step time on its current plan (None: no step time to add, or the
    job has not run the plan for its interval yet)."""
    seconds = observed.step_time_s
    if seconds is None or not math.isfinite(seconds) or seconds <= 0 or not settled(request):
        return None
    return history_item(
        with_measurement(
            request.measured, MeasuredStep(request.current, seconds, at, request.current_stage_nodes)
        )
    )


def _plan_job(
    plans: PlanItems,
    *,
    config: PlanStepConfig,
    request: PlanRequest,
    observed: Observed,
    report: PlanStepReport,
    now: datetime,
) -> None:
    measurement, signals = measure(request, observed, tolerance=config.tolerance)
    decision = replan(
        request.current_plan(),
        measurement,
        hysteresis=config.hysteresis,
        placement_hysteresis=config.placement_hysteresis,
        interval=request.interval,
        options=request.options,
    )
    report.planned += 1
    report.decisions[decision.reason] += 1
    if any(signal.missing for signal in signals.values()):
        report.missing_data += 1
    calibration = signals.get("calibration")
    if calibration is not None and calibration.value is not None:
        report.calibrations.append(
            {
                "job": request.job_id,
                "compute_factor": calibration.value,
                "fit": calibration.note[:MESSAGE_CHARS],
            }
        )
    logger.info(
        "job planned",
        extra={
            "job": request.job_id,
            "reason": decision.reason,
            "step": decision.step,
            "expected_saving_fraction": decision.expected_saving_fraction,
            "signals": {name: signal.to_dict() for name, signal in signals.items()},
        },
    )
    pk = job_pk(JobKey.parse(request.job_id))
    record = record_for_decision(request.job_id, decision, created_at=now)
    planned_at = now.strftime(_TIME_FORMAT)
    measured = _measured_history(request, observed, planned_at)
    if record is None:
        plans.mark_planned(pk, planned_at, decision.reason, measured)
        _withdraw_stale(plans, pk, request, decision, report=report, now=now)
        return
    report.switches += 1
    written = plans.put_record(record_item(pk, record))
    plans.mark_planned(pk, planned_at, decision.reason, measured)
    report.written += int(written)
    report.records.append(
        {
            "job": request.job_id,
            "plan_id": record["plan_id"],
            "plan": {name: record[name] for name in ("tp", "pp", "dp", "micro_batch", "virtual")},
            "expected_saving_fraction": record["expected_saving_fraction"],
            "written": written,
        }
    )


def _withdraw_stale(
    plans: PlanItems,
    pk: str,
    request: PlanRequest,
    decision: ReplanDecision,
    *,
    report: PlanStepReport,
    now: datetime,
) -> None:
    """Replace a recommendation the plan step no longer makes, if the job has not read it yet."""
    if decision.reason not in CURRENT_PLAN_FINE:
        return
    item = plans.record(pk)
    if item is None:
        return
    try:
        stale = record_from_item(item)
    except PlanRecordError:
        return  # a broken record is the job's to ignore (adjust_parallelism says so); not ours to guess
    keep = withdrawal_for(
        request.job_id,
        decision,
        stale,
        running_key=plan_key(request.current, request.current_stage_nodes),
        last_progress_at=request.updated_at,
        created_at=now,
    )
    if keep is None:
        return
    if plans.replace_record(record_item(pk, keep), str(stale.get("plan_id", ""))):
        report.withdrawn += 1
        logger.info(
            "stale recommendation withdrawn", extra={"job": request.job_id, "plan_id": stale.get("plan_id")}
        )


def run_plan_step(
    config: PlanStepConfig,
    *,
    dynamodb: Any = None,
    cloudwatch: Any = None,
    shard: int | None = None,
    now: datetime | None = None,
    fence: Fence | None = None,
    deadline: Deadline | None = None,
) -> PlanStepReport:
    """Plan every active job with a plan request (of ``shard``, or all shards); see the module docstring.
    With a ``fence``, its writes check the lease token and the first :class:`FenceLostError` stops the step;
    no job is planned once ``deadline`` (the lease's expiry at the latest) has passed (counted ``skipped``).

    ``dynamodb`` / ``cloudwatch``: boto3 clients (created with :func:`osprey_control.aws.client_for` if None)."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    dynamodb = client_for("dynamodb", dynamodb)
    report = PlanStepReport()
    records = JobRegistry(config.table_name, dynamodb, shards=config.shards).list_active(shard)
    report.jobs = len(records)
    by_pk = {job_pk(record.key): record for record in records}
    plans = PlanItems(config.table_name, dynamodb)
    plans.fence = fence
    deadline = deadline or Deadline.never()
    items = _requests(plans, sorted(by_pk), report)
    report.requests = len(items)
    requests: dict[str, PlanRequest] = {}
    for pk, item in sorted(items.items()):
        try:
            requests[pk] = request_from_item(item)
        except ValueError as error:
            report.error(
                str(key_from_pk(pk)),
                "invalid-request",
                f"{error}; the job must call request_planning again",
            )
    for pk in [pk for pk, request in requests.items() if not _due(request, config, moment)]:
        del requests[pk]
        report.skipped += 1
    specs = _series((by_pk[pk] for pk in requests), config.namespace)
    observed, failed = (
        _metrics(client_for("cloudwatch", cloudwatch), specs, config, moment) if specs else ({}, {})
    )
    for index, request in enumerate(requests.values()):
        job = request.job_id
        if deadline.expired:  # the rest are due next cycle
            report.skipped += len(requests) - index
            break
        hostless = (
            "" if by_pk[job_pk(JobKey.parse(job))].nodes else "the registry lists no hosts for this job yet"
        )
        seen = observed.get(job, Observed(missing=failed.get(job, hostless)))
        try:
            _plan_job(plans, config=config, request=request, observed=seen, report=report, now=moment)
        except FenceLostError as error:  # another execution holds the lease: it plans these jobs
            report.error(job, "fence-lost", str(error))
            break
        except Exception as error:  # isolate: the other jobs are still planned
            report.error(
                job, "plan-failed", f"{type(error).__name__}: {error}", transient=is_transient(error)
            )
    logger.info(
        "plan step done", extra={key: value for key, value in report.to_dict().items() if key != "records"}
    )
    return report
