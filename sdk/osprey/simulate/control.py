"""The Osprey control plane in the simulator: every cycle, every active job through the production engine.

Each cycle (the policy's ``derivationIntervalSeconds`` unless overridden) every active job's simulated
metrics (:mod:`~osprey.simulate.telemetry`) go through :func:`osprey_control.derivation.engine.derive`
with its applied priority, so damping, deadband and rounding are the engine's own. What is written to the
backend is decided by the production apply rule itself, :func:`osprey_control.backends.actuation.prefilter` over the
job's record: a priority is written when it differs from the one the backend holds (``applied_priority``),
so a new job's first priority is written on its first cycle. The layered schedulers (:mod:`~osprey.simulate.layered`) turn the written priority into
their backend's own value with the production mapping.

Node metrics are read at the deployed cadence (:mod:`osprey_control.metrics.cadence`): a job's series are
read on its turn, one cycle in ``metrics_every_n_cycles`` (the mean of the N periods since the last read, so
the noise of a read shrinks by sqrt(N)), and on the other cycles its last read values are used again, as the
collector reuses its last decision's values. A job that has just started training is read at once (its last
decision used no node metric). Job-level metrics are fresh every cycle (they come from the registry).

Osprey itself never admits, places or preempts anything: the backend does, from the values written.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from osprey.simulate.guard import SimulatedGuard
from osprey.simulate.sim import JobRun, Simulator, Status
from osprey.simulate.telemetry import job_values, node_metrics
from osprey_control.backends import PriorityChange, prefilter, write_phase
from osprey_control.contract import OspreyBlock
from osprey_control.derivation import (
    RESERVATION_NOTE,
    JobMetrics,
    NodeMetrics,
    PoolJob,
    plan_reservations,
    pool_settings,
    reservation_of,
)
from osprey_control.derivation import engine as derivation_engine
from osprey_control.metrics import DEFAULT_EVERY_N_CYCLES, is_due
from osprey_control.policy import Metric, PriorityDerivationPolicy
from osprey_control.registry import Backend, JobKey, JobRecord, JobStatus

__all__: list[str] = []

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class OspreyControl:
    """Derives and decides what to write; the caller writes it to its backend model."""

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        backend: Backend,
        cycle_s: float | None = None,
        noise: float = 3.0,
        seed: int = 0,
        metrics_every_n_cycles: int = DEFAULT_EVERY_N_CYCLES,
    ) -> None:
        # The pool's GPUs when the policy does not declare them (set by the scheduler model from its cluster).
        self.default_capacity_gpus: int | None = None
        self.policy = policy
        self.compiled = derivation_engine.compile_policy(policy)
        self.interval_s = float(cycle_s if cycle_s is not None else policy.spec.derivation_interval_seconds)
        self.noise = noise
        self.metrics_every_n_cycles = metrics_every_n_cycles
        self._nodes: dict[int, tuple[NodeMetrics, ...]] = {}  # each job's last read node metrics
        self._rng = random.Random(f"osprey-telemetry/{seed}")
        self.backend = backend
        self._backends = frozenset({backend})
        self._records: dict[
            int, JobRecord
        ] = {}  # the registry's record of each job, as the apply step reads it
        self.derivations = 0
        self.writes = 0
        # The production guard (osprey_control.guard), set by the layered scheduler that knows its backend model.
        self.guard: SimulatedGuard | None = None
        # What a job Osprey has not written holds, in Osprey's terms (the apply step's write order reads it from
        # the EKS applier): set by the layered scheduler whose backend holds a native priority.
        self.unwritten: Callable[[JobRun], float | None] = lambda run: None

    def admit(self, run: JobRun) -> None:
        """A job was submitted: its ``prev`` is the policy's ``initialPriority`` (docs/design.md §4)."""
        if run.priority is None:
            run.priority = self.compiled.initial_priority
        self._records[run.index] = JobRecord(
            backend=self.backend,
            native_id=run.job.job_id,
            name=run.job.job_id,
            block=OspreyBlock(priority_derivation_profile=self.policy.name),
            status=JobStatus.PENDING,
            status_time=_EPOCH,
        )

    def _read_nodes(self, run: JobRun, now: float) -> tuple[NodeMetrics, ...]:
        if run.status is not Status.TRAINING:
            self._nodes.pop(run.index, None)
            return ()
        every = self.metrics_every_n_cycles
        due = run.index not in self._nodes or is_due(
            JobKey(self.backend, run.job.job_id),
            _EPOCH + timedelta(seconds=now),
            every_n_cycles=every,
            cycle_seconds=max(1, round(self.interval_s)),
        )
        if due:
            self._nodes[run.index] = node_metrics(run, self._rng, self.noise / math.sqrt(every))
        return self._nodes[run.index]

    def _pool(self, active: list[JobRun], values: dict[int, dict[str, float]], now: float) -> list[PoolJob]:
        """The reservation plan's pool (osprey_control.metrics.reservation builds the same from the registry)."""
        may_yield = self.compiled.lets_jobs_yield
        return [
            PoolJob(
                run.index,
                run.job.gpus,
                running=run.status in (Status.STARTING, Status.TRAINING),
                remaining_s=values[run.index].get("remaining_time"),
                rank=float(run.priority if run.priority is not None else self.compiled.initial_priority),
                waited_s=values[run.index].get("queue_wait", 0.0),
                held_s=0.0 if run.allocated_s is None else now - run.allocated_s,
                attempts=max(1, len(run.intervals)),
                may_yield=may_yield,
            )
            for run in active
            if run.status is not Status.HELD  # backing off: the backend would not admit it now
        ]

    def _capacity(self) -> int | None:
        settings = pool_settings([self.compiled])
        if settings is not None and settings.capacity_gpus is not None:
            return settings.capacity_gpus
        return self.default_capacity_gpus

    def _add_reservation(
        self, active: list[JobRun], values: dict[int, dict[str, float]], pool: list[PoolJob]
    ) -> dict[int, dict[str, str]]:
        """The production reservation plan: every active job's ``reservation`` value, and its note."""
        settings = pool_settings([self.compiled])
        assert settings is not None  # only called when the policy reads the signal
        plan = plan_reservations(pool, self._capacity(), yield_fraction=settings.yield_fraction)
        notes: dict[int, dict[str, str]] = {}
        for run in active:
            reservation = reservation_of(plan, run.index)
            values[run.index][Metric.RESERVATION.value] = reservation.value
            notes[run.index] = {RESERVATION_NOTE: reservation.describe()}
        return notes

    def cycle(self, sim: Simulator, now: float) -> list[JobRun]:
        """Derive every active job; return the jobs whose applied priority must be written now."""
        changes: list[PriorityChange] = []
        # prefilter returns the changes it was given: map each back to its run by identity (job ids of a
        # user's CSV need not be unique).
        owner: dict[int, JobRun] = {}
        active = sim.active()
        values = {run.index: job_values(run, now) for run in active}
        pool = self._pool(active, values, now)
        notes = self._add_reservation(active, values, pool) if self.compiled.reads_reservation else {}
        metrics_of = {
            run.index: JobMetrics(
                run.job.job_id, self._read_nodes(run, now), values[run.index], notes=notes.get(run.index, {})
            )
            for run in active
        }
        if self.guard is not None:
            metrics_of = self.guard.realize(sim, active, metrics_of, pool, now)
        for run in active:
            metrics = metrics_of[run.index]
            decision = derivation_engine.derive(self.compiled, metrics, run.priority)
            self.derivations += 1
            if decision.priority != run.priority:
                run.priority = decision.priority
                run.priority_changes += 1
            change = PriorityChange(self._records[run.index], decision.priority)
            changes.append(change)
            owner[id(change)] = run
        todo, _unchanged = prefilter(changes, self._backends)
        # The apply step's order (osprey_control.backends.write_order): the backend acts on each write as it
        # lands, so the order decides what the moments between two cycles preempt.
        todo.sort(
            key=lambda change: write_phase(
                holds_gpus=owner[id(change)].status in (Status.STARTING, Status.TRAINING),
                applied=change.record.applied_priority,
                priority=change.priority,
                held=self.unwritten(owner[id(change)]),
            )
        )
        to_write = []
        for change in todo:
            # The backend accepted the write: the registry now records it as applied.
            run = owner[id(change)]
            self._records[run.index] = change.record.model_copy(update={"applied_priority": change.priority})
            to_write.append(run)
        self.writes += len(to_write)
        return to_write
