"""Planner search speed: the 1T row of Megatron SC21 Table 1 (128 layers, hidden 25600, 160 heads, sequence
2048, global batch 3072) on 8-GPU A100-80GB nodes, from 64 to 3,072 GPUs.

Run: ``.venv/bin/python bench/plan_bench.py`` (options: ``--gpus 64,128,...``, ``--repeat``).

For each size it prints ``gpus=<N> candidates=<C> seconds=<S>``: the pruned search (``planner.search``),
``candidates`` the plans it evaluated, ``seconds`` the median wall time over ``--repeat`` runs. The baselines
are measured in the same run: the exhaustive, unpruned enumeration (``search_exhaustive``: every valid plan,
nothing shared) on the same size, with the ratio and whether both find the same best plan, and the cost of
evaluating one plan, so ``seconds / candidates`` can be read against it. Issue #7's target: the 3,072-GPU
search in under 1 second (printed, never asserted: timing belongs here, not in unit tests). The search is
the one ``osprey plan`` runs by default (issue #18): every recompute mode, sequence parallelism on and off,
the distributed optimizer on and off (``Knobs()``); ``--fp8`` adds FP8 on an H100 cluster (p5.48xlarge).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from osprey_control.planner import (
    Knobs,
    ModelSpec,
    Plan,
    Precision,
    SearchOptions,
    cluster,
    evaluate,
    search,
    search_exhaustive,
)

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


def _key(best: object) -> object:
    """A best plan's layout and options (None when nothing fits), for comparing two searches."""
    if best is None:
        return None
    return (best.plan, best.recompute, best.sequence_parallel, best.distributed_optimizer, best.precision)  # type: ignore[attr-defined]


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
    parser.add_argument("--fp8", action="store_true", help="H100 (p5.48xlarge) with bf16 and fp8 searched")
    args = parser.parse_args(argv)
    knobs = Knobs(precision=(Precision.BF16, Precision.FP8)) if args.fp8 else Knobs()
    options = SearchOptions(knobs=knobs)
    gpu = {"instance_type": "p5.48xlarge"} if args.fp8 else {"gpu": "A100-80GB", "network_gbits": 1600.0}
    repeat = max(1, args.repeat)

    print(
        f"model: {MODEL.params / 1e9:.0f}B parameters ({MODEL.layers} layers, hidden {MODEL.hidden}, "
        f"{MODEL.heads} heads, seq {MODEL.seq}, global batch {MODEL.global_batch}); "
        + (
            "p5.48xlarge (H100, 3200 Gb/s per node)"
            if args.fp8
            else "A100-80GB, 8 per node, 1600 Gb/s per node"
        )
    )
    print(
        "options searched: recompute x sequence parallelism x distributed optimizer"
        + (" x precision (bf16, fp8)" if args.fp8 else "")
    )
    one = cluster(3072, gpus_per_node=8, **gpu)
    plan = Plan(tp=8, pp=64, dp=6, micro_batch=1)
    evaluations = 200
    per_plan = _median_seconds(lambda: [evaluate(MODEL, one, plan) for _ in range(evaluations)], repeat)
    print(f"baseline: one plan evaluation = {per_plan / evaluations * 1e6:.1f} us")
    slowest = 0.0
    for gpus in args.gpus:
        target = cluster(gpus, gpus_per_node=8, **gpu)
        result = search(MODEL, target, options)
        seconds = _median_seconds(lambda target=target: search(MODEL, target, options), repeat)  # type: ignore[misc]
        baseline = search_exhaustive(MODEL, target, options)
        baseline_s = _median_seconds(lambda target=target: search_exhaustive(MODEL, target, options), repeat)  # type: ignore[misc]
        same = _key(result.best) == _key(baseline.best)
        best = f"{result.best.plan.key()} {result.best.recompute}" if result.best else "none fits"
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
