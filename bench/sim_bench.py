"""Scheduling benchmark: every scheduler, native and with Osprey layered on it, on the LLM gang workload
(loads 1.0 and 1.3, five seeds each), the Alibaba 2023 trace on 32 GPUs and the seed's case; then the goals
of docs/scheduling.md checked per (native, layered) pair; then the same pairs on 30 draws of the workload
family (``osprey.simulate.family``) and the family goals (``bench/family_goals.py``).

Run: ``.venv/bin/python bench/sim_bench.py`` (``--json FILE`` keeps every number, per team too, ``--plot DIR``
writes the PNGs of docs/scheduling.md, ``--policy FILE`` runs that policy in every ``+osprey`` scheduler,
``--schedulers a,b`` runs a subset, ``--workload FILE.csv`` adds a workload, ``--processes N`` runs N
simulations at once, default one per core, with the same numbers as one process). ``--seeds`` are the LLM
workload's seeds; the family's draws are ``--family-seeds`` (default 1000-1029; ``A-B``, a comma list of
seeds and ranges, or ``none`` to skip the family); ``--family-jobs N`` gives every draw N jobs (quick runs).

One line per scheduler and workload::

    scheduler=<name> workload=<w> mean_wait_s=<x> p95_wait_s=<x> idle_pct=<x> goodput=<x> priority_changes_per_job_hour=<x> fairness=<x> makespan_s=<x>

Seeded workloads report each seed (``llm-load1.0-s3``) and then their mean under the workload's own name
(``llm-load1.0``); each family draw reports one line per scheduler under ``family-<seed>``: every pair's
native and layered scheduler, ``oracle`` and, where this checkout has it, ``oracle-backfill``. Then one line
per goal, pair and workload (every workload but the seed's case, whose only goal is ``seed-wait-and-idle``
for Kueue)::

    goal=<name> pair=<native>-><layered> workload=<w> met|MISSED (<the numbers and the limit>)

with the goals ``wait-gap``, ``idle``, ``goodput``, ``p95``, ``changes`` and ``fairness`` (limits below;
``wait-gap`` needs the ``oracle`` scheduler). Then one line per pair and family goal (do no harm on every
draw, the others on a share of the draws; ``bench/family_goals.py``)::

    family pair=<native>-><layered> goal=<goal> met=<k>/<n> worst=<draw> <its numbers and the limit>; needs <m>/<n>: met|MISSED

The bench always exits 0: it measures, docs/scheduling.md explains. ``total_seconds=<S>`` comes last. The
trace replays with a 300 s Osprey cycle (``--trace-cycle``) to keep the bench short on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # bench.family_goals, when run as a script

from bench.family_goals import FAMILY_SEEDS, change_points, family_goals, family_seeds  # noqa: E402
from osprey.simulate import (  # noqa: E402
    LAYERED_PAIRS,
    SCHEDULERS,
    TRACE_DIR,
    Result,
    Workload,
    family_workload,
    homogeneous_nodes,
    llm_workload,
    make_scheduler,
    read_alibaba,
    read_job_csv,
    seed_workload,
    simulate,
)
from osprey.simulate.runner import load_default_policy  # noqa: E402
from osprey_control.policy import PriorityDerivationPolicy, load_policies  # noqa: E402

REPORTED = (
    "mean_wait_s",
    "p95_wait_s",
    "idle_pct",
    "goodput",
    "priority_changes_per_job_hour",
    "fairness",
    "makespan_s",
)
# On each draw: every pair's native and layered scheduler and the oracles the wait goal compares with
# (oracle-backfill only where this checkout has it).
FAMILY_ORACLES = ("oracle", "oracle-backfill")


@dataclass(frozen=True)
class Case:
    label: str
    workloads: tuple[Workload, ...]  # one per seed; the case reports their mean
    cycle_s: float | None


def _cases(args: argparse.Namespace) -> list[Case]:
    cases = []
    for load in args.llm_loads:
        seeded = tuple(
            llm_workload(seed=seed, jobs=args.llm_jobs, gpus=args.llm_gpus, load=load) for seed in args.seeds
        )
        cases.append(Case(f"llm-load{load:.1f}", seeded, None))
    if (TRACE_DIR / "alibaba_openb2023_gpu_replay.csv").is_file() and not args.no_trace:
        trace = read_alibaba(gpus=args.trace_gpus, limit=args.trace_limit)
        cases.append(Case(f"alibaba-{args.trace_gpus}gpu", (trace,), args.trace_cycle))
    else:
        print(f"note: no trace in {TRACE_DIR}; skipping the Alibaba workload", file=sys.stderr)
    cases.append(Case("seed", (seed_workload(),), None))
    for path in args.workload:
        cases.append(Case(path.stem, (read_job_csv(path, homogeneous_nodes(args.llm_gpus)),), None))
    return cases


def _mean(results: Sequence[Result]) -> dict[str, float]:
    means: dict[str, float] = {}
    for key in REPORTED:
        values = [getattr(result, key) for result in results]
        numbers = [0.0 if value is None else float(value) for value in values]
        means[key] = math.fsum(numbers) / len(numbers)
    return means


def _line(scheduler: str, workload: str, values: dict[str, float]) -> str:
    return (
        f"scheduler={scheduler} workload={workload} mean_wait_s={values['mean_wait_s']:.1f} "
        f"p95_wait_s={values['p95_wait_s']:.1f} idle_pct={values['idle_pct']:.2f} "
        f"goodput={values['goodput']:.4f} priority_changes_per_job_hour={values['priority_changes_per_job_hour']:.2f} "
        f"fairness={values['fairness']:.4f} makespan_s={values['makespan_s']:.1f}"
    )


# The goals of issue 27 (docs/scheduling.md, "The goals, measured"): limits against the native scheduler.
IDLE_POINTS = 0.5  # idle % <= native + this
GAP_SHARE = 0.6  # mean wait closes at least this share of the native -> oracle gap
BEATS_ORACLE_FACTOR = 0.8  # where native already waits no longer than the oracle: mean wait <= this x native
GOODPUT_FACTOR = 0.99
P95_FACTOR = 1.2
MAX_CHANGES = 10.0  # priority changes per job-hour
FAIRNESS_POINTS = 0.02  # fairness >= native - this
SEED_IDLE_PCT = 12.0


@dataclass(frozen=True)
class Goal:
    name: str
    pair: str
    workload: str
    met: bool
    detail: str

    def line(self) -> str:
        return (
            f"goal={self.name} pair={self.pair} workload={self.workload} "
            f"{'met' if self.met else 'MISSED'} ({self.detail})"
        )


def _wait_gap(layered: float, native: float, oracle: float) -> tuple[bool, str]:
    """Mean wait closes >= 60 % of the native -> oracle gap; where native already waits no longer than the
    oracle (no gap to close), the layered scheduler must instead cut native's mean wait to <= 0.8 x."""
    head = f"mean wait {layered:.1f} s vs native {native:.1f} s, oracle {oracle:.1f} s"
    if native <= oracle:
        limit = BEATS_ORACLE_FACTOR * native
        detail = f"{head}: native beats the oracle, limit <= {BEATS_ORACLE_FACTOR} x native = {limit:.1f} s"
        return layered <= limit, detail
    gap = native - oracle
    closed = native - layered
    detail = f"{head}: closes {100 * closed / gap:.0f} % of the gap (limit >= {100 * GAP_SHARE:.0f} %)"
    return closed >= GAP_SHARE * gap, detail


