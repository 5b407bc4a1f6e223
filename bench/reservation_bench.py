"""The reservation plan's cost: one pool of 10,000 jobs (the scale the derive step is budgeted for).

Run: ``.venv/bin/python bench/reservation_bench.py`` (options: ``--jobs``, ``--repeat``).

The collect step plans every pool once per cycle (:func:`osprey_control.derivation.plan_reservations`) before
the derive shards run, so its time adds to the collect step's. The baseline, measured in the same run on the
same jobs, is deriving every one of them with the default policy (the work the derive shards do for the same
jobs): ``ratio`` says what fraction of a cycle's engine time the plan adds. A 10,000-job pool is the worst
case: a cycle's jobs are usually split over several pools, each planned alone.
The last line is machine-readable: ``plan_seconds=<S> derive_seconds=<S> ratio=<R> jobs=<J>``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

from osprey_control.derivation import JobMetrics, PoolJob, compile_policy, derive, plan_reservations
from osprey_control.policy import load_policies

REPO_ROOT = Path(__file__).resolve().parent.parent
POLICY_FILE = REPO_ROOT / "policies" / "default-policy.yaml"


def make_pool(jobs: int, seed: int = 11) -> list[PoolJob]:
    """A busy pool: a third running, the rest queued, sizes 1-64 GPUs, run times 10 min to 2 days."""
    rng = random.Random(seed)
    pool = []
    for index in range(jobs):
        running = index % 3 == 0
        pool.append(
            PoolJob(
                key=f"job-{index}",
                gpus=rng.choice((1, 2, 4, 8, 8, 16, 32, 64)),
                running=running,
                remaining_s=None if rng.random() < 0.1 else rng.uniform(600, 172_800),
                rank=rng.uniform(0, 100),
                waited_s=rng.uniform(0, 86_400),
                held_s=rng.uniform(0, 7200) if running else 0.0,
                may_yield=True,
            )
        )
    return pool


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    pool = make_pool(args.jobs)
    capacity = sum(job.gpus for job in pool if job.running) + 8
    policy = compile_policy(load_policies([POLICY_FILE])[0])
    metrics = [
        JobMetrics(str(job.key), (), {"remaining_time": job.remaining_s or 0.0, "queue_wait": job.waited_s})
        for job in pool
    ]

    plan_seconds = derive_seconds = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        plan = plan_reservations(pool, capacity, yield_fraction=0.1)
        plan_seconds = min(plan_seconds, time.perf_counter() - started)
        started = time.perf_counter()
        for job in metrics:
            derive(policy, job, 50)
        derive_seconds = min(derive_seconds, time.perf_counter() - started)
    tracemalloc.start()
    plan_reservations(pool, capacity, yield_fraction=0.1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    roles: dict[str, int] = {}
    for reservation in plan.values():
        roles[reservation.role.value] = roles.get(reservation.role.value, 0) + 1
    print(f"pool: {args.jobs} jobs, {capacity} GPUs; roles {dict(sorted(roles.items()))}")
    print(f"plan:   {plan_seconds:.4f} s, peak {peak / 1e6:.1f} MB")
    print(f"derive: {derive_seconds:.4f} s (the default policy over the same jobs)")
    print(
        f"plan_seconds={plan_seconds:.4f} derive_seconds={derive_seconds:.4f} "
        f"ratio={plan_seconds / derive_seconds:.3f} jobs={args.jobs}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
