"""The monthly bill of one Osprey deployment, line by line: template facts x fleet x assumptions x prices.

A month is 30 days (2,592,000 s). What is counted, per cycle:

- Step Functions: the states one cycle enters (:func:`osprey.cost.template.walk`); the shard Map runs one
  iteration per *non-empty* shard (``PlanShards`` leaves empty shards out). Below 60 s the schedule still starts
  one execution a minute, which loops ``60 // S`` cycles through its Wait/Pass states.
- Lambda: one invocation per Task the walk enters, at the template's memory and architecture; durations are
  :class:`Assumptions` (not in any artifact).
- GetMetricData: the series the collector builds for the synthetic fleet with the policy's needs (node series
  plus the runtime's progress series of each running job whose policy reads ``remaining_time``), in
  ``ceil(series / 500)`` calls per shard, each job read on one cycle in N (the derive function's
  ``OSPREY_METRICS_EVERY_N_CYCLES``; 1 when unset).
- DynamoDB: the lease acquire and release (two updates); per changed job, fenced by the lease token (a
  transaction with a ``ConditionCheck`` on the lease item, itself billed as a transactional write), (``record_decision`` writes only when the derived
  priority or the decision's reason changes) a transactional write of the job item and its history item plus
  the ``active-jobs`` index copy (ALL projection) and the ``apply-pending`` entry (keys only), then the apply
  step's update of the job item, its index copy and the removal of that entry. Reads: one COUNT query per
  shard, one index query per non-empty shard, one pending-index query per shard, one consistent get per
  changed job in derive and again in apply.
- Custom metrics: the runtime's EMF series (latency per running host; progress and step time per running job,
  from its lead process) and the control plane's own EMF series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from osprey.cost.arithmetic import Amount, format_number, money, q
from osprey.cost.fleet import RUNTIME_PER_HOST, RUNTIME_PER_JOB, AgentMetrics, FleetShape, MetricLoad
from osprey.cost.prices import PRICES, Price, custom_metric_tiers
from osprey.cost.template import CycleWalk, Facts, TemplateFacts, walk

__all__ = [
    "CONTROL_PLANE_SERIES",
    "SECONDS_PER_MONTH",
    "Assumptions",
    "CostLine",
    "CostReport",
    "CycleCounts",
    "count_cycle",
    "estimate",
]

SECONDS_PER_MONTH = 30 * 86_400

# EMF series the control plane publishes every cycle without per-job metrics (lambdas/osprey_control/telemetry.py,
# osprey_handlers apply and finish): per policy in use DerivedPriority and PriorityChange, plus these. Series
# that appear only on failures (CustomRuleFailures, DerivationErrors, CyclesFailed) are billed by the hour they
# exist and are left out.
CONTROL_PLANE_SERIES = (
    "JobsEvaluated",
    "MetricsMissing",
    "CollectionLatencyMs",
    "PrioritiesApplied",
    "ApplyFailures",
    "CycleDurationMs",
    "CyclesSucceeded",
)


@dataclass(frozen=True, slots=True)
class Assumptions:
    """What no artifact says; every figure here is an estimate, stated in docs/deploy.md."""

    # Warm duration in seconds per handler module (osprey_handlers.<module>.handler).
    durations: dict[str, float] = field(
        default_factory=lambda: {
            "lease": 0.1,
            "shards": 0.2,
            "derive": 0.5,
            "apply": 0.3,
            "plan": 1.0,
            "finish": 0.1,
            "eks_discovery": 0.5,
        }
    )
    job_item_kb: int = 2  # the job item with its last decision
    history_item_kb: int = 2  # a history item also holds the decision
    changed_fraction: float = 0.25  # share of jobs whose applied priority changes in a cycle
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


def count_cycle(
    template: TemplateFacts, busy_shards: int, *, distributed: bool, cycle_seconds: int
) -> CycleCounts:
    """Walk the cycle definition: lease acquired, ``busy_shards`` Map iterations, the cycle succeeds."""
    document: dict[str, object] = {
        "lease": {"acquired": True},
        "plan": {"distributed": distributed},
        "finish": {"outcome": "succeeded"},
    }
    iterations = {"DeriveShards": busy_shards, "DeriveShardsDistributed": busy_shards}
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
            module = info.handler.removeprefix("osprey_handlers.").split(".")[0]
            key = (info.memory_mb, a.durations.get(module, 0.5))
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


def _dynamodb(shape: FleetShape, load: MetricLoad, shards: int, m: _Month, a: Assumptions) -> list[CostLine]:
    job_wru = q(math.ceil(a.job_item_kb), "WRU job")
    index_wru = q(math.ceil(a.job_item_kb), "WRU index")
    fence = q(1, "WRU lease check")
    transactional = q(2, "transactional")
    decision = transactional * (job_wru + q(math.ceil(a.history_item_kb), "WRU history") + fence) + index_wru
    changed = q(round(shape.jobs * a.changed_fraction, 2), "changed jobs")
    pending_entry = q(1, "WRU pending entry")
    applied = transactional * (job_wru + fence) + index_wru + pending_entry
    writes = q(2, "WRU lease") + changed * (decision + pending_entry + applied)
    busiest = max(load.jobs_per_shard.values(), default=0)
    query_rru = q(0.5 * max(1, math.ceil(a.job_item_kb * busiest / 4)), "RRU")
    reads = (
        q(shards, "shard counts") * q(0.5, "RRU")
        + q(load.busy_shards, "shard queries") * query_rru
        + q(shards, "pending queries") * q(0.5, "RRU")
        + changed * q(2, "gets") * q(math.ceil(a.job_item_kb / 4), "RRU consistent get")
        # The apply step reads the lease token before each applier call (Batch, and SageMaker/EKS chunks).
        + q(2, "fence reads") * q(1, "RRU")
    )
    return [
        _line("DynamoDB on-demand writes", writes * m.cycles * _price("dynamodb_write")),
        _line("DynamoDB on-demand reads", reads * m.cycles * _price("dynamodb_read")),
    ]


def _cloudwatch(
    template: TemplateFacts, shape: FleetShape, load: MetricLoad, m: _Month, a: Assumptions
) -> list[CostLine]:
    series = q(load.node_series, "node series") + q(load.progress_series, "progress series")
    every_n = int(
        template.function_by_handler("derive").environment.get("OSPREY_METRICS_EVERY_N_CYCLES", "1")
    )
    _average_series, average_calls = load.per_cycle(every_n)
    reads = m.cycles
    if every_n > 1:
        reads = m.cycles / q(every_n, "cycles per read")
    metrics = (
        q(load.running_hosts, "hosts") * q(len(RUNTIME_PER_HOST), "latency series")
        + q(load.running_jobs, "running jobs") * q(len(RUNTIME_PER_JOB), "lead series")
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
            f"CloudWatch GetMetricData ({format_number(round(average_calls, 2))} calls a cycle)",
            series * reads * _price("cw_get_metric_data"),
        ),
        _line("CloudWatch custom metrics (runtime and control plane EMF)", _tiered(metrics)),
        _line("CloudWatch Logs ingestion (control plane)", log_gb * _price("cw_logs_ingestion")),
        _line("CloudWatch dashboards", q(template.dashboards, "dashboards") * _price("cw_dashboard")),
        _line("CloudWatch alarms", q(template.alarm_metrics, "alarm metrics") * _price("cw_alarm_metric")),
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
    threshold = int(template.setting("shards", "OSPREY_DISTRIBUTED_MAP_THRESHOLD"))
    counts = count_cycle(
        template, load.busy_shards, distributed=shape.jobs > threshold, cycle_seconds=cycle_seconds
    )
    m = _month(counts, cycle_seconds)
    cloudwatch = _cloudwatch(template, shape, load, m, a)
    minutes = q(SECONDS_PER_MONTH, "s") / q(60, "s")
    receives = q(template.sqs_event_sources, "queues polled") * q(
        a.sqs_receives_per_minute, "receives a minute"
    )
    lines = [
        cloudwatch[0],
        _line(
            "Step Functions Standard state transitions",
            m.transitions * m.executions * _price("sfn_standard_transition"),
        ),
        _line("Lambda requests", m.invocations * m.executions * _price("lambda_request")),
        *_lambda_compute(template, m, a),
        *_dynamodb(shape, load, shards, m, a),
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