def goals(
    label: str,
    measured: dict[str, dict[str, float]],
    *,
    pairs: Sequence[tuple[str, str]] = LAYERED_PAIRS,
    oracle_name: str = "oracle",
) -> Iterable[Goal]:
    """Every goal for every (native, layered) pair measured on one workload (the seed's case: its own)."""
    oracle = measured.get(oracle_name)
    for native_name, layered_name in pairs:
        native, layered = measured.get(native_name), measured.get(layered_name)
        if native is None or layered is None:
            continue
        pair = f"{native_name}->{layered_name}"

        def goal(name: str, met: bool, detail: str, pair: str = pair) -> Goal:
            return Goal(name, pair, label, met, detail)

        if label == "seed":
            # The seed's case: beat the native mean wait with idle at most 12 % (Kueue only).
            if native_name == "kueue":
                wait, idle = layered["mean_wait_s"], layered["idle_pct"]
                yield goal(
                    "seed-wait-and-idle",
                    wait < native["mean_wait_s"] and idle <= SEED_IDLE_PCT,
                    f"mean wait {wait:.1f} s vs native {native['mean_wait_s']:.1f} s (limit < native), "
                    f"idle {idle:.2f} % (limit <= {SEED_IDLE_PCT:.0f})",
                )
            continue
        if oracle is not None:
            yield goal(
                "wait-gap", *_wait_gap(layered["mean_wait_s"], native["mean_wait_s"], oracle["mean_wait_s"])
            )
        idle_limit = native["idle_pct"] + IDLE_POINTS
        yield goal(
            "idle",
            layered["idle_pct"] <= idle_limit,
            f"idle {layered['idle_pct']:.2f} % vs native {native['idle_pct']:.2f} % (limit <= {idle_limit:.2f})",
        )
        goodput_limit = GOODPUT_FACTOR * native["goodput"]
        yield goal(
            "goodput",
            layered["goodput"] >= goodput_limit,
            f"goodput {layered['goodput']:.4f} vs native {native['goodput']:.4f} (limit >= {goodput_limit:.4f})",
        )
        p95_limit = P95_FACTOR * native["p95_wait_s"]
        yield goal(
            "p95",
            layered["p95_wait_s"] <= p95_limit,
            f"p95 wait {layered['p95_wait_s']:.1f} s vs native {native['p95_wait_s']:.1f} s (limit <= {p95_limit:.1f})",
        )
        changes = layered["priority_changes_per_job_hour"]
        yield goal(
            "changes",
            changes <= MAX_CHANGES,
            f"{changes:.2f} priority changes per job-hour (limit <= {MAX_CHANGES:.0f})",
        )
        fairness_limit = native["fairness"] - FAIRNESS_POINTS
        yield goal(
            "fairness",
            layered["fairness"] >= fairness_limit,
            f"fairness {layered['fairness']:.4f} vs native {native['fairness']:.4f} (limit >= {fairness_limit:.4f})",
        )


