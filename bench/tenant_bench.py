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

Then the same on workloads no one chose: each of the family's 30 reported draws (``bench/family_goals.py``'s
seeds, ``--family-seeds``) shared by quotas drawn for its teams (``osprey.simulate.tenant_draw``), printed as
``bench/sim_bench.py`` prints the family: a ``scheduler=`` line per draw and scheduler, and one ``family pair=...
goal=... met=<k>/<n> worst=...`` line per pair and goal, with ``wait-gap`` against ``oracle-cohort`` and ``reclaim``
required on every draw. The closing ``goals met=`` counts the LLM workload's goals.
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

from bench.family_goals import FAMILY_SEEDS, DrawCheck, FamilyGoal, family_goals, family_seeds  # noqa: E402
from bench.sim_bench import Goal, _line, _mean, goals  # noqa: E402
from osprey.simulate import Result, Workload, family_workload, llm_workload, make_scheduler, simulate  # noqa: E402
from osprey.simulate.tenant_draw import draw_tenants  # noqa: E402
from osprey.simulate.tenants import load_tenants  # noqa: E402

TENANTS = REPO / "bench" / "data" / "tenants-llm.yaml"
PAIRS = (
    ("kueue-cohort", "kueue-cohort+osprey"),
    ("fairshare", "fairshare+osprey"),
    ("sagemaker-queue", "sagemaker-queue+osprey"),
)
ORACLE = "oracle-cohort"
RECLAIM_SLACK_S = 60.0  # one Osprey cycle (the default policy's interval)


def _run(task: tuple[Workload, int, str]) -> Result:
    workload, seed, name = task
    return simulate(workload, make_scheduler(name, seed=seed), seed=seed)


def _worst_late(native: Result, layered: Result) -> tuple[float, str]:
    """How much later than native the layered run's worst team reclaims (p95), and which team, in words."""
    before = {team.team: team.p95_reclaim_s or 0.0 for team in native.teams}
    worst = (float("-inf"), "no team")
    for team in layered.teams:
        late = (team.p95_reclaim_s or 0.0) - before.get(team.team, 0.0)
        if late > worst[0]:
            worst = (late, f"{team.team}: p95 reclaim {team.p95_reclaim_s or 0.0:.1f} s vs native "
                     f"{before.get(team.team, 0.0):.1f} s")  # fmt: skip
    return worst


def reclaim_goals(label: str, by_seed: dict[str, list[Result]]) -> Iterable[Goal]:
    """On every seed, every team's p95 reclaim wait under ``+osprey`` is at most native's plus one cycle."""
    for native_name, layered_name in PAIRS:
        natives, layereds = by_seed.get(native_name), by_seed.get(layered_name)
        if not natives or not layereds:
            continue
        worst = max(_worst_late(native, layered) for native, layered in zip(natives, layereds, strict=True))
        yield Goal(
            "reclaim",
            f"{native_name}->{layered_name}",
            label,
            worst[0] <= RECLAIM_SLACK_S,
            f"worst team and seed {worst[1]} (limit <= native + {RECLAIM_SLACK_S:.0f} s)",
        )


def family_reclaim_goals(draws: dict[str, dict[str, Result]]) -> list[FamilyGoal]:
    """``reclaim`` on every family draw: the worst team's p95 reclaim wait at most native's plus one cycle."""
    out = []
    for native_name, layered_name in PAIRS:
        checks = []
        for draw, results in draws.items():
            if native_name in results and layered_name in results:
                late, detail = _worst_late(results[native_name], results[layered_name])
                limit = f" (limit <= native + {RECLAIM_SLACK_S:.0f} s)"
                checks.append(
                    DrawCheck(draw, late <= RECLAIM_SLACK_S, RECLAIM_SLACK_S - late, detail + limit)
                )
        if checks:
            out.append(FamilyGoal("reclaim", f"{native_name}->{layered_name}", 1.0, tuple(checks)))
    return out


def _report_family(seeds: Sequence[int], names: Sequence[str], results: Sequence[Result]) -> None:
    """One ``scheduler=`` line per draw and scheduler, then one ``family`` line per pair and goal."""
    draws: dict[str, dict[str, Result]] = {}
    for index, seed in enumerate(seeds):
        label = f"family-{seed}-tenants"
        draws[label] = dict(zip(names, results[index * len(names) : (index + 1) * len(names)], strict=True))
        for name, result in draws[label].items():
            print(_line(name, label, _mean([result])))
    measured = {
        draw: {name: _mean([result]) for name, result in runs.items()} for draw, runs in draws.items()
    }
    for family_goal in [*family_goals(measured, PAIRS, oracle_name=ORACLE), *family_reclaim_goals(draws)]:
        print(family_goal.line())


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
    parser.add_argument(
        "--family-seeds",
        default=",".join(map(str, FAMILY_SEEDS)),
        help="family draws, each shared by quotas drawn for its teams (A-B ranges, a,b,c, or none)",
    )
    args = parser.parse_args(argv)
    try:
        drawn = family_seeds(args.family_seeds)
    except ValueError as error:
        parser.error(f"--family-seeds: {error}")
    tenants = load_tenants(args.tenants)
    names = [*dict.fromkeys(name for pair in PAIRS for name in pair), ORACLE]
    started = time.perf_counter()
    llm = {
        (load, seed): replace(
            llm_workload(seed=seed, jobs=args.jobs, gpus=args.gpus, load=load), tenants=tenants
        )
        for load in args.loads
        for seed in args.seeds
    }
    tasks = [(workload, seed, name) for (_, seed), workload in llm.items() for name in names]
    family = [family_workload(seed) for seed in drawn]
    tasks += [(replace(w, tenants=draw_tenants(w, seed)), seed, name) for w, seed in zip(family, drawn, strict=True)
              for name in names]  # fmt: skip
    with ProcessPoolExecutor(max(1, args.processes)) as pool:
        results = list(pool.map(_run, tasks))
    verdicts: list[Goal] = []
    for load in args.loads:
        label = f"llm-tenants-load{load:.1f}"
        by_seed: dict[str, list[Result]] = {name: [] for name in names}
        for index, key in enumerate(llm):
            if key[0] == load:
                for offset, name in enumerate(names):
                    by_seed[name].append(results[index * len(names) + offset])
        measured = {name: _mean(runs) for name, runs in by_seed.items()}
        for name in names:
            print(_line(name, label, measured[name]))
        verdicts.extend(goals(label, measured, pairs=PAIRS, oracle_name=ORACLE))
        verdicts.extend(reclaim_goals(label, by_seed))
    for verdict in verdicts:
        print(verdict.line())
    _report_family(drawn, names, results[len(llm) * len(names) :])
    met = sum(verdict.met for verdict in verdicts)
    print(f"goals met={met}/{len(verdicts)} total_seconds={time.perf_counter() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
