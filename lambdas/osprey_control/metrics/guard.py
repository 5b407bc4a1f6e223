"""The guard (:mod:`osprey_control.guard`) in the collect step: per pool, the order the cycle derives.

Run right after the ``reservation`` signal (:mod:`osprey_control.metrics.reservation`), over every shard's jobs
at once, for the same reason: a pool's verdict needs all of its jobs. Each pool (one backend's cluster or job
queue) gets its backend's admission rule, its GPUs and, per job, what the registry and this collection know;
the guard runs the candidate orders forward and this module replaces each job's collected metrics by what the
chosen order makes its derivation read (the chosen variant's ``reservation`` values, or, when the guard stands
down, its native priority pinned). The derive step needs nothing else: the metrics travel in the shard's stored
collection, the engine honours the pin (reason ``guarded``), and the notes reach the decision's
``inputs.notes`` for ``osprey explain`` and ``osprey history``.

Which pools are guarded:

- the backend has a native order Osprey can stand down to: EKS (Kueue), Slurm, Batch (fair share) and the
  SageMaker training queue; SageMaker training jobs created directly have no priority at all: no guard;
- the pool's deployed policies all enable it (``spec.guard.enabled``), merged conservatively by
  :func:`guard_settings`;
- its capacity is known: the largest ``spec.reservation.capacityGpus`` its policies declare. Without one the
  lookahead cannot tell a full pool from an idle one, so the pool is not guarded and each job's
  ``notes["guard"]`` says why;
- at least one of its jobs has a known size: with none, every candidate would predict the same.

A pool too large for the lookahead's time (:data:`LOOKAHEAD_LIMITS`, per model), or one the step's time runs out before,
is not looked ahead and **stands down** to its native order (``native_verdict``): an order not run forward is not
known to lose no goodput. It counts as stood down in ``GuardStoodDown`` and ``osprey report``.

Each job enters the lookahead as :mod:`osprey_control.metrics.guard_pool` builds it from the registry and this
collection (a job of unknown size cannot be placed: left out of the lookahead, but pinned with its pool when
the guard stands down, since the native order holds only if every job keeps its place), with the recent arrivals
echoed forward (:func:`osprey_control.guard.echo_arrivals`); the simulator builds the same pool from the
simulated registry (``osprey.simulate.guard``).

The order chosen last cycle (hysteresis) and whether its verdict still stands (the pool unchanged since) are read
back from the pool's decisions (:mod:`osprey_control.metrics.guard_record`): nothing is kept between cycles but
the registry.

One pool's failure never stops the cycle: it is logged and counted, and that pool's jobs keep the metrics they
had (the policy's order, as before the guard existed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from osprey_control.derivation import CompiledPolicy, JobMetrics, PolicyLookup, Reservation, pool_settings
from osprey_control.guard import (
    GUARD_NOTE,
    NATIVE,
    POLICY,
    GuardJob,
    GuardSettings,
    GuardVerdict,
    LookPool,
    Model,
    build_candidates,
    choose_order,
    echo_arrivals,
    native_priority,
    native_verdict,
    realize,
    reservation_variants,
    unwritten_priority,
)
from osprey_control.metrics.collector import CollectionResult
from osprey_control.metrics.guard_pool import (
    SHARE_DECAY_S,
    look_job,
    metrics_of,
    node_gpus,
    previous_priority,
    share_usage,
)
from osprey_control.metrics.guard_record import judged_signature, last_verdict, previous_order, stamp
from osprey_control.metrics.reservation import CompiledPolicies, group_by_pool, pool_jobs
from osprey_control.registry import Backend, JobKey, JobRecord

__all__ = ["LOOKAHEAD_LIMITS", "PoolVerdict", "add_guard", "guard_settings", "pool_bound_ms"]

logger = logging.getLogger(__name__)

# Each backend's admission rule as the lookahead models it; a backend not here has no native priority order.
_MODELS: Mapping[str, Model] = {
    Backend.EKS.value: Model.KUEUE,
    Backend.SLURM.value: Model.SLURM,
    Backend.BATCH.value: Model.FAIRSHARE,
    Backend.SAGEMAKER_QUEUED.value: Model.SAGEMAKER_QUEUE,
}
_SHARED = frozenset({Model.FAIRSHARE, Model.SAGEMAKER_QUEUE})
# The most jobs and predicted arrivals a pool may have and still be looked ahead, per model, and what each costs
# at most: bench/guard_bench.py's deliberately hard pool (nearly every queued job blocked) on one core of the
# 2-core development machine, 2026-12-07, 10,000 jobs and ~1,700 echoed arrivals: Kueue 23 s, Batch and the
# SageMaker queue 4 s; Slurm's backfill, whose cost grows with the square of the pool, 8 s at 300 and 26 s at 500.
# The collect function has one vCPU (1,769 MB, infra/osprey_infra/control_plane.py) and 60 s for the whole
# fleet; a pool over its limit is not looked ahead and stands down (its jobs' notes say so), and no pool starts
# once the step's time could not cover it at twice the measured cost per job (pool_bound_ms: room for a Lambda's
# slower CPU), nor less than POOL_BOUND_MS.
LOOKAHEAD_LIMITS: Mapping[Model, int] = {
    Model.KUEUE: 12_000,
    Model.FAIRSHARE: 12_000,
    Model.SAGEMAKER_QUEUE: 12_000,
    Model.SLURM: 300,
}
_MS_PER_JOB: Mapping[Model, float] = {
    Model.KUEUE: 4.0,
    Model.FAIRSHARE: 0.7,
    Model.SAGEMAKER_QUEUE: 0.7,
    Model.SLURM: 54.0,
}
POOL_BOUND_MS = 5000.0
# The recorded signature of a stand-down without a lookahead: it matches no pool, so the next cycle judges the pool
# afresh (a limit raised by a deploy, or time left, lets it look ahead at once).
UNJUDGED = "unjudged"
# The reason of a verdict that stands (its recorded text is kept as the job's note).
STANDS = "the pool has not changed since this order was chosen"


def pool_bound_ms(model: Model, jobs: int) -> float:
    """The time the collect step keeps for looking one pool of ``jobs`` ahead under ``model`` (a bound, not a
    forecast: twice the cost per job measured on the development machine, and at least POOL_BOUND_MS)."""
    return max(POOL_BOUND_MS, _MS_PER_JOB[model] * min(jobs, LOOKAHEAD_LIMITS[model]))


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """What the guard did for one pool this cycle: a ``verdict``, or why not (``skipped``), or its ``error``."""

    backend: str
    pool: str  # the cluster or job queue
    jobs: int
    verdict: GuardVerdict | None = None
    skipped: str | None = None
    error: str | None = None

    @property
    def chosen(self) -> str | None:
        return None if self.verdict is None else self.verdict.chosen

    @property
    def stood_down(self) -> bool:
        return self.verdict is not None and self.verdict.stood_down

    @property
    def failed(self) -> bool:
        return self.error is not None


def guard_settings(policies: Iterable[CompiledPolicy]) -> GuardSettings | None:
    """The guard's settings for a pool whose jobs have ``policies`` (one policy: its own ``spec.guard``); None
    when there is none or any of them disables the guard.

    Several policies in one pool merge conservatively, each knob towards standing down more readily: enabled
    only if all enable it, the smallest goodput tolerance, the longest horizon, the most samples.
    """
    listed = list(policies)
    if not listed or not all(policy.guard_enabled for policy in listed):
        return None
    return GuardSettings(
        horizon_s=max(policy.guard_horizon_s for policy in listed),
        samples=max(policy.guard_samples for policy in listed),
        goodput_tolerance=min(policy.guard_goodput_tolerance for policy in listed),
    )


def _noted(members: Iterable[JobRecord], result: CollectionResult, note: str) -> dict[JobKey, JobMetrics]:
    return {
        record.key: replace(metrics, notes={**metrics.notes, GUARD_NOTE: note})
        for record in members
        if (metrics := result.metrics.get(record.key)) is not None
    }


def _stood_down(
    model: Model, members: Iterable[JobRecord], result: CollectionResult, verdict: GuardVerdict, now: datetime
) -> dict[JobKey, JobMetrics]:
    """Every collected job of the pool pinned at its native priority, with ``verdict`` in its notes and the
    native order stamped under :data:`UNJUDGED` (for ``osprey report`` and the next cycle's hysteresis): no
    lookahead ran, so there is nothing else to realize."""
    notes = {GUARD_NOTE: verdict.describe(), **stamp(NATIVE, now, UNJUDGED)}
    return {
        record.key: replace(
            metrics,
            notes={**metrics.notes, **notes},
            pinned_priority=native_priority(model, record.native_priority),
        )
        for record in members
        if (metrics := result.metrics.get(record.key)) is not None
    }


def _guard_pool(
    model: Model,
    members: Sequence[JobRecord],
    compiled: Mapping[JobKey, CompiledPolicy | None],
    result: CollectionResult,
    now: datetime,
    *,
    in_time: bool = True,
) -> tuple[GuardVerdict | str, dict[JobKey, JobMetrics]]:
    """The pool's verdict and each job's realized metrics, or why it is not guarded (and the notes saying so).
    ``in_time`` False: the step has no time left to look the pool ahead, so a pool the guard is for stands
    down."""
    deployed = {policy.name: policy for policy in compiled.values() if policy is not None}
    if not deployed:
        return "no deployed policy", {}
    settings = guard_settings(deployed.values())
    if settings is None:
        off = sorted(name for name, policy in deployed.items() if not policy.guard_enabled)
        note = f"not guarded: spec.guard.enabled is false in {', '.join(off)}"
        return "disabled", _noted(members, result, note)
    capacities = [policy.capacity_gpus for policy in deployed.values() if policy.capacity_gpus is not None]
    if not capacities:
        note = (
            "not guarded: the pool's GPUs are unknown; set spec.reservation.capacityGpus in "
            f"{', '.join(sorted(deployed))} to the GPUs of this cluster or queue"
        )
        return "capacity unknown", _noted(members, result, note)
    sized = [record for record in members if record.requested_gpus is not None]
    if not sized:
        # Nothing to run forward: every candidate would predict the same, and a tie stands down.
        note = "not guarded: no job of this pool has a known GPU count, so no order can be predicted"
        return "sizes unknown", _noted(members, result, note)
    if not in_time:
        verdict = native_verdict(
            "not looked ahead: the collect step's time ran out before this pool", jobs=len(sized)
        )
        return verdict, _stood_down(model, members, result, verdict, now)
    jobs = [
        GuardJob(
            look_job(record, metrics_of(record, result).job_values, now),
            metrics_of(record, result),
            compiled[record.key],
            previous_priority(record),
            native_priority(model, record.native_priority),
            unwritten_priority(model, record.native_priority),
        )
        for record in sized
    ]
    looks = [job.look for job in jobs]
    arrivals = echo_arrivals(looks, window_s=settings.horizon_s)
    if len(looks) + len(arrivals) > LOOKAHEAD_LIMITS[model]:
        # Not looked ahead, so no order is known to lose no goodput: the pool keeps its native order.
        reason = (
            f"not looked ahead: {len(looks)} jobs and {len(arrivals)} predicted arrivals, more than the "
            f"{LOOKAHEAD_LIMITS[model]} the lookahead runs on {model.value} within the collect step's time"
        )
        verdict = native_verdict(reason, jobs=len(looks), arrivals=len(arrivals))
        return verdict, _stood_down(model, members, result, verdict, now)
    reserving = pool_settings(deployed.values())
    variants: Mapping[str, Mapping[Hashable, Reservation]] = {}
    if reserving is not None:
        # The same plan add_reservations made (same jobs, same capacity), so ``policy`` realizes what it stored.
        plan_jobs = pool_jobs(sized, compiled, result, now)
        variants = reservation_variants(
            plan_jobs, reserving.capacity_gpus, yield_fraction=reserving.yield_fraction
        )
    capacity = max(capacities)
    signature = judged_signature(looks, deployed.values(), capacity, settings)
    recorded = last_verdict(members)
    # The candidates' names: native, and the policy's variants (the policy alone when it reads no reservation).
    names = {NATIVE, *variants} if variants else {NATIVE, POLICY}
    if recorded is not None and recorded.signature == signature and recorded.order in names and recorded.note:
        # Nothing arrived, started, ended or was redeployed since that verdict: it stands, and its text with it.
        verdict = GuardVerdict(
            recorded.order, STANDS, (), settings.horizon_s, settings.samples, jobs=len(looks)
        )
        note = recorded.note
    else:
        pool = LookPool(
            capacity,
            (*looks, *arrivals),
            node_gpus=node_gpus(members),
            share_decay_s=SHARE_DECAY_S,
            share_usage=share_usage(members, now) if model in _SHARED else {},
        )
        candidates = build_candidates(jobs, variants, model=model)
        previous = previous_order(members, recorded)
        verdict = choose_order(model, pool, candidates, previous=previous, settings=settings)
        note = verdict.describe()
    realized: Mapping[Hashable, JobMetrics] = realize(verdict, jobs, variants, model=model)
    notes = {GUARD_NOTE: note, **stamp(verdict.chosen, now, signature)}
    updated: dict[JobKey, JobMetrics] = {}
    for record in members:
        if record.key not in result.metrics:
            continue  # derive collects it itself, without the guard (it was not in this collection)
        metrics = realized.get(record.key)
        if metrics is None:  # of unknown size: outside the lookahead, but it keeps its native place too
            metrics = result.metrics[record.key]
            pinned = native_priority(model, record.native_priority) if verdict.stood_down else None
            metrics = replace(metrics, pinned_priority=pinned)
        updated[record.key] = replace(metrics, notes={**metrics.notes, **notes})
    return verdict, updated


def add_guard(
    records: Sequence[JobRecord],
    result: CollectionResult,
    policies: PolicyLookup,
    *,
    now: datetime,
    allows: Callable[[float], bool] | None = None,
) -> list[PoolVerdict]:
    """Run the guard for every pool of ``records`` and replace each guarded job's ``result.metrics`` by what
    the pool's verdict makes its derivation read (module docstring). One entry per pool of a backend with a
    native order, smallest pools first (so a cycle short of time guards the most pools), then by backend and
    pool. ``allows(ms)``: whether work of up to ``ms`` may still start (the collect step's deadline; None: no
    limit); a pool it refuses is not looked ahead this cycle and stands down to its native order, as a pool too
    large for the lookahead does."""
    lookup = CompiledPolicies(policies)
    verdicts: list[PoolVerdict] = []
    pools = sorted(group_by_pool(records).items(), key=lambda item: (len(item[1]), item[0]))
    for (backend, name), members in pools:
        model = _MODELS.get(backend)
        if model is None:
            continue
        # Out of time, a pool the guard is for is not looked ahead and, as a pool too large, stands down.
        in_time = allows is None or allows(pool_bound_ms(model, len(members)))
        compiled = {record.key: lookup.of(record) for record in members}
        try:
            outcome, updated = _guard_pool(model, members, compiled, result, now, in_time=in_time)
        except Exception as error:
            # One pool's guard must never stop the cycle: its jobs keep the policy's order.
            logger.exception(
                "guard failed; the pool keeps the policy's order this cycle",
                extra={"backend": backend, "pool": name, "jobs": len(members)},
            )
            verdicts.append(
                PoolVerdict(backend, name, len(members), error=f"{type(error).__name__}: {error}")
            )
            continue
        result.metrics.update(updated)
        if isinstance(outcome, str):
            verdicts.append(PoolVerdict(backend, name, len(members), skipped=outcome))
            continue
        logger.info(
            "guard verdict",
            extra={
                "backend": backend,
                "pool": name,
                "jobs": outcome.jobs,
                "arrivals": outcome.arrivals,
                "chosen": outcome.chosen,
                "stood_down": outcome.stood_down,
                "stands": outcome.reason == STANDS,
                "reason": outcome.reason,
            },
        )
        skipped = None if in_time else "out of time"
        verdicts.append(PoolVerdict(backend, name, len(members), verdict=outcome, skipped=skipped))
    return verdicts
