"""The monthly bill of one Osprey deployment, line by line: template facts x fleet x assumptions x prices.

A month is 30 days (2,592,000 s). What is counted, per cycle:

- Step Functions: the cycle state machine's type decides. Express (the shipped cycle): one request per
  execution and its duration at 64 MB, the duration being the Lambda durations along the walk
  (:func:`osprey.cost.template.walk`) with the shards' derive in waves of the Map's ``MaxConcurrency``, plus
  Step Functions' own time per state and, below 60 s, the Wait between the cycles one execution loops through.
  Standard: the states one cycle enters. The shard Map runs one iteration per *non-empty* shard.
- Lambda: one invocation per Task the walk enters, at the template's memory and architecture; durations are
  :class:`Assumptions` (not in any artifact).
- GetMetricData: the series the collector builds for the synthetic fleet with the policy's needs (node series,
  and the runtime's job-level series of each running job: its lead host's latency and remaining time, when the
  policy reads them), each job read on one cycle in N (the collect function's ``OSPREY_METRICS_EVERY_N_CYCLES``;
  1 when unset), in ``ceil(series / 500)`` calls a cycle (one collection for all shards).
- DynamoDB: the lease acquire and release (two updates); per changed job (``changes_per_job_hour``), fenced by
  the lease token (a transaction with a ``ConditionCheck`` on the lease item, itself billed as a transactional
  write), a transactional write of the job item and its history item plus the ``active-jobs`` index copy (ALL
  projection) and the ``apply-pending`` entry (keys only), then the apply step's update of the job item, its
  index copy and the removal of that entry; the collect step's item per busy shard. Reads: one COUNT query per
  shard, two index queries per non-empty shard (collect and derive), one pending-index query per shard, one
  consistent get per changed job in derive and again in apply, one get of each shard's collection.
- Custom metrics: the runtime's EMF series the control plane reads (one per running job and metric, from its
  lead process), the planner's step time for re-planned jobs, and the control plane's own EMF series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from osprey.cost.arithmetic import Amount, format_number, money, q
from osprey.cost.fleet import AgentMetrics, FleetShape, MetricLoad
from osprey.cost.prices import PRICES, Price, custom_metric_tiers
from osprey.cost.template import CycleWalk, Facts, TemplateFacts, walk
from osprey_control.wiring import (
    APPLY_FAILURES_METRIC,
    COLLECTION_LATENCY_METRIC,
    CYCLE_DURATION_METRIC,
    CYCLES_SUCCEEDED_METRIC,
    JOBS_EVALUATED_METRIC,
    METRICS_MISSING_METRIC,
    PRIORITIES_APPLIED_METRIC,
)

__all__ = ["Assumptions", "CostLine", "CostReport", "estimate"]

SECONDS_PER_MONTH = 30 * 86_400
SHARD_MAP_STATE = "DeriveShards"
# An Express execution is billed for the memory it uses, in 64 MB steps; the cycle's state is a few KB.
EXPRESS_BILLED_MB = 64

# EMF series the control plane publishes every cycle without per-job metrics (lambdas/osprey_control/telemetry.py,
# osprey_handlers apply and finish): per policy in use DerivedPriority and PriorityChange, plus these. Series
# that appear only on failures (CustomRuleFailures, DerivationErrors, CyclesFailed) are billed by the hour they
# exist and are left out.
CONTROL_PLANE_SERIES = (
    JOBS_EVALUATED_METRIC,
    METRICS_MISSING_METRIC,
    COLLECTION_LATENCY_METRIC,
    PRIORITIES_APPLIED_METRIC,
    APPLY_FAILURES_METRIC,
    CYCLE_DURATION_METRIC,
    CYCLES_SUCCEEDED_METRIC,
)


@dataclass(frozen=True, slots=True)
class Assumptions:
    """What no artifact says; every figure here is an estimate, stated in docs/deploy.md."""

    # Warm duration in seconds per handler module (osprey_handlers.<module>.handler).
    durations: dict[str, float] = field(
        default_factory=lambda: {
            "lease": 0.1,
            "shards": 0.2,
            "collect": 0.5,
            "derive": 0.5,
            "apply": 0.3,
            "plan": 1.0,
            "finish": 0.1,
            "eks_discovery": 0.5,
        }
    )
    job_item_kb: int = 2  # the job item with its last decision
    history_item_kb: int = 2  # a history item also holds the decision
    # Priority changes per job-hour: the simulator's oscillation bound (docs/scheduling.md: at most 10; the
    # shipped policies measure 0.2 to 2.5). Each change is written once by derive and once by apply.
    changes_per_job_hour: float = 10.0
    # A shard's stored collection: compressed JSON of each job's node values (registry.collections).
    collection_kb_per_job: float = 0.15
    # Step Functions' own time per state entered, on top of the Lambda durations (Express bills duration).
    seconds_per_state: float = 0.02
    # Running jobs that re-plan their parallelism: each also publishes StepTimeSeconds for the planner.
    replanned_jobs: int = 0

    def duration_of(self, handler: str) -> float:
        """The warm duration of ``osprey_handlers.<module>.handler`` (0.5 s for a module not listed)."""
        return self.durations.get(handler.removeprefix("osprey_handlers.").split(".")[0], 0.5)

    policies_in_use: int = 1
    log_kb_per_invocation: float = 1.0  # Lambda START/END/REPORT and Powertools lines
    log_kb_per_emf_record: float = 0.4
    log_kb_per_state_event: float = 0.25  # Level ALL without execution data: about two events per state
    sqs_receives_per_minute: int = 15  # Lambda's SQS poller: five long-polling pollers, 20 s each


@dataclass(frozen=True, slots=True)
class CostLine:
    item: str
    monthly_usd: float
    arithmetic: str


@dataclass(frozen=True, slots=True)
class CostReport:
    lines: tuple[CostLine, ...]

    @property
    def monthly_usd(self) -> float:
        return round(sum(line.monthly_usd for line in self.lines), 2)

    def to_dict(self) -> dict[str, object]:
        return {
            "monthly_usd": self.monthly_usd,
            "lines": [
                {"item": line.item, "monthly_usd": line.monthly_usd, "arithmetic": line.arithmetic}
                for line in self.lines
            ],
        }


@dataclass(frozen=True, slots=True)
class CycleCounts:
    """One execution of the cycle state machine: ``cycles`` cycles, ``looped`` of them through the Wait loop."""

    last: CycleWalk  # the execution's last (or only) cycle
    loop: CycleWalk | None  # a cycle that goes on to the next one (sub-minute intervals)
    cycles: int

    @property
    def looped(self) -> int:
        return self.cycles - 1


def count_cycle(template: TemplateFacts, busy_shards: int, *, cycle_seconds: int) -> CycleCounts:
    """Walk the cycle definition: lease acquired, ``busy_shards`` Map iterations, the cycle succeeds."""
    document: dict[str, object] = {"lease": {"acquired": True}, "finish": {"outcome": "succeeded"}}
    iterations = {SHARD_MAP_STATE: busy_shards}
    per_execution = max(1, 60 // cycle_seconds) if cycle_seconds < 60 else 1
    last = walk(template.cycle_definition, Facts(document, iterations))
    loop = None
    if per_execution > 1:
        looping = Facts({**document, "cycles": per_execution, "intervalSeconds": cycle_seconds}, iterations)
        loop = walk(template.cycle_definition, looping, stop_on_return=True)
    return CycleCounts(last, loop, per_execution)


def _line(item: str, amount: Amount) -> CostLine:
    usd = round(amount.value, 2)
    return CostLine(item, usd, f"{amount.text} = ${usd:,.2f}")


def _price(key: str) -> Amount:
    price: Price = PRICES[key]
    if price.per == 1:
        return money(price.usd)
    return money(price.usd) / q(price.per, price.unit)


def _tiered(metrics: Amount) -> Amount:
    parts = custom_metric_tiers(int(metrics.value))
    if not parts:
        return metrics * money(Decimal(0))
    total: Amount | None = None
    for count, usd in parts:
        term = (metrics if len(parts) == 1 else q(count, "metrics")) * money(usd)
        total = term if total is None else total + term
    assert total is not None
    return total


@dataclass(frozen=True, slots=True)
class _Month:
    """The month's multipliers: executions started and cycles run, and per-execution counts."""

    executions: Amount
    cycles: Amount
    counts: CycleCounts
    transitions: Amount  # per execution
    invocations: Amount  # per execution


