"""The guard's cost: one pool of 10,000 jobs (the scale the control plane's steps are budgeted for), per model.

Run: ``.venv/bin/python bench/guard_bench.py`` (options: ``--jobs``, ``--models``, ``--repeat``).

The collect step runs the guard (:func:`osprey_control.guard.choose_order`) once per pool and cycle, after the
reservation plan, inside the collect Lambda's 60 s. The baseline, measured in the same run on the same jobs, is
deriving every one of them with the default policy (the derive shards' engine work for the same jobs): the
``ratio`` says how many cycles' worth of engine time the guard adds. A 10,000-job pool is the worst case: a
cycle's jobs are usually split over several pools, each guarded alone.

One line per model, machine-readable:
``model=<m> guard_seconds=<S> derive_seconds=<S> ratio=<R> jobs=<J> limit=<the model's LOOKAHEAD_LIMITS>
budget_seconds=<collect timeout> within=<yes|no>``. By default each model's pool is 10,000 jobs, or, on a model the
collect step looks ahead only up to fewer jobs and predicted arrivals (Slurm), the most it does look ahead.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

from osprey_control.derivation import JobMetrics, PoolJob, compile_policy, derive
from osprey_control.guard import (
    GuardJob,
    GuardSettings,
    LookJob,
    LookPool,
    Model,
    build_candidates,
    choose_order,
    echo_arrivals,
    native_priority,
    reservation_variants,
)
from osprey_control.metrics import LOOKAHEAD_LIMITS, pool_bound_ms
from osprey_control.policy import load_policies

REPO_ROOT = Path(__file__).resolve().parent.parent
POLICY_FILE = REPO_ROOT / "policies" / "default-policy.yaml"
# The collect Lambda's timeout (infra/osprey_infra/control_plane.py): the guard shares it with the collection.
COLLECT_TIMEOUT_S = 60.0


def make_pool(jobs: int, model: Model, seed: int = 11) -> tuple[list[GuardJob], list[PoolJob], int]:
    """A busy pool: a third running, the rest queued, sizes 1-64 GPUs, run times 10 min to 2 days."""
    rng = random.Random(seed)
    policy = compile_policy(load_policies([POLICY_FILE])[0])
    guard_jobs: list[GuardJob] = []
    pool: list[PoolJob] = []
    for index in range(jobs):
        running = index % 3 == 0
        gpus = rng.choice((1, 2, 4, 8, 8, 16, 32, 64))
        remaining = None if rng.random() < 0.1 else rng.uniform(600, 172_800)
        waited = rng.uniform(0, 7200) if running else rng.uniform(0, 86_400)
        key = f"job-{index}"
        values = {"queue_wait": waited, "requested_gpus": float(gpus)}
        if remaining is not None:
            values["remaining_time"] = remaining
        look = LookJob(
            key,
            gpus,
            running,
            remaining,
            limit_s=None if remaining is None else remaining * 2,
            waited_s=waited,
            share=f"team-{index % 4}",
            age_s=waited,
        )
        native = native_priority(model, float(rng.choice((0, 100, 1000))))
        guard_jobs.append(GuardJob(look, JobMetrics(key, (), values), policy, rng.randint(0, 100), native))
        pool.append(
            PoolJob(key, gpus, running, remaining, rank=rng.uniform(0, 100), waited_s=waited, may_yield=True)
        )
    capacity = sum(job.gpus for job in pool if job.running) + 8
    return guard_jobs, pool, capacity


def arrivals_of(jobs: list[GuardJob]) -> int:
    """The predicted arrivals the guard adds to these jobs (what the lookahead limit counts with them)."""
    return len(echo_arrivals([job.look for job in jobs], window_s=GuardSettings().horizon_s))


def largest_looked_ahead(model: Model, target: int = 10_000) -> int:
    """``target`` jobs, or fewer where the model looks ahead fewer: the most whose pool is within its limit."""
    limit = LOOKAHEAD_LIMITS[model]
    arrivals = arrivals_of(make_pool(target, model)[0])
    size = target if target + arrivals <= limit else int(limit * target / (target + arrivals))
    while size > 1 and size + arrivals_of(make_pool(size, model)[0]) > limit:
        size -= 1
    return size


def guard_once(model: Model, jobs: list[GuardJob], pool: list[PoolJob], capacity: int) -> str:
    settings = GuardSettings()
    looks = [job.look for job in jobs]
    look_pool = LookPool(capacity, (*looks, *echo_arrivals(looks, window_s=settings.horizon_s)))
    variants = reservation_variants(pool, capacity, yield_fraction=0.1)
    verdict = choose_order(model, look_pool, build_candidates(jobs, variants), settings=settings)
    return verdict.chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="jobs per pool (default: 10,000, or on a model looked ahead only up to fewer, as many as it is)",
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--models", default=",".join(model.value for model in Model))
    args = parser.parse_args(argv)
    policy = compile_policy(load_policies([POLICY_FILE])[0])
    for name in args.models.split(","):
        model = Model(name)
        size = args.jobs if args.jobs is not None else largest_looked_ahead(model)
        jobs, pool, capacity = make_pool(size, model)
        looked = len(jobs) + arrivals_of(jobs) <= LOOKAHEAD_LIMITS[model]
        guard_seconds = derive_seconds = float("inf")
        chosen = ""
        for _ in range(args.repeat):
            started = time.perf_counter()
            chosen = guard_once(model, jobs, pool, capacity)
            guard_seconds = min(guard_seconds, time.perf_counter() - started)
            started = time.perf_counter()
            for job in jobs:
                derive(policy, job.metrics, 50)
            derive_seconds = min(derive_seconds, time.perf_counter() - started)
        tracemalloc.start()
        guard_once(model, jobs, pool, capacity)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"pool: {size} jobs and {arrivals_of(jobs)} echoed arrivals, {capacity} GPUs, model {name}: "
            f"chose {chosen}, peak {peak / 1e6:.1f} MB; the collect step keeps "
            f"{pool_bound_ms(model, size) / 1000:.1f} s for it and looks it ahead: {'yes' if looked else 'no'}"
        )
        print(
            f"model={name} guard_seconds={guard_seconds:.3f} derive_seconds={derive_seconds:.3f} "
            f"ratio={guard_seconds / derive_seconds:.2f} jobs={size} limit={LOOKAHEAD_LIMITS[model]} "
            f"budget_seconds={COLLECT_TIMEOUT_S:g} "
            f"within={'yes' if guard_seconds < COLLECT_TIMEOUT_S / 2 else 'no'}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
