"""Scheduling benchmark: every scheduler on the Alibaba 2023 trace (real cluster and a small one for
contention), the LLM gang workload and the seed's case.

Run: ``.venv/bin/python bench/sim_bench.py`` (options below; ``--json FILE`` keeps every number,
``--plot DIR`` writes the PNGs of docs/scheduling.md).

One line per scheduler and workload: ``scheduler=<name> workload=<w> mean_wait_s=<x> p95_wait_s=<x>
idle_pct=<x> goodput=<x>``. To stay under 5 minutes on 2 cores the trace replays with a 300 s Osprey cycle
(the policy says 60 s; ``--trace-cycle`` changes it) and the whole 34-day window is replayed once per
scheduler; the LLM workloads (offered load 1.0, and 1.3 for an overloaded run) use the policy's own 60 s
cycle. ``--variants`` adds kueue and osprey without preemption and osprey under the shipped aging policy.
The last line is ``total_seconds=<S>``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from osprey_control.policy import load_policies
from osprey_control.simulate import (
    SCHEDULERS,
    TRACE_DIR,
    Kueue,
    Osprey,
    Result,
    Scheduler,
    Workload,
    llm_workload,
    make_scheduler,
    read_alibaba,
    seed_workload,
    simulate,
)
from osprey_control.simulate.runner import load_default_policy


@dataclass(frozen=True)
class Case:
    label: str
    workload: Workload
    cycle_s: float | None


def _cases(args: argparse.Namespace) -> list[Case]:
    cases = []
    if (TRACE_DIR / "alibaba_openb2023_gpu_replay.csv").is_file() and not args.no_trace:
        if not args.no_real_cluster:
            cases.append(Case("alibaba-real", read_alibaba(limit=args.trace_limit), args.trace_cycle))
        small = read_alibaba(gpus=args.trace_gpus, limit=args.trace_limit)
        cases.append(Case(f"alibaba-{args.trace_gpus}gpu", small, args.trace_cycle))
    else:
        print(f"note: no trace in {TRACE_DIR}; skipping the Alibaba workload", file=sys.stderr)
    for label, load in (("llm", args.llm_load), (f"llm-load{args.llm_heavy_load:g}", args.llm_heavy_load)):
        generated = llm_workload(seed=args.seed, jobs=args.llm_jobs, gpus=args.llm_gpus, load=load)
        cases.append(Case(label, generated, None))
    cases.append(Case("seed", seed_workload(), None))
    return cases


AGING_POLICY = Path(__file__).resolve().parent.parent / "policies" / "aging-policy.yaml"


def _schedulers(variants: bool, cycle_s: float | None, seed: int) -> list[tuple[str, Scheduler]]:
    chosen: list[tuple[str, Scheduler]] = [
        (name, make_scheduler(name, cycle_s=cycle_s, seed=seed)) for name in SCHEDULERS
    ]
    if variants:
        chosen.append(("kueue-nopreempt", Kueue(preemption=False)))
        policy = load_default_policy()
        chosen.append(("osprey-nopreempt", Osprey(policy, cycle_s=cycle_s, seed=seed, preemption=False)))
        # The shipped aging policy: queue_wait lifts a waiting job (its own 300 s interval unless overridden).
        aging = load_policies([AGING_POLICY])[0]
        chosen.append(("osprey-aging", Osprey(aging, cycle_s=cycle_s, seed=seed)))
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-gpus", type=int, default=32, help="the small cluster for the trace")
    parser.add_argument("--trace-cycle", type=float, default=300.0, help="osprey cycle on the trace (s)")
    parser.add_argument("--trace-limit", type=int, default=None, help="replay only the first N tasks")
    parser.add_argument("--no-trace", action="store_true", help="skip the Alibaba workload")
    parser.add_argument("--no-real-cluster", action="store_true", help="skip the trace on its real cluster")
    parser.add_argument("--llm-jobs", type=int, default=300)
    parser.add_argument("--llm-gpus", type=int, default=1024)
    parser.add_argument("--llm-load", type=float, default=1.0)
    parser.add_argument("--llm-heavy-load", type=float, default=1.3, help="a second, overloaded LLM run")
    parser.add_argument("--variants", action="store_true", help="also kueue and osprey without preemption")
    parser.add_argument("--json", type=Path, default=None, help="write every result to this JSON file")
    parser.add_argument("--plot", type=Path, default=None, help="write PNGs into this directory")
    args = parser.parse_args(argv)
    if args.trace_gpus < 8 or args.llm_gpus < 8 or args.llm_jobs < 1:
        parser.error("--trace-gpus and --llm-gpus need at least 8 GPUs, --llm-jobs at least 1 job")

    started = time.perf_counter()
    everything: dict[str, list[dict[str, object]]] = {}
    for case in _cases(args):
        results: list[Result] = []
        for label, scheduler in _schedulers(args.variants, case.cycle_s, args.seed):
            result = simulate(case.workload, scheduler, seed=args.seed)
            results.append(result)
            print(
                f"scheduler={label} workload={case.label} mean_wait_s={result.mean_wait_s:.1f} "
                f"p95_wait_s={result.p95_wait_s:.1f} idle_pct={result.idle_pct:.2f} goodput={result.goodput:.4f}",
                flush=True,
            )
            everything.setdefault(case.label, []).append({**result.to_dict(), "scheduler": label})
        if args.plot is not None and not case.label.endswith("-real"):  # identical curves on the real cluster
            from osprey_control.simulate.plots import plot_results  # noqa: PLC0415 - matplotlib only here

            shown = results[: len(SCHEDULERS)]  # the six schedulers, not the variants
            plot_results(
                shown, args.plot, title=f"{case.label} ({case.workload.total_gpus} GPUs)", stem=case.label
            )
    if args.json is not None:
        args.json.write_text(json.dumps(everything, indent=1, sort_keys=True) + "\n")
    print(f"total_seconds={time.perf_counter() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