def _month(counts: CycleCounts, cycle_seconds: int) -> _Month:
    month = q(SECONDS_PER_MONTH, "s")
    if counts.cycles > 1:
        executions = month / q(60, "s")
        cycles = executions * q(counts.cycles, "cycles per execution")
    else:
        executions = cycles = month / q(cycle_seconds, "s")
    transitions: Amount = q(counts.last.transitions, "transitions")
    invocations: Amount = q(len(counts.last.invocations), "invocations")
    if counts.loop is not None:
        looped = q(counts.looped, "looped cycles")
        transitions = looped * q(counts.loop.transitions, "transitions") + transitions
        invocations = looped * q(len(counts.loop.invocations), "invocations") + invocations
    return _Month(executions, cycles, counts, transitions, invocations)


def _lambda_compute(template: TemplateFacts, m: _Month, a: Assumptions) -> list[CostLine]:
    by_arch: dict[str, dict[tuple[int, float], int]] = {}
    turns = [(m.counts.last, 1)]
    if m.counts.loop is not None:
        turns.append((m.counts.loop, m.counts.looped))
    for turn, repeat in turns:
        for logical_id in turn.invocations:
            info = template.functions.get(logical_id)
            if info is None:
                continue
            key = (info.memory_mb, a.duration_of(info.handler))
            grouped = by_arch.setdefault(info.architecture, {})
            grouped[key] = grouped.get(key, 0) + repeat
    lines = []
    for arch, grouped in sorted(by_arch.items()):
        terms = [
            q(count, "invocations") * q(seconds, "s") * q(memory, "MB") / q(1024, "MB per GB")
            for (memory, seconds), count in sorted(grouped.items())
        ]
        gb_seconds = terms[0]
        for term in terms[1:]:
            gb_seconds = gb_seconds + term
        price = _price(f"lambda_gb_second_{arch.replace('-', '_')}")
        lines.append(_line(f"Lambda compute ({arch})", gb_seconds * m.executions * price))
    return lines


