"""The guard's candidate orders for one pool, and what the chosen one makes each job's derivation read.

Shared by the collect step (:mod:`osprey_control.metrics.guard`) and the simulator, so both run one guard.

Candidates (all in Osprey's 0..100 priorities, which every backend's mapping keeps in order):

- ``native``: what the backend would do with Osprey writing nothing: each job at the priority that keeps its
  native place (:func:`native_priority`: its Kueue WorkloadPriorityClass or submitted ``schedulingPriority``
  mapped back; on Slurm and Batch, where every job has the same native priority, the same value for all, so the
  backend falls back to submission order).
- ``policy``: the engine's priority for each job this cycle (damped from its last one), with the
  ``reservation`` signal as the policy's own ``yieldFraction`` plans it.
- ``policy-no-yield`` (a policy with ``yieldFraction`` > 0): the same with the plan's yield turned off.
- ``policy-no-reservation`` (a policy that reads ``reservation``): the same with every job's reservation value
  neutral, i.e. the policy's other rules alone.

On Kueue, which preempts by priority, every policy candidate adds **no new preemption**: a running job is held
at least as high as any queued job (and any predicted arrival) whose native place is no higher than its own
and at least as high as the class value an arrival of its own class holds until Osprey first writes it
(:func:`unwritten_priority`), and at least as high as every running job of its class admitted after it (so a
preemption takes the victims native Kueue takes), unless the reservation plan marks it as yielding. Kueue then
preempts a running job only where its native classes would, or where the policy deliberately lets a young job
yield to a reservation.
Without it, a switch between two orders can preempt a job one way, and the next switch back the other way,
each switch throwing away the victim's work since its last checkpoint (docs/guard.md, "No new preemption").

The policy's priorities are predicted with the engine itself, without invoking custom rules (each answers
its ``fallbackPriority``, as it does when its Lambda fails): the derive step then derives for real, with the
chosen variant's reservation values, or writes the native priorities when the guard stood down.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from osprey_control.derivation import (
    RESERVATION_NOTE,
    CompiledPolicy,
    JobMetrics,
    PoolJob,
    Reservation,
    ReservationRole,
    derive,
    plan_reservations,
    reservation_of,
)
from osprey_control.guard.choose import NATIVE, Candidate, GuardVerdict
from osprey_control.guard.forward import LookJob, Model
from osprey_control.policy import Metric

__all__ = [
    "GUARD_NOTE",
    "NO_RESERVATION",
    "NO_YIELD",
    "POLICY",
    "GuardJob",
    "build_candidates",
    "native_priority",
    "priority_floors",
    "realize",
    "reservation_variants",
    "unwritten_priority",
]

# The key of a job's ``JobMetrics.notes`` (and its decision's ``inputs.notes``) that explains the guard's verdict.
GUARD_NOTE = "guard"
POLICY = "policy"
NO_YIELD = "policy-no-yield"
NO_RESERVATION = "policy-no-reservation"

_RESERVATION = Metric.RESERVATION.value
_ATTAINED = Metric.ATTAINED_SERVICE.value
# The reservation signal's value for a job that holds its GPUs (derivation.reservation: role ``running``).
_RUNNING_VALUE = 1.0
# The middle of Osprey's range: where a new Slurm job is created (job_submit.lua) and a Batch job's share sits.
_UNIFORM_NATIVE = 50
# The default mappings of docs/metrics-and-actuation.md: Kueue 0..1000, Batch/SageMaker schedulingPriority 0..9999.
_KUEUE_MAX = 1000.0
_SCHEDULING_PRIORITY_MAX = 9999.0


def native_priority(model: Model | str, backend_value: float | None) -> int:
    """The Osprey priority (0..100) that keeps a job in its native place: its native priority in the backend's
    own terms (a Workload's priority class value, a service job's submitted ``schedulingPriority``) mapped back
    through the default mapping; the same for every job where the backend has no native priority."""
    model = Model(model)
    if backend_value is None or model in (Model.SLURM, Model.FAIRSHARE):
        return _UNIFORM_NATIVE
    if model is Model.KUEUE:
        # The class value itself (through the default range): what a Workload Osprey has not written holds, so a
        # pinned job and a just-admitted one compare as native Kueue compares them. A pin in Osprey's upper half
        # (above every class value below 1000) let a queued pinned job preempt a job admitted since the last
        # cycle, still at its class value: a preemption native Kueue never makes (docs/decisions.md).
        return round(max(0.0, min(100.0, backend_value / _KUEUE_MAX * 100)))
    return max(0, min(100, round(backend_value / _SCHEDULING_PRIORITY_MAX * 100)))


def unwritten_priority(model: Model | str, backend_value: float | None) -> float | None:
    """What a job Osprey has not written holds, in Osprey's 0..100 through the default mapping: on Kueue its
    class value (so a new Workload of class 1000 sits at 100, above every running job the policy placed lower);
    None elsewhere (Slurm's submit plugin and Batch's submitted priority start jobs inside Osprey's band)."""
    if backend_value is None or Model(model) is not Model.KUEUE:
        return None
    return max(0.0, min(100.0, backend_value / _KUEUE_MAX * 100))


def priority_floors(
    jobs: Sequence[GuardJob],
    priority: Mapping[Hashable, float],
    plan: Mapping[Hashable, Reservation] | None,
    *,
    arrival: tuple[float, int] | None = None,
) -> dict[Hashable, float]:
    """Each running job's floor under ``priority`` (module docstring, "no new preemption"): the highest
    priority of a queued job whose native place is no higher than the running job's, where that is above the
    running job's own; ``arrival`` (priority, native place) counts the predicted arrivals as queued work, and an
    arrival of the job's own class holds that class's value until Osprey writes it (``GuardJob.unwritten``). A
    job the plan marks as yielding gets none, nor does a job whose policy is not deployed (Osprey writes nothing
    to it)."""
    highest = _highest_queued(jobs, priority, arrival)
    floors: dict[Hashable, float] = {}
    for job in jobs:
        key = job.look.key
        if not job.look.running or job.policy is None:
            continue
        if plan is not None and reservation_of(plan, key).role is ReservationRole.YIELDS:
            continue
        floor = _held_floor(highest, job)
        if floor is not None and floor > priority[key]:
            floors[key] = floor
    _keep_victim_order(jobs, priority, plan, floors)
    return floors


def _keep_victim_order(
    jobs: Sequence[GuardJob],
    priority: Mapping[Hashable, float],
    plan: Mapping[Hashable, Reservation] | None,
    floors: dict[Hashable, float],
) -> None:
    """Raise ``floors`` so that, within each native class, a running job is held at least as high as every
    running job admitted after it: Kueue then picks, among the jobs a preemption may take, the victims native
    Kueue picks (equal priorities: the most recently admitted first, which has the least work to lose). Without
    it a policy that ranks a long-running job low among its class makes a higher class's arrival preempt that job
    instead of a young one (a dev draw threw away 141 GPU-hours in one such preemption). A yielding job is left
    out: the plan lets it be preempted. Classes are compared by native place (Osprey's 0..100), so classes that
    map to one place (every class from 1000 up; a Workload without a class and class 500) are held as one, which
    only raises floors; a running job of unknown size is not in the lookahead and not compared."""
    chains: dict[int, list[GuardJob]] = {}
    for job in jobs:
        if not job.look.running:
            continue
        if plan is not None and reservation_of(plan, job.look.key).role is ReservationRole.YIELDS:
            continue
        chains.setdefault(job.native, []).append(job)
    for chain in chains.values():
        newer = -math.inf  # the highest priority among the running jobs of the class admitted after this one
        for job in sorted(chain, key=lambda job: (job.look.waited_s, str(job.look.key))):
            key = job.look.key
            value = max(priority[key], floors.get(key, -math.inf))
            if job.policy is not None and newer > value:
                floors[key] = value = newer
            newer = max(newer, value)


def _held_floor(highest: Callable[[int], float | None], job: GuardJob) -> float | None:
    """The higher of the queued work a job's native place protects it from and its own class's unwritten
    value (None: neither)."""
    values = [value for value in (highest(job.native), job.unwritten) if value is not None]
    return max(values) if values else None


def _highest_queued(
    jobs: Sequence[GuardJob], priority: Mapping[Hashable, float], arrival: tuple[float, int] | None
) -> Callable[[int], float | None]:
    """native place -> the highest priority among the queued jobs whose native place is no higher (None:
    no such job)."""
    queued = sorted((job.native, priority[job.look.key]) for job in jobs if not job.look.running)
    if arrival is not None:
        queued.append((arrival[1], arrival[0]))
        queued.sort()
    natives = [native for native, _ in queued]
    prefix: list[float] = []
    for _, value in queued:
        prefix.append(value if not prefix else max(prefix[-1], value))

    def highest(native: int) -> float | None:
        below = bisect_right(natives, native)
        return prefix[below - 1] if below else None

    return highest


@dataclass(frozen=True, slots=True)
class GuardJob:
    """One job of the pool: how the lookahead sees it, and what its derivation reads this cycle.

    ``policy`` is None for a job whose policy is not deployed (it keeps ``previous`` in every candidate);
    ``previous`` is its last derived priority (None: never derived); ``unwritten`` what a job of its class holds
    before Osprey first writes it (:func:`unwritten_priority`; None: inside Osprey's band).
    """

    look: LookJob
    metrics: JobMetrics
    policy: CompiledPolicy | None
    previous: int | None
    native: int
    unwritten: float | None = None


def _predicted(job: GuardJob, reservation: Reservation | None) -> int:
    if job.policy is None:
        return job.previous if job.previous is not None else _UNIFORM_NATIVE
    metrics = job.metrics
    if reservation is not None:
        metrics = replace(metrics, job_values={**metrics.job_values, _RESERVATION: reservation.value})
    return derive(job.policy, metrics, job.previous).priority


def _once_running(job: GuardJob, queued_priority: int, reservation_read: bool) -> float:
    """A queued job's priority once it holds GPUs: what the policy aims for a running job (its attained
    service saturated, its reservation role ``running``), reached within a cycle or two of its start."""
    assert job.policy is not None
    values = {**job.metrics.job_values, _ATTAINED: max(1.0, job.metrics.job_values.get(_ATTAINED, 0.0))}
    if reservation_read:
        values[_RESERVATION] = _RUNNING_VALUE
    target = derive(job.policy, replace(job.metrics, job_values=values), queued_priority).target
    return float(queued_priority if target is None else round(target))


def reservation_variants(
    pool: Sequence[PoolJob], capacity_gpus: int | None, *, yield_fraction: float
) -> dict[str, Mapping[Hashable, Reservation]]:
    """The reservation plans the candidates differ by: the policy's own, without its yield (when it has one),
    and none at all (an empty plan: every job unaffected, the signal neutral)."""
    variants: dict[str, Mapping[Hashable, Reservation]] = {
        POLICY: plan_reservations(pool, capacity_gpus, yield_fraction=yield_fraction)
    }
    if yield_fraction > 0:
        variants[NO_YIELD] = plan_reservations(pool, capacity_gpus, yield_fraction=0.0)
    variants[NO_RESERVATION] = {}
    return variants


def _arrival(jobs: Sequence[GuardJob]) -> tuple[float, int]:
    """A predicted arrival's priority (the policy's ``initialPriority``) and native place (unknown: the
    commonest among the pool's jobs)."""
    initial = next((job.policy.initial_priority for job in jobs if job.policy is not None), _UNIFORM_NATIVE)
    natives = [job.native for job in jobs]
    usual = max(set(natives), key=natives.count) if natives else _UNIFORM_NATIVE
    return float(initial), usual


def build_candidates(
    jobs: Sequence[GuardJob],
    variants: Mapping[str, Mapping[Hashable, Reservation]],
    *,
    model: Model | str | None = None,
) -> list[Candidate]:
    """The pool's candidates: ``native``, then one per reservation variant (``{POLICY: plan, ...}``), or
    ``policy`` alone, as each job's metrics stand, when the pool reads no reservation; on Kueue (``model``)
    with each running job at its floor (:func:`priority_floors`)."""
    held = model is not None and Model(model) is Model.KUEUE
    arriving = _arrival(jobs)
    initial, usual = arriving
    candidates = [Candidate(NATIVE, {job.look.key: float(job.native) for job in jobs}, float(usual))]
    plans: Mapping[str, Mapping[Hashable, Reservation] | None] = variants or {POLICY: None}
    for name, plan in plans.items():
        priority: dict[Hashable, float] = {}
        once_running: dict[Hashable, float] = {}
        for job in jobs:
            reservation = None if plan is None else reservation_of(plan, job.look.key)
            predicted = _predicted(job, reservation)
            priority[job.look.key] = float(predicted)
            if not job.look.running and job.policy is not None:
                once_running[job.look.key] = _once_running(job, predicted, plan is not None)
        if held:
            # A job that starts within the lookahead is held the same way from its next cycle on (against the
            # queue as it stands now: the lookahead does not re-plan).
            highest = _highest_queued(jobs, priority, arriving)
            for job in jobs:
                floor = _held_floor(highest, job) if job.look.key in once_running else None
                if floor is not None:
                    once_running[job.look.key] = max(once_running[job.look.key], floor)
            priority.update(priority_floors(jobs, priority, plan, arrival=arriving))
        # A predicted arrival, once running, sits where the policy puts the pool's running jobs.
        lifted = sorted(priority[job.look.key] for job in jobs if job.look.running and job.policy is not None)
        arrival = lifted[len(lifted) // 2] if lifted else None
        candidates.append(Candidate(name, priority, float(initial), once_running, arrival))
    return candidates


def realize(
    verdict: GuardVerdict,
    jobs: Sequence[GuardJob],
    variants: Mapping[str, Mapping[Hashable, Reservation]],
    *,
    model: Model | str | None = None,
) -> dict[Hashable, JobMetrics]:
    """Each job's metrics as its derivation must read them under ``verdict``: the chosen variant's reservation
    values and notes, or, when the guard stood down, its native priority pinned; the verdict in its notes. On
    Kueue (``model``), a running job under the policy's order gets its floor (:func:`priority_floors`)."""
    note = verdict.describe()
    plan = variants.get(verdict.chosen)
    floors: dict[Hashable, float] = {}
    if model is not None and Model(model) is Model.KUEUE and not verdict.stood_down:
        predicted = {
            job.look.key: float(_predicted(job, None if plan is None else reservation_of(plan, job.look.key)))
            for job in jobs
        }
        floors = priority_floors(jobs, predicted, plan, arrival=_arrival(jobs))
    realized: dict[Hashable, JobMetrics] = {}
    for job in jobs:
        metrics = job.metrics
        notes = {**metrics.notes, GUARD_NOTE: note}
        values = dict(metrics.job_values)
        if plan is not None:
            reservation = reservation_of(plan, job.look.key)
            values[_RESERVATION] = reservation.value
            notes[RESERVATION_NOTE] = reservation.describe()
        pinned = job.native if verdict.stood_down else None
        floor = floors.get(job.look.key)
        realized[job.look.key] = replace(
            metrics,
            job_values=values,
            notes=notes,
            pinned_priority=pinned,
            priority_floor=None if floor is None else math.ceil(floor),
        )
    return realized
