"""Which order a pool gets this cycle: the candidates run forward, scored on the pessimistic outcome.

Seed 000's loop, per pool and cycle: *survey* (the registry's pool: running jobs' predicted ends, queued jobs'
sizes and predicted run times, the pool's GPUs), *dive* (candidate orders: the backend's native order, the
policy's, the policy's with its reservation knobs at other settings), *evaluate* (each run forward through the
backend's admission rule, :mod:`osprey_control.guard.forward`), *capture* (score), and *adapt* only when the score
improves, otherwise stay.

The rule (docs/policies.md, "The guard"):

1. Run times are predictions, so every candidate is run over ``samples`` draws of them: the first as predicted,
   the others with each job's predicted time scaled by a log-normal error (``runtime_error_sigma``). Every
   candidate sees the same draws, and the draws depend only on the pool (its jobs' keys), so the verdict is
   deterministic for a given registry state.
2. A candidate **qualifies** when, in every draw, its predicted goodput is at least the native order's less
   ``goodput_tolerance`` (relative): it is predicted to lose no useful work in any draw; and it starts every job
   the native order starts within the horizon no later than native does. A lookahead re-planned every cycle
   otherwise puts off, cycle after cycle, the job the native order drains the pool for, each time for a gain
   inside the horizon, until the drain lands where no lookahead saw it (docs/decisions.md, "No job later than
   native").
3. Among those, the one with the least *worst-draw* mean wait is chosen. The native order always qualifies, so
   when no other does, the guard **stands down** to it.
4. Hysteresis: the order chosen last cycle stays while it qualifies and waits no more than ``switch_margin``
   (relative, plus ``switch_floor_s``) above the best; a switch costs every job a priority change.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from osprey_control.guard.forward import ForwardOutcome, LookJob, LookPool, Model, run_forward

__all__ = [
    "NATIVE",
    "Candidate",
    "CandidateScore",
    "GuardSettings",
    "GuardVerdict",
    "choose_order",
    "echo_arrivals",
    "native_verdict",
    "pool_signature",
    "runtime_prior",
]

NATIVE = "native"


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """The guard's knobs, each documented in docs/policies.md with why it has its default."""

    horizon_s: float = 6 * 3600.0
    samples: int = 3
    runtime_error_sigma: float = 0.5
    # A job whose time is the pool's prior (it declared none and reports no progress) is far less certain.
    unknown_runtime_sigma: float = 1.0
    goodput_tolerance: float = 0.002
    min_wait_gain: float = 0.05
    switch_margin: float = 0.05
    switch_floor_s: float = 60.0
    # The lookahead covers the horizon or the next ``max_events`` predicted ends and arrivals, whichever comes
    # first: what bounds its cost on a pool of thousands of jobs (bench/guard_bench.py).
    max_events: int = 256

    def __post_init__(self) -> None:
        if not self.horizon_s > 0:
            raise ValueError(f"horizon_s: must be > 0 seconds, got {self.horizon_s}")
        if self.samples < 1:
            raise ValueError(f"samples: must be at least 1, got {self.samples}")
        if self.max_events < 1:
            raise ValueError(f"max_events: must be at least 1, got {self.max_events}")
        for name in (
            "runtime_error_sigma",
            "unknown_runtime_sigma",
            "goodput_tolerance",
            "min_wait_gain",
            "switch_margin",
            "switch_floor_s",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {value}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One order: each job's priority *as the backend holds it* (higher first), predicted arrivals included
    (``default`` for any job not listed)."""

    name: str
    priority: Mapping[Hashable, float]
    default: float = 0.0
    # A queued job's priority once it starts (a policy lifts a job that holds GPUs); none: unchanged.
    once_running: Mapping[Hashable, float] = field(default_factory=dict)
    arrival_once_running: float | None = None  # a predicted arrival's, once it starts


@dataclass(frozen=True, slots=True)
class CandidateScore:
    name: str
    wait_s: float  # the worst draw's predicted mean wait
    goodput: float  # the worst draw's predicted goodput
    qualifies: bool
    preemptions: int = 0  # the worst draw's
    delayed: int = 0  # the worst draw's jobs that start later than under the native order
    why: str = ""  # what keeps it from qualifying ("" when it does)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "wait_s": round(self.wait_s, 1),
            "goodput": round(self.goodput, 4),
            "qualifies": self.qualifies,
            "preemptions": self.preemptions,
            "delayed": self.delayed,
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    chosen: str
    reason: str
    scores: tuple[CandidateScore, ...]
    horizon_s: float
    samples: int
    jobs: int = 0
    arrivals: int = 0

    @property
    def stood_down(self) -> bool:
        """The pool keeps its backend's native order this cycle."""
        return self.chosen == NATIVE

    def score(self, name: str) -> CandidateScore:
        return next(score for score in self.scores if score.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "stood_down": self.stood_down,
            "reason": self.reason,
            "horizon_s": self.horizon_s,
            "samples": self.samples,
            "jobs": self.jobs,
            "arrivals": self.arrivals,
            "candidates": [score.to_dict() for score in self.scores],
        }

    def describe(self) -> str:
        """One line for ``osprey explain``: what was chosen, why, and every candidate's prediction."""
        verb = "stood down to the native order" if self.stood_down else f"chose {self.chosen}"
        if not self.scores:  # nothing was run forward (native_verdict)
            return f"{verb}: {self.reason}"
        scored = "; ".join(
            f"{s.name}: wait {s.wait_s / 60:.1f} min, goodput {s.goodput:.3f}"
            + ("" if s.qualifies else f" ({s.why})")
            for s in self.scores
        )
        return f"{verb}: {self.reason} [{scored}; {self.horizon_s / 3600:g} h ahead, {self.samples} draws]"


def native_verdict(reason: str, *, jobs: int = 0, arrivals: int = 0) -> GuardVerdict:
    """The native order for a pool no candidate was run forward for (``reason`` says why): an order that was
    not looked ahead is not known to lose no goodput, so none qualifies and the guard stands down."""
    return GuardVerdict(NATIVE, reason, (), 0.0, 0, jobs=jobs, arrivals=arrivals)


def pool_signature(jobs: Sequence[LookJob]) -> str:
    """What the pool is, for deciding whether to guard again: which jobs it holds and which of them run.

    Between two cycles with the same signature no job arrived, started, ended or was requeued, so no GPU was
    freed and nothing could start: the order chosen last stands and the lookahead is not run again (a stance
    is re-evaluated when the pool changes, at no cost on a quiet cycle).
    """
    digest = hashlib.sha256()
    for key, running in sorted((repr(job.key), job.running) for job in jobs if job.arrive_in_s <= 0):
        digest.update(f"{key}/{int(running)};".encode())
    return digest.hexdigest()[:16]


def runtime_prior(jobs: Sequence[LookJob]) -> float | None:
    """What a job of unknown time is taken to need: the median total time of the pool's jobs whose time is
    known (a running job's time held plus its predicted remaining, a queued job's predicted time); None when
    no job's time is known. A job that never ends would hold its GPUs for the whole lookahead, and every order
    that starts one would look like it keeps GPUs busy for ever."""
    totals = sorted(
        job.remaining_s + (job.waited_s if job.running else 0.0)
        for job in jobs
        if job.remaining_s is not None and job.arrive_in_s <= 0
    )
    if not totals:
        return None
    middle = len(totals) // 2
    return totals[middle] if len(totals) % 2 else (totals[middle - 1] + totals[middle]) / 2


def echo_arrivals(jobs: Sequence[LookJob], *, window_s: float) -> list[LookJob]:
    """Predicted arrivals for the next ``window_s``: the recent past again. Each job submitted within the last
    ``window_s`` (``age_s``) has a twin arriving ``window_s`` after it did, asking the same GPUs for the same
    total time, so the predicted arrivals have the recent rate, sizes and times and need no model of their own."""
    twins: list[LookJob] = []
    for job in jobs:
        if job.age_s is None or not 0 <= job.age_s < window_s or job.arrive_in_s > 0:
            continue
        held = job.waited_s if job.running else 0.0
        total = None if job.remaining_s is None else job.remaining_s + held
        limit = None if job.limit_s is None else job.limit_s + held
        twins.append(
            LookJob(
                key=("arrival", job.key),
                gpus=job.gpus,
                running=False,
                remaining_s=total,
                limit_s=limit,
                share=job.share,
                utilization=job.utilization,
                arrive_in_s=max(1e-3, window_s - job.age_s),
            )
        )
    return twins


def _with_prior(pool: LookPool) -> tuple[LookPool, frozenset[Hashable]]:
    """The pool with every unknown time replaced by :func:`runtime_prior` (so the draws scale it too), and the
    keys of the jobs whose time is that prior."""
    prior = pool.unknown_runtime_s if pool.unknown_runtime_s is not None else runtime_prior(pool.jobs)
    unknown = frozenset(job.key for job in pool.jobs if job.remaining_s is None)
    if prior is None or not unknown:
        return pool, frozenset()
    jobs = tuple(
        job
        if job.remaining_s is not None
        else replace(job, remaining_s=max(prior - job.waited_s, 0.25 * prior) if job.running else prior)
        for job in pool.jobs
    )
    return replace(pool, jobs=jobs, unknown_runtime_s=prior), unknown


def _horizon(pool: LookPool, settings: GuardSettings) -> float:
    """The lookahead's span: the horizon, or the instant of the ``max_events``-th predicted end or arrival."""
    instants: list[float] = []
    for job in pool.jobs:
        if job.arrive_in_s > 0:
            instants.append(job.arrive_in_s)
        elif job.running and job.remaining_s is not None:
            instants.append(job.remaining_s)
    instants.sort()
    if len(instants) <= settings.max_events:
        return settings.horizon_s
    return max(60.0, min(settings.horizon_s, instants[settings.max_events - 1]))


def _draws(pool: LookPool, unknown: frozenset[Hashable], settings: GuardSettings) -> list[LookPool]:
    """The pool as predicted, then ``samples - 1`` pools with every run time scaled by a random error (larger
    for a time that is only the pool's prior). Every candidate sees the same draws."""
    draws = [pool]
    if settings.samples == 1:
        return draws
    digest = hashlib.sha256()
    for job in pool.jobs:
        digest.update(repr(job.key).encode())
    rng = random.Random(digest.hexdigest())
    for _ in range(settings.samples - 1):
        jobs = []
        for job in pool.jobs:
            sigma = settings.unknown_runtime_sigma if job.key in unknown else settings.runtime_error_sigma
            factor = math.exp(rng.gauss(0.0, sigma))
            if job.remaining_s is None:
                jobs.append(job)
            else:
                jobs.append(replace(job, remaining_s=job.remaining_s * factor))
        draws.append(replace(pool, jobs=tuple(jobs)))
    return draws


def choose_order(
    model: Model | str,
    pool: LookPool,
    candidates: Sequence[Candidate],
    *,
    previous: str | None = None,
    settings: GuardSettings | None = None,
) -> GuardVerdict:
    """The order ``pool`` gets this cycle (module docstring). ``candidates`` must include :data:`NATIVE`."""
    settings = settings or GuardSettings()
    names = [candidate.name for candidate in candidates]
    if NATIVE not in names:
        raise ValueError(f"candidates must include {NATIVE!r}, got {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"candidate names must be unique, got {names}")
    known, unknown = _with_prior(pool)
    horizon = _horizon(known, settings)
    draws = _draws(known, unknown, settings)
    # Candidates that put the pool in the same order predict the same: each order is run once.
    by_order: dict[tuple[object, ...], list[ForwardOutcome]] = {}
    outcomes: dict[str, list[ForwardOutcome]] = {}
    for candidate in candidates:
        signature = _order_signature(Model(model), pool, candidate)
        if signature not in by_order:
            by_order[signature] = [
                run_forward(
                    model,
                    draw,
                    candidate.priority,
                    horizon_s=horizon,
                    default_priority=candidate.default,
                    once_running=candidate.once_running,
                    arrival_once_running=candidate.arrival_once_running,
                )
                for draw in draws
            ]
        outcomes[candidate.name] = by_order[signature]
    native = outcomes[NATIVE]
    keep = 1.0 - settings.goodput_tolerance
    scores = []
    for name in names:
        runs = outcomes[name]
        # In every draw: no less goodput than native, and a real gain in wait (else a reorder is churn); the
        # order chosen last cycle keeps its place with no loss of wait (hysteresis: no flapping at the bar).
        gain = 1.0 if name == previous else 1.0 - settings.min_wait_gain
        pairs = list(zip(runs, native, strict=True))
        delayed = max(_delayed(run, base) for run, base in pairs)
        why = "" if name == NATIVE else _refusal(pairs, keep, gain, delayed)
        worst = max(runs, key=lambda run: run.mean_wait_s)
        scores.append(
            CandidateScore(
                name,
                worst.mean_wait_s,
                min(run.goodput for run in runs),
                not why,
                max(run.preemptions for run in runs),
                delayed,
                why,
            )
        )
    chosen, reason = _pick(scores, previous, settings)
    arrivals = sum(1 for job in pool.jobs if job.arrive_in_s > 0)
    return GuardVerdict(
        chosen,
        reason,
        tuple(scores),
        horizon,
        settings.samples,
        jobs=len(pool.jobs) - arrivals,
        arrivals=arrivals,
    )


def _refusal(
    pairs: Sequence[tuple[ForwardOutcome, ForwardOutcome]], keep: float, gain: float, delayed: int
) -> str:
    """Why a candidate does not qualify against native's outcomes in the same draws ("" when it does)."""
    if any(run.goodput < base.goodput * keep - 1e-12 for run, base in pairs):
        return "would lose goodput"
    if delayed:
        return f"would start {delayed} job{'s' if delayed > 1 else ''} later than native"
    if any(run.mean_wait_s > base.mean_wait_s * gain and run is not base for run, base in pairs):
        return "gains too little wait"
    return ""


def _delayed(run: ForwardOutcome, base: ForwardOutcome) -> int:
    """How many jobs the native order (``base``) starts within the horizon that ``run`` starts later or not at
    all (a second's tolerance: the same instant computed along two paths)."""
    return sum(1 for key, start in base.starts.items() if run.starts.get(key, math.inf) > start + 1.0)


def _order_signature(model: Model, pool: LookPool, candidate: Candidate) -> tuple[object, ...]:
    """What of a candidate's priorities the backend's rule can see: the dense rank of each job's priority (and
    of the arrivals' default). Slurm and Batch compare only waiting jobs; Kueue also the running ones, whose
    priorities decide preemption."""
    values = [
        candidate.priority.get(job.key, candidate.default)
        for job in pool.jobs
        if model is Model.KUEUE or not job.running
    ]
    values.append(candidate.default)
    if model is Model.KUEUE:
        values.extend(candidate.once_running.get(job.key, -1.0) for job in pool.jobs if not job.running)
        values.append(-1.0 if candidate.arrival_once_running is None else candidate.arrival_once_running)
    dense = {value: rank for rank, value in enumerate(sorted(set(values)))}
    return tuple(dense[value] for value in values)


def _pick(scores: Sequence[CandidateScore], previous: str | None, settings: GuardSettings) -> tuple[str, str]:
    qualifying = [score for score in scores if score.qualifies]
    best = min(qualifying, key=lambda score: (score.wait_s, score.name != NATIVE))
    native = next(score for score in scores if score.name == NATIVE)
    kept = next((score for score in qualifying if score.name == previous), None)
    if kept is not None and kept.name != best.name:
        slack = best.wait_s * settings.switch_margin + settings.switch_floor_s
        if kept.wait_s <= best.wait_s + slack:
            return kept.name, (
                f"kept last cycle's order: within {settings.switch_margin:.0%} of {best.name}'s wait"
            )
    if best.name != NATIVE:
        return best.name, (
            f"waits least ({best.wait_s / 60:.1f} min against native {native.wait_s / 60:.1f} min), "
            "loses no goodput and starts no job later than native in any draw"
        )
    refused = [f"{score.name} {score.why}" for score in scores if not score.qualifies]
    if refused:
        return NATIVE, f"{'; '.join(refused)} in some draw; no other order waits less"
    return NATIVE, "no other order waits less"