def _dynamodb(
    shape: FleetShape, load: MetricLoad, shards: int, m: _Month, a: Assumptions, *, cycle_seconds: int
) -> list[CostLine]:
    job_wru = q(math.ceil(a.job_item_kb), "WRU job")
    index_wru = q(math.ceil(a.job_item_kb), "WRU index")
    fence = q(1, "WRU lease check")
    transactional = q(2, "transactional")
    decision = transactional * (job_wru + q(math.ceil(a.history_item_kb), "WRU history") + fence) + index_wru
    changed = q(round(shape.jobs * a.changes_per_job_hour * cycle_seconds / 3600, 2), "changed jobs")
    pending_entry = q(1, "WRU pending entry")
    applied = transactional * (job_wru + fence) + index_wru + pending_entry
    busiest = max(load.jobs_per_shard.values(), default=0)
    # The collect step's item per busy shard, written and read back once each cycle.
    collection_kb = a.collection_kb_per_job * busiest
    writes = (
        q(2, "WRU lease")
        + changed * (decision + pending_entry + applied)
        + q(load.busy_shards, "shard collections") * q(math.ceil(max(collection_kb, 1)), "WRU")
    )
    query_rru = q(0.5 * max(1, math.ceil(a.job_item_kb * busiest / 4)), "RRU")
    reads = (
        q(shards, "shard counts") * q(0.5, "RRU")
        + q(load.busy_shards, "shard queries") * q(2, "readers: collect and derive") * query_rru
        + q(shards, "pending queries") * q(0.5, "RRU")
        + changed * q(2, "gets") * q(math.ceil(a.job_item_kb / 4), "RRU consistent get")
        # The apply step reads the lease token before each applier call (Batch, and SageMaker/EKS chunks).
        + q(2, "fence reads") * q(1, "RRU")
        + q(load.busy_shards, "collection gets")
        * q(math.ceil(max(collection_kb, 1) / 4), "RRU consistent get")
    )
    return [
        _line("DynamoDB on-demand writes", writes * m.cycles * _price("dynamodb_write")),
        _line("DynamoDB on-demand reads", reads * m.cycles * _price("dynamodb_read")),
    ]


def _cloudwatch(
    template: TemplateFacts, shape: FleetShape, load: MetricLoad, m: _Month, a: Assumptions
) -> list[CostLine]:
    series = q(load.series - load.runtime_series, "node series") + q(load.runtime_series, "runtime series")
    every_n = int(
        template.function_by_handler("collect").environment.get("OSPREY_METRICS_EVERY_N_CYCLES", "1")
    )
    _average_series, average_calls = load.per_cycle(every_n)
    reads = m.cycles
    if every_n > 1:
        reads = m.cycles / q(every_n, "cycles per read")
    metrics = (
        q(load.runtime_series, "runtime series read")
        + q(a.replanned_jobs, "re-planned jobs") * q(1, "step time series")
        + q(len(CONTROL_PLANE_SERIES) + 2 * a.policies_in_use, "control plane series")
    )
    if template.setting("derive", "OSPREY_PER_JOB_METRICS") == "true":
        metrics = metrics + q(shape.jobs, "jobs") * q(2, "per job series")
    emf_records = q(load.busy_shards, "shards") * q(3 + 2 * a.policies_in_use, "EMF records") + q(
        4, "EMF records"
    )
    if m.counts.cycles > 1:
        emf_records = q(m.counts.cycles, "cycles") * emf_records
    events = q(2 if template.cycle_log_level == "ALL" else 0, "events per state")
    log_kb = (
        m.invocations * q(a.log_kb_per_invocation, "KB")
        + emf_records * q(a.log_kb_per_emf_record, "KB")
        + events * m.transitions * q(a.log_kb_per_state_event, "KB")
    )
    log_gb = log_kb * m.executions / q(1_048_576, "KB per GB")
    return [
        _line(
            f"CloudWatch GetMetricData (calls per cycle: {format_number(round(average_calls, 2))})",
            series * reads * _price("cw_get_metric_data"),
        ),
        _line("CloudWatch custom metrics (runtime and control plane EMF)", _tiered(metrics)),
        _line("CloudWatch Logs ingestion (control plane)", log_gb * _price("cw_logs_ingestion")),
        _line("CloudWatch dashboards", q(template.dashboards, "dashboards") * _price("cw_dashboard")),
        _line("CloudWatch alarms", q(template.alarm_metrics, "alarm metrics") * _price("cw_alarm_metric")),
    ]


