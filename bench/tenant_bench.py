"""Osprey on a shared cluster: the multi-tenant LLM workload, each pair's goals against what the teams were promised.

Run: ``.venv/bin/python bench/tenant_bench.py`` (options: ``--tenants``, ``--seeds``, ``--loads``, ``--processes``).

The LLM workload (1,024 GPUs, 300 jobs, loads 1.0 and 1.3, seeds 0-4) shared by the four teams of
``bench/data/tenants-llm.yaml`` (unequal quotas adding up to the cluster, docs/multi-tenant.md), under every
scheduler that has a team mechanism and its ``+osprey``: ``kueue-cohort`` (quota, borrowing, lending and reclaim
as Kueue v0.17.0), ``fairshare`` and ``sagemaker-queue`` (Batch fair share weighing teams by ``fairShareWeight``),
and the reference ``oracle-cohort`` (the same quotas, least remaining GPU-time first, perfect knowledge).

Its baselines are the native schedulers, measured in the same run. Per load it prints, as ``bench/sim_bench.py``
does, one ``scheduler=`` line per scheduler (the mean over the seeds) and one ``goal=`` line per pair and goal:
issue 27's goals with ``fairness`` measured against the quotas and ``wait-gap`` against ``oracle-cohort``, and
``reclaim``: on every seed, every team's p95 reclaim wait at most native's plus one Osprey cycle (60 s).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # bench.sim_bench, when run as a script

from bench.sim_bench import Goal, _line, _mean, goals  # noqa: E402
from osprey.simulate import Result, llm_workload, make_scheduler, simulate  # noqa: E402
from osprey.simulate.tenants import Tenants, load_tenants  # noqa: E402

TENANTS = REPO / "bench" / "data" / "tenants-llm.yaml"
PAIRS = (
    ("kueue-cohort", "kueue-cohort+osprey"),
    ("fairshare", "fairshare+osprey"),
    ("sagemaker-queue", "sagemaker-queue+osprey"),
)
ORACLE = "oracle-cohort"
RECLAIM_SLACK_S = 60.0  # one Osprey cycle (the default policy's interval)


def _run(task: tuple[Tenants, int, float, int, int, str]) -> Result:
    tenants, seed, load, jobs, gpus, name = task
    workload = replace(llm_workload(seed=seed, jobs=jobs, gpus=gpus, load=load), tenants=tenants)
    return simulate(workload, make_scheduler(name, seed=seed), seed=seed)


def reclaim_goals(label: str, by_seed: dict[str, list[Result]]) -> Iterable[Goal]:
    """On every seed, every team's p95 reclaim wait under ``+osprey`` is at most native's plus one cycle."""
    for native_name, layered_name in PAIRS:
        natives, layereds = by_seed.get(native_name), by_seed.get(layered_name)
        if not natives or not layereds:
            continue
        worst = (float("-inf"), "")
        for native, layered in zip(natives, layereds, strict=True):
            before = {team.team: team.p95_reclaim_s or 0.0 for team in native.teams}
            for team in layered.teams:
                late = (team.p95_reclaim_s or 0.0) - before.get(team.team, 0.0)
                if late > worst[0]:
                    worst = (
                        late,
                        f"{team.team}: p95 reclaim {team.p95_reclaim_s or 0.0:.1f} s vs native "
                        f"{before.get(team.team, 0.0):.1f} s",
                    )
        yield Goal(
            "reclaim",
            f"{native_name}->{layered_name}",
            label,
            worst[0] <= RECLAIM_SLACK_S,
            f"worst team and seed {worst[1]} (limit <= native + {RECLAIM_SLACK_S:.0f} s)",
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tenants", type=Path, default=TENANTS, help="the teams' quotas (docs/multi-tenant.md)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--loads", type=float, nargs="+", default=[1.0, 1.3])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    tenants = load_tenants(args.tenants)
    names = [*dict.fromkeys(name for pair in PAIRS for name in pair), ORACLE]
    started = time.perf_counter()
    tasks = [
        (tenants, seed, load, args.jobs, args.gpus, name)
        for load in args.loads
        for seed in args.seeds
        for name in names
    ]
    with ProcessPoolExecutor(max(1, args.processes)) as pool:
        results = list(pool.map(_run, tasks))
    verdicts: list[Goal] = []
    for load in args.loads:
        label = f"llm-tenants-load{load:.1f}"
        by_seed: dict[str, list[Result]] = {name: [] for name in names}
        for task, result in zip(tasks, results, strict=True):
            if task[2] == load:
                by_seed[task[5]].append(result)
        measured = {name: _mean(runs) for name, runs in by_seed.items()}
        for name in names:
            print(_line(name, label, measured[name]))
        verdicts.extend(goals(label, measured, pairs=PAIRS, oracle_name=ORACLE))
        verdicts.extend(reclaim_goals(label, by_seed))
    for verdict in verdicts:
        print(verdict.line())
    met = sum(verdict.met for verdict in verdicts)
    print(f"goals met={met}/{len(verdicts)} total_seconds={time.perf_counter() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
