"""Planner search speed: the 1T row of Megatron SC21 Table 1 (128 layers, hidden 25600, 160 heads, sequence
2048, global batch 3072) on 8-GPU A100-80GB nodes, from 64 to 3,072 GPUs.

Run: ``.venv/bin/python bench/plan_bench.py`` (options: ``--gpus 64,128,...``, ``--repeat``).

For each size it prints ``gpus=<N> candidates=<C> seconds=<S>``: the pruned search (``planner.search``),
``candidates`` the plans it evaluated, ``seconds`` the median wall time over ``--repeat`` runs. The baselines
are measured in the same run: the exhaustive, unpruned enumeration (``search_exhaustive``: every valid plan,
nothing shared) on the same size, with the ratio and whether both find the same best plan, and the cost of
evaluating one plan, so ``seconds / candidates`` can be read against it. Issue #7's target: the 3,072-GPU
search in under 1 second (printed, never asserted: timing belongs here, not in unit tests).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from osprey_control.planner import ModelSpec, Plan, cluster, evaluate, search
from osprey_control.planner.search import search_exhaustive

DEFAULT_GPUS = (64, 128, 256, 512, 1024, 2048, 3072)
MODEL = ModelSpec(layers=128, hidden=25600, heads=160, seq=2048, vocab=51200, global_batch=3072)
TARGET_S = 1.0


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _gpus(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--gpus: expected comma-separated multiples of 8, got {text!r}"
        ) from None
    if not values or any(v < 8 or v % 8 for v in values):
        raise argparse.ArgumentTypeError(f"--gpus: expected comma-separated multiples of 8, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Planner search speed on the SC21 1T row.")
    parser.add_argument("--gpus", type=_gpus, default=list(DEFAULT_GPUS), help="comma-separated GPU counts")
    parser.add_argument("--repeat", type=int, default=5, help="runs per size (median reported)")
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)

    print(
        f"model: {MODEL.params / 1e9:.0f}B parameters ({MODEL.layers} layers, hidden {MODEL.hidden}, "
        f"{MODEL.heads} heads, seq {MODEL.seq}, global batch {MODEL.global_batch}); A100-80GB, 8 per node, "
        "1600 Gb/s per node"
    )
    one = cluster(3072, gpu="A100-80GB", gpus_per_node=8, network_gbits=1600)
    plan = Plan(tp=8, pp=64, dp=6, micro_batch=1)
    evaluations = 200
    per_plan = _median_seconds(lambda: [evaluate(MODEL, one, plan) for _ in range(evaluations)], repeat)
    print(f"baseline: one plan evaluation = {per_plan / evaluations * 1e6:.1f} us")
    slowest = 0.0
    for gpus in args.gpus:
        target = cluster(gpus, gpu="A100-80GB", gpus_per_node=8, network_gbits=1600)
        result = search(MODEL, target)
        seconds = _median_seconds(lambda target=target: search(MODEL, target), repeat)  # type: ignore[misc]
        baseline = search_exhaustive(MODEL, target)
        baseline_s = _median_seconds(lambda target=target: search_exhaustive(MODEL, target), repeat)  # type: ignore[misc]
        same = (result.best.plan if result.best else None) == (baseline.best.plan if baseline.best else None)
        best = result.best.plan.key() if result.best else "none fits"
        print(f"gpus={gpus} candidates={result.evaluated} seconds={seconds:.4f}")
        print(
            f"  baseline exhaustive: candidates={baseline.evaluated} seconds={baseline_s:.4f} "
            f"ratio={baseline_s / seconds:.1f}x same_best={'yes' if same else 'NO'} best={best}"
        )
        if gpus == max(args.gpus):
            slowest = seconds
    largest = max(args.gpus)
    if largest == 3072:
        verdict = "meets" if slowest < TARGET_S else "MISSES"
        print(f"3072-GPU search: {slowest:.4f} s ({verdict} issue #7's {TARGET_S:g} s target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