def _execution_seconds(template: TemplateFacts, turn: CycleWalk, busy_shards: int, a: Assumptions) -> Amount:
    """One cycle's wall time: its Lambda durations in order, the shards' derive in waves of the Map's
    ``MaxConcurrency``, and Step Functions' own time per state."""
    derive = template.function_by_handler("derive").logical_id
    seconds = 0.0
    for logical_id in turn.invocations:
        info = template.functions.get(logical_id)
        if info is None or logical_id == derive:
            continue
        seconds += a.duration_of(info.handler)
    concurrency = template.map_concurrency(SHARD_MAP_STATE) or max(1, busy_shards)
    waves = math.ceil(busy_shards / concurrency) if busy_shards else 0
    seconds += waves * a.durations["derive"] + turn.transitions * a.seconds_per_state
    return q(round(seconds, 2), "s")


def _step_functions(
    template: TemplateFacts, load: MetricLoad, cycle_seconds: int, m: _Month, a: Assumptions
) -> list[CostLine]:
    """Standard bills each state entered; Express bills each execution and its duration at 64 MB."""
    if template.cycle_type != "EXPRESS":
        return [
            _line(
                "Step Functions Standard state transitions",
                m.transitions * m.executions * _price("sfn_standard_transition"),
            )
        ]
    seconds = _execution_seconds(template, m.counts.last, load.busy_shards, a)
    if m.counts.loop is not None:
        # Each looped cycle runs, then waits out the rest of its interval inside the execution.
        looped = _execution_seconds(template, m.counts.loop, load.busy_shards, a) + q(cycle_seconds, "s wait")
        seconds = q(m.counts.looped, "looped cycles") * looped + seconds
    gb_seconds = seconds * q(EXPRESS_BILLED_MB, "MB") / q(1024, "MB per GB")
    return [
        _line("Step Functions Express requests", m.executions * _price("sfn_express_request")),
        _line("Step Functions Express duration", gb_seconds * m.executions * _price("sfn_express_gb_second")),
    ]


def estimate(
    template: TemplateFacts,
    shape: FleetShape,
    load: MetricLoad,
    cycle_seconds: int,
    *,
    agent: AgentMetrics | None = None,
    assumptions: Assumptions | None = None,
) -> CostReport:
    """Every line item of the month at ``cycle_seconds``; the agent's lines only when ``agent`` is given."""
    a = assumptions or Assumptions()
    shards = int(template.setting("shards", "OSPREY_REGISTRY_SHARDS"))
    counts = count_cycle(template, load.busy_shards, cycle_seconds=cycle_seconds)
    m = _month(counts, cycle_seconds)
    cloudwatch = _cloudwatch(template, shape, load, m, a)
    minutes = q(SECONDS_PER_MONTH, "s") / q(60, "s")
    receives = q(template.sqs_event_sources, "queues polled") * q(
        a.sqs_receives_per_minute, "receives a minute"
    )
    lines = [
        cloudwatch[0],
        *_step_functions(template, load, cycle_seconds, m, a),
        _line("Lambda requests", m.invocations * m.executions * _price("lambda_request")),
        *_lambda_compute(template, m, a),
        *_dynamodb(shape, load, shards, m, a, cycle_seconds=cycle_seconds),
        *cloudwatch[1:],
        _line("EventBridge Scheduler invocations", m.executions * _price("scheduler_invocation")),
        _line("SQS requests (ingest queue polling)", receives * minutes * _price("sqs_request")),
    ]
    if agent is not None:
        nodes = q(shape.nodes, "nodes")
        per_node = q(agent.per_node, "metrics per node")
        puts = nodes * (q(SECONDS_PER_MONTH, "s") / q(agent.flush_seconds, "s flush"))
        lines.append(_line("Fleet: CloudWatch agent custom metrics", _tiered(nodes * per_node)))
        lines.append(_line("Fleet: CloudWatch agent PutMetricData", puts * _price("cw_put_metric_data")))
    return CostReport(tuple(lines))
