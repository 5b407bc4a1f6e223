"""Derivation throughput: one cycle over 10,000 jobs x 8 nodes under training-policy (3 built-in rules).

Run: ``.venv/bin/python bench/derive_bench.py`` (options: ``--jobs``, ``--nodes``, ``--repeat``).

A *rule evaluation* is one built-in rule applied to one node's value (jobs x nodes x rules in all): the
aggregation, normalisation, scaling and weighting that rule costs for that node. The engine's time includes
everything a cycle pays per job: aggregation, the weighted mean, damping, rounding and the explanation.

The baseline, measured in the same run on the same data, is the bare arithmetic of docs/design.md §4 written as one
inline loop with no explanation objects: the floor pure Python can reach. ``ratio`` says how far above that
floor the engine is, which stays comparable across machines where the absolute figure does not.
The last line is machine-readable: ``rule_evals_per_s=<N> jobs=<J> seconds=<S>``.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from osprey_control.derivation import JobMetrics, NodeMetrics, compile_policy, derive
from osprey_control.policy import load_policies

REPO_ROOT = Path(__file__).resolve().parent.parent
POLICY_FILE = REPO_ROOT / "policies" / "training-policy.yaml"
METRICS = ("gpu_utilization", "memory_bandwidth_utilization", "node_interconnect_latency")


def make_fleet(jobs: int, nodes: int, seed: int = 7) -> tuple[list[JobMetrics], list[int]]:
    rng = random.Random(seed)
    fleet = []
    for index in range(jobs):
        level = rng.uniform(10, 98)
        fleet.append(
            JobMetrics(
                job_id=f"job-{index}",
                nodes=tuple(
                    NodeMetrics(
                        f"i-{index:05d}-{node}",
                        {
                            "gpu_utilization": min(100.0, max(0.0, rng.gauss(level, 4))),
                            "memory_bandwidth_utilization": rng.uniform(5, 90),
                            "node_interconnect_latency": rng.uniform(40, 1800),
                        },
                    )
                    for node in range(nodes)
                ),
            )
        )
    previous = [rng.randint(0, 100) for _ in range(jobs)]
    return fleet, previous


def baseline_cycle(fleet: Sequence[JobMetrics], previous: Sequence[int]) -> list[int]:
    """The formula alone, hard-wired to training-policy's three rules (weights 0.6/0.3/0.1) and deadband 3."""
    log10 = math.log10
    floor = math.floor
    out = []
    for job, prev in zip(fleet, previous, strict=True):
        gpu = mem = lat = 0.0
        for node in job.nodes:
            values = node.values
            gpu += values["gpu_utilization"]
            mem += values["memory_bandwidth_utilization"]
            lat += values["node_interconnect_latency"]
        count = len(job.nodes)
        x_gpu = min(1.0, max(0.0, gpu / count / 100.0))
        x_mem = min(1.0, max(0.0, mem / count / 100.0))
        x_lat = min(1.0, max(0.0, lat / count / 2000.0))
        p_gpu = 10 + 90 * x_gpu
        p_mem = 5 + 95 * log10(1 + 9 * x_mem)
        p_lat = 1 + 49 * (1 - x_lat)
        target = (0.6 * p_gpu + 0.3 * p_mem + 0.1 * p_lat) / 1.0
        delta = target - prev
        if abs(delta) < 3.0:  # the deadband holds the priority
            out.append(prev)
            continue
        step = min(10.0, max(-10.0, delta))
        out.append(floor(prev + step + 0.5))
    return out


def best_of(repeat: int, run: Callable[[], list[int]]) -> tuple[float, list[int]]:
    best = math.inf
    result: list[int] = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5, help="report the best of N runs")
    args = parser.parse_args(argv)

    policy = compile_policy(load_policies([POLICY_FILE])[0])
    rules = len(policy.builtins)
    fleet, previous = make_fleet(args.jobs, args.nodes)

    def engine_cycle() -> list[int]:
        return [derive(policy, job, prev).priority for job, prev in zip(fleet, previous, strict=True)]

    engine_seconds, engine_priorities = best_of(args.repeat, engine_cycle)
    baseline_seconds, baseline_priorities = best_of(args.repeat, lambda: baseline_cycle(fleet, previous))
    mismatches = sum(a != b for a, b in zip(engine_priorities, baseline_priorities, strict=True))
    evaluations = args.jobs * args.nodes * rules

    print(f"fleet: {args.jobs} jobs x {args.nodes} nodes x {rules} rules = {evaluations} rule evaluations")
    print(f"engine:   {engine_seconds:.4f} s  ({evaluations / engine_seconds:,.0f} rule evals/s)")
    print(
        f"baseline: {baseline_seconds:.4f} s  ({evaluations / baseline_seconds:,.0f} rule evals/s, bare formula)"
    )
    print(f"ratio engine/baseline time: {engine_seconds / baseline_seconds:.2f}x")
    print(f"priorities differing from the baseline: {mismatches}")
    print(
        f"rule_evals_per_s={evaluations / engine_seconds:.0f} jobs={args.jobs} seconds={engine_seconds:.4f}"
    )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
