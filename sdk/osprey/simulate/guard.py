"""The production guard (:mod:`osprey_control.guard`) in the simulator: each cycle, before derivation.

The simulated control plane builds the pool the collect step builds from the registry
(:mod:`osprey_control.metrics.guard`), from what production knows and nothing more: each job's GPUs, whether it
holds them and since when, its predicted remaining time (the ``remaining_time`` signal: progress reports, else
the declared limit less the time held; never the true duration), its declared limit (what Slurm plans with),
its team, and its native place (the priority class it was submitted with). The verdict and the realized
metrics come from the production functions; the layered scheduler's derivation then reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping

from osprey.simulate.sim import JobRun, Simulator, Status
from osprey_control.derivation import (
    CompiledPolicy,
    JobMetrics,
    PoolJob,
    Reservation,
    plan_reservations,
    pool_settings,
)
from osprey_control.guard import (
    NATIVE,
    NO_RESERVATION,
    NO_YIELD,
    GuardJob,
    GuardSettings,
    GuardVerdict,
    LookJob,
    LookPool,
    Model,
    build_candidates,
    choose_order,
    echo_arrivals,
    native_priority,
    native_verdict,
    pool_signature,
    realize,
    reservation_variants,
    unwritten_priority,
)
from osprey_control.metrics import LOOKAHEAD_LIMITS, guard_settings

__all__ = ["SimulatedGuard"]


class SimulatedGuard:
    """One pool's guard for a layered scheduler: ``share_of`` names a job's share as the backend sees it,
    ``native_value`` its native priority in the backend's own terms (None: the backend has none)."""

    def __init__(
        self,
        compiled: CompiledPolicy,
        model: Model,
        *,
        capacity: Callable[[], int | None],
        share_of: Callable[[JobRun], str] = lambda run: run.job.share,
        native_value: Callable[[JobRun], float | None] = lambda run: None,
        share_usage: Callable[[float], dict[str, float]] = lambda now: {},
        share_weights: Callable[[], Mapping[str, float]] = dict,
        settings: GuardSettings | None = None,
    ) -> None:
        self.compiled = compiled
        self.model = model
        self.capacity = capacity
        self.share_of = share_of
        self.native_value = native_value
        self.share_usage = share_usage
        # Each share's Batch weightFactor (the tenants file's teams), as the scheduler applies it.
        self.share_weights = share_weights
        # The policy's spec.guard, merged as the collect step merges a pool's policies.
        self.settings = settings or guard_settings([compiled]) or GuardSettings()
        self.previous: str | None = None
        self.signature: str | None = None
        self.evaluations = 0
        # Cycles the pool was too large to look ahead (osprey_control.metrics.LOOKAHEAD_LIMITS): it stood down.
        self.skipped = 0
        self.chosen: Counter[str] = Counter()
        self.last: GuardVerdict | None = None

    @property
    def cycles(self) -> int:
        return sum(self.chosen.values())

    @property
    def stood_down(self) -> int:
        return self.chosen[NATIVE]

    def _look(self, run: JobRun, values: dict[str, float], now: float) -> LookJob:
        running = run.status in (Status.STARTING, Status.TRAINING)
        held = 0.0 if run.allocated_s is None else now - run.allocated_s
        declared = run.job.declared_runtime_s
        limit = None if declared is None else max(0.0, declared - (held if running else 0.0))
        return LookJob(
            key=run.index,
            gpus=run.job.gpus,
            running=running,
            remaining_s=values.get("remaining_time"),
            limit_s=limit,
            waited_s=held if running else now - run.job.submit_s,
            share=self.share_of(run),
            age_s=now - run.job.submit_s,
        )

    def realize(
        self,
        sim: Simulator,
        active: list[JobRun],
        metrics: dict[int, JobMetrics],
        pool: list[PoolJob],
        now: float,
    ) -> dict[int, JobMetrics]:
        capacity = self.capacity() or sim.cluster.total
        jobs = [
            GuardJob(
                self._look(run, dict(metrics[run.index].job_values), now),
                metrics[run.index],
                self.compiled,
                run.priority,
                native_priority(self.model, self.native_value(run)),
                unwritten_priority(self.model, self.native_value(run)),
            )
            for run in active
        ]
        # A job backing off is pinned with the rest when the guard stands down, but the backend would not admit
        # it now: it is left out of the lookahead.
        looks = [job.look for job, run in zip(jobs, active, strict=True) if run.status is not Status.HELD]
        signature = pool_signature(looks)
        if signature == self.signature and self.last is not None:
            # Nothing arrived, started, ended or was requeued since the last verdict: it stands.
            verdict = self.last
            self.chosen[verdict.chosen] += 1
            return self._realized(verdict, jobs, metrics, pool, capacity)
        self.signature = signature
        self.evaluations += 1
        arrivals = echo_arrivals(looks, window_s=self.settings.horizon_s)
        limit = LOOKAHEAD_LIMITS[self.model]
        if len(looks) + len(arrivals) > limit:
            # As the collect step: a pool this large is not looked ahead (its cost), and stands down.
            self.skipped += 1
            verdict = native_verdict(
                f"not looked ahead: more than {limit} jobs and predicted arrivals",
                jobs=len(looks),
                arrivals=len(arrivals),
            )
        else:
            look_pool = LookPool(
                capacity,
                (*looks, *arrivals),
                node_gpus=sim.cluster.node_size,
                share_usage=self.share_usage(now),
                share_weights=self.share_weights(),
            )
            variants = self._variants(pool, capacity)
            candidates = build_candidates(jobs, variants, model=self.model)
            verdict = choose_order(
                self.model, look_pool, candidates, previous=self.previous, settings=self.settings
            )
        self.previous = verdict.chosen
        self.chosen[verdict.chosen] += 1
        self.last = verdict
        return self._realized(verdict, jobs, metrics, pool, capacity)

    def _variants(self, pool: list[PoolJob], capacity: int) -> dict[str, Mapping[Hashable, Reservation]]:
        settings = pool_settings([self.compiled])
        if settings is None:
            return {}
        return reservation_variants(pool, capacity, yield_fraction=settings.yield_fraction)

    def _realized(
        self,
        verdict: GuardVerdict,
        jobs: list[GuardJob],
        metrics: dict[int, JobMetrics],
        pool: list[PoolJob],
        capacity: int,
    ) -> dict[int, JobMetrics]:
        # The chosen variant's reservation plan is this cycle's (the plan moves with the predicted ends); the
        # policy's own is already in the metrics, and only the chosen one is planned again.
        variants: dict[str, Mapping[Hashable, Reservation]] = {}
        settings = pool_settings([self.compiled])
        if verdict.chosen == NO_YIELD and settings is not None:
            variants[NO_YIELD] = plan_reservations(pool, capacity, yield_fraction=0.0)
        elif verdict.chosen == NO_RESERVATION:
            variants[NO_RESERVATION] = {}
        realized = realize(verdict, jobs, variants, model=self.model)
        return {index: realized.get(index, job_metrics) for index, job_metrics in metrics.items()}