def _simulate(
    workload: Workload, name: str, policy: PriorityDerivationPolicy, cycle_s: float | None, seed: int
) -> Result:
    return simulate(workload, make_scheduler(name, policy=policy, cycle_s=cycle_s, seed=seed), seed=seed)


class _Runs:
    """Every (case, scheduler, seed) simulation, run in this process or a pool of ``processes``.

    Each simulation is deterministic and independent of the others, so a pool gives the same numbers; the
    bench still prints in its fixed order. The costliest runs are submitted first, so the last one to finish
    is a short one: an Osprey run costs about its jobs x its Osprey cycles (the horizon over the cycle),
    a native one about its jobs.
    """

    def __init__(
        self,
        plan: Sequence[tuple[Case, Sequence[str]]],
        seeds: Sequence[int],
        policy: PriorityDerivationPolicy,
        processes: int,
    ) -> None:
        self._inline: dict[tuple[str, str, int], tuple[Workload, str, float | None, int]] = {}
        for case, names in plan:
            for name in names:
                for index, workload in enumerate(case.workloads):
                    seed = seeds[index] if len(case.workloads) > 1 else 0
                    self._inline[(case.label, name, index)] = (workload, name, case.cycle_s, seed)
        self._policy = policy
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[tuple[str, str, int], Future[Result]] = {}
        if processes > 1 and len(self._inline) > 1:
            self._pool = ProcessPoolExecutor(max_workers=processes)

            def cost(key: tuple[str, str, int]) -> float:
                workload, name, cycle_s, _ = self._inline[key]
                if name.endswith("+osprey"):
                    return len(workload.jobs) * workload.horizon_s / (cycle_s or 60.0)
                return float(len(workload.jobs))

            for key in sorted(self._inline, key=cost, reverse=True):
                self._futures[key] = self._pool.submit(_simulate, *self._args(key))

    def _args(
        self, key: tuple[str, str, int]
    ) -> tuple[Workload, str, PriorityDerivationPolicy, float | None, int]:
        workload, name, cycle_s, seed = self._inline[key]
        return workload, name, self._policy, cycle_s, seed

    def result(self, label: str, name: str, index: int) -> Result:
        key = (label, name, index)
        if key in self._futures:
            return self._futures[key].result()
        return _simulate(*self._args(key))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def _family_cases(
    seeds: Sequence[int], names: Sequence[str], jobs: int | None
) -> tuple[list[Case], list[str]]:
    """One case per family draw (``jobs``: each with that many jobs instead of its drawn count), and the
    schedulers each runs: every pair's two and the oracles, those of ``names``."""
    wanted = [name for pair in LAYERED_PAIRS for name in pair] + [
        o for o in FAMILY_ORACLES if o in SCHEDULERS
    ]
    cases = [Case(f"family-{seed}", (family_workload(seed, jobs=jobs),), None) for seed in seeds]
    return cases, [name for name in wanted if name in names]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="LLM workload seeds")
    parser.add_argument("--llm-loads", type=float, nargs="+", default=[1.0, 1.3])
    parser.add_argument("--llm-jobs", type=int, default=300)
    parser.add_argument("--llm-gpus", type=int, default=1024)
    parser.add_argument("--trace-gpus", type=int, default=32, help="the small cluster for the trace")
    parser.add_argument("--trace-cycle", type=float, default=300.0, help="Osprey's cycle on the trace (s)")
    parser.add_argument("--trace-limit", type=int, default=None, help="replay only the first N tasks")
    parser.add_argument("--no-trace", action="store_true", help="skip the Alibaba workload")
    parser.add_argument("--workload", type=Path, nargs="*", default=[], help="extra job CSVs (llm-gpus)")
    parser.add_argument(
        "--family-seeds",
        default=f"{FAMILY_SEEDS[0]}-{FAMILY_SEEDS[-1]}",
        help="workload family draws: A-B, a comma list of seeds and ranges, or none",
    )
    parser.add_argument(
        "--family-jobs", type=int, default=None, help="every family draw with N jobs (quick runs)"
    )
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS), help="comma-separated subset")
    parser.add_argument("--policy", type=Path, default=None, help="policy of every +osprey scheduler")
    parser.add_argument("--json", type=Path, default=None, help="write every result to this JSON file")
    parser.add_argument("--plot", type=Path, default=None, help="write PNGs into this directory")
    parser.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        help="simulations run in parallel (1: in this one)",
    )
    return parser


def _run_family(
    family: Sequence[Case], names: Sequence[str], runs: _Runs, everything: dict[str, list[dict[str, object]]]
) -> dict[str, dict[str, dict[str, float]]]:
    """Print each family draw's runs (one line per scheduler, as a named workload's) and return the draws'
    figures for the family goals: draw -> scheduler -> figure."""
    draws: dict[str, dict[str, dict[str, float]]] = {}
    for case in family:
        for name in names:
            result = runs.result(case.label, name, 0)
            everything.setdefault(case.label, []).append(result.to_dict())
            draws.setdefault(case.label, {})[name] = _mean([result])
            print(_line(name, case.label, draws[case.label][name]), flush=True)
    return draws


def _report_family(
    draws: dict[str, dict[str, dict[str, float]]],
    everything: dict[str, list[dict[str, object]]],
    plot: Path | None,
) -> None:
    """One line per pair and family goal (``bench/family_goals.py``), the same in the JSON, and the scatter."""
    checked = family_goals(draws, LAYERED_PAIRS)
    for family_goal in checked:
        print(family_goal.line())
    everything["family_goals"] = [family_goal.to_dict() for family_goal in checked]
    if plot is not None and draws:
        from osprey.simulate.plots import plot_family  # noqa: PLC0415 - matplotlib only here

        points = change_points(draws, LAYERED_PAIRS)
        plot_family([(pair, wait, goodput) for pair, _, wait, goodput in points], plot)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error(f"--processes: must be at least 1, got {args.processes}")
    if args.trace_gpus < 8 or args.llm_gpus < 8 or args.llm_jobs < 1:
        parser.error("--trace-gpus and --llm-gpus need at least 8 GPUs, --llm-jobs at least 1 job")
    if args.family_jobs is not None and args.family_jobs < 2:
        parser.error(f"--family-jobs: a family draw needs at least 2 jobs, got {args.family_jobs}")
    names = [name.strip() for name in args.schedulers.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCHEDULERS]
    if unknown:
        parser.error(f"--schedulers: unknown {', '.join(unknown)}; allowed: {', '.join(SCHEDULERS)}")
    try:
        seeds = family_seeds(args.family_seeds)
    except ValueError as error:
        parser.error(f"--family-seeds: {error}")
    policy: PriorityDerivationPolicy = (
        load_policies([args.policy])[0] if args.policy is not None else load_default_policy()
    )

    started = time.perf_counter()
    everything: dict[str, list[dict[str, object]]] = {}
    verdicts: list[str] = []
    cases = _cases(args)
    family, family_names = _family_cases(seeds, names, args.family_jobs)
    plan = [(case, names) for case in cases] + [(case, family_names) for case in family]
    runs = _Runs(plan, args.seeds, policy, args.processes)
    for case in cases:
        measured: dict[str, dict[str, float]] = {}
        first_seed: list[Result] = []
        for name in names:
            results = []
            for index in range(len(case.workloads)):
                seed = args.seeds[index] if len(case.workloads) > 1 else 0
                result = runs.result(case.label, name, index)
                results.append(result)
                label = f"{case.label}-s{seed}" if len(case.workloads) > 1 else case.label
                everything.setdefault(label, []).append(result.to_dict())
                if len(case.workloads) > 1:
                    print(_line(name, label, _mean([result])), flush=True)
            first_seed.append(results[0])
            measured[name] = _mean(results)
            print(_line(name, case.label, measured[name]), flush=True)
        everything.setdefault("means", []).extend(
            {"scheduler": name, "workload": case.label, **values} for name, values in measured.items()
        )
        verdicts.extend(goal.line() for goal in goals(case.label, measured))
        if args.plot is not None:
            from osprey.simulate.plots import plot_results  # noqa: PLC0415 - matplotlib only here

            title = f"{case.label} ({case.workloads[0].total_gpus} GPUs)"
            plot_results(first_seed, args.plot, title=title, stem=case.label)
    draws = _run_family(family, family_names, runs, everything)
    runs.close()
    for verdict in verdicts:
        print(verdict)
    _report_family(draws, everything, args.plot)
    if args.json is not None:
        args.json.write_text(json.dumps(everything, indent=1, sort_keys=True) + "\n")
    print(f"total_seconds={time.perf_counter() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
