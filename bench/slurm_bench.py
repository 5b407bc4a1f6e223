"""Real-scheduler benchmark: one compressed workload on a real Slurm, with and without Osprey.

Run: ``.venv/bin/python bench/slurm_bench.py`` (root and the Debian Slurm packages, as ``.ci/setup``
installs them; options ``--jobs``, ``--nodes``, ``--min-duration``/``--max-duration``, ``--interval``,
``--seed``, ``--compression``). It prints::

    scheduler=slurm mean_wait_s=<x> makespan_s=<x>
    scheduler=slurm+osprey mean_wait_s=<x> makespan_s=<x>

and the ratio of each layered run to the first (the baseline, measured in the same run); then, for each, the
simulator's model of the same scheduler on the same submissions and how closely it follows the real one
(``bench/fidelity.py``)::

    fidelity scheduler=slurm order_tau=<x> wait_ratio=<sim/real mean wait> (goal ...: met|MISSED)
    noise scheduler=slurm order_tau=<x> (min <x>) wait_ratio=<lo>..<hi> (the model against itself, ...)

The ``noise`` line is the model against itself with each submission moved by up to 0.3 s: the best fidelity
any model can show against a real run whose timing is that uncertain (``bench/fidelity.noise_line``). When
Osprey's loop had failed cycles or fell behind, a ``warning:`` line says so with the first error, and the
layered run's fidelity line carries the same note: such a run measures the loop's trouble, not the model.

The workload (seeded): ``--jobs`` sleep jobs of 1, 2, 4 or 8 nodes (weights 4:3:2:1), each sleeping
``--min-duration``..``--max-duration`` seconds, arriving over the first 20 s, with declared time limits
(``--time``, twice the duration rounded up to minutes, Slurm's unit), every GPU of their nodes
(``--gres=gpu:8``) and ``expected_runtime`` in the Osprey marker (the user's estimate: the duration within
±20 %). Each run gets a fresh local Slurm of ``--nodes``
8-GPU nodes (tests/slurm/cluster.py) and the same submissions at the same offsets:

- ``slurm``: Slurm's own ``priority/multifactor`` (without slurmdbd its age and fair-share factors are
  unavailable, so equal jobs go in submission order) with backfill;
- ``slurm+osprey``: the deployment docs/slurm.md describes: Osprey's ``job_submit.lua`` in slurmctld (each
  marked job created at the middle of Osprey's range), plus Osprey's loop every ``--interval`` seconds from
  the first submission on (``bench/slurm_loop.py``: production's discovery, registry merge, job-level values,
  ``reservation`` signal, derivation and Slurm applier) on the shipped ``default-policy`` with its time
  ranges divided by ``--compression`` (the workload compresses hours into seconds: a 4 h ``queue_wait`` range
  becomes 60 s at the default 240) and ``reservation.capacityGpus`` set to the cluster's GPUs;
- ``slurm+osprey-bare`` (with ``--compare-bare``): the same loop without the plugin (ParallelCluster's bare
  slurm.conf: a job is at priority 1 until Osprey's first write).

Wait is Slurm's ``start_time`` minus the submission; makespan is the last ``end_time`` minus the first
submission (Slurm's times are whole seconds).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.slurm.cluster: the same local Slurm the tests use

from tests.slurm.cluster import LocalSlurm, missing_requirements  # noqa: E402

from bench.fidelity import Run as FidelityRun  # noqa: E402
from bench.fidelity import fidelity_line, noise_line, simulated_starts  # noqa: E402
from bench.slurm_loop import SlurmOspreyLoop  # noqa: E402
from osprey.simulate.model import Job as SimJob  # noqa: E402
from osprey_control.backends.slurm import job_submit_lua, marker  # noqa: E402
from osprey_control.contract import parse_block  # noqa: E402
from osprey_control.derivation import compile_policy  # noqa: E402
from osprey_control.policy import (  # noqa: E402
    PriorityDerivationPolicy,
    policy_from_mapping,
    shipped_policy_file,
)

# The fixture's slurm.conf schedules every second (sched_interval=1, bf_interval=1): the model's passes too.
SCHED_INTERVAL_S = 1.0
_TIME_METRICS = {"remaining_time": 1.0, "queue_wait": 1.0, "attained_service": 1.0}


@dataclass(frozen=True)
class Job:
    index: int
    offset_s: float
    nodes: int
    duration_s: int
    estimate_s: int


def workload(jobs: int, min_s: int, max_s: int, seed: int) -> list[Job]:
    rng = random.Random(seed)
    made = []
    for index in range(jobs):
        duration = rng.randint(min_s, max_s)
        made.append(
            Job(
                index=index,
                offset_s=round(rng.uniform(0, 20), 2),
                nodes=rng.choices((1, 2, 4, 8), weights=(4, 3, 2, 1))[0],
                duration_s=duration,
                estimate_s=max(1, round(duration * rng.uniform(0.8, 1.2))),
            )
        )
    return sorted(made, key=lambda job: job.offset_s)


def compressed_policy(compression: float, capacity_gpus: int | None = None) -> PriorityDerivationPolicy:
    """``default-policy`` with every time range divided by ``compression`` (attained service is GPU-hours), and
    ``reservation.capacityGpus`` set to the cluster's GPUs, as docs/policies.md tells a user to (the simulator
    assumes the same of a policy without it)."""
    document = yaml.safe_load(shipped_policy_file("default-policy").read_text())
    if capacity_gpus is not None:
        document["spec"].setdefault("reservation", {})["capacityGpus"] = capacity_gpus
    for rule in document["spec"]["derivationRules"]:
        if rule.get("metric") in _TIME_METRICS and "range" in rule:
            rule["range"] = [value / compression for value in rule["range"]]
    policy, issues = policy_from_mapping(document, "default-policy (compressed)")
    if policy is None:
        raise SystemExit(f"compressed policy invalid: {issues}")
    return policy


def simulated_jobs(jobs: list[Job]) -> list[SimJob]:
    """The bench's submissions as the simulator's jobs: whole 8-GPU nodes, the same offsets and durations, the
    declared limit Slurm gets (``--time``) and the user's ``expected_runtime`` estimate Osprey reads first."""
    return [
        SimJob(
            job_id=f"bench-{job.index}",
            submit_s=job.offset_s,
            gpus=job.nodes * 8,
            duration_s=job.duration_s,
            declared_runtime_s=_time_limit_minutes(job) * 60.0,
            expected_runtime_s=float(job.estimate_s),
        )
        for job in jobs
    ]


def _time_limit_minutes(job: Job) -> int:
    return math.ceil(job.duration_s * 2 / 60)


def run(
    name: str, jobs: list[Job], nodes: int, osprey: SlurmOspreyLoop | None, slurm: LocalSlurm
) -> dict[str, Any]:
    submitted: dict[int, float] = {}
    names: dict[int, str] = {}
    began = time.time()
    try:
        for job in jobs:
            delay = began + job.offset_s - time.time()
            if delay > 0:
                time.sleep(delay)
            block = parse_block(
                {"priority_derivation_profile": "default-policy", "expected_runtime": job.estimate_s}
            )
            job_id = slurm.sbatch(
                f"-N{job.nodes}",
                "--exclusive",
                # Every GPU of each node, as a training job asks for them: Slurm's record of the request is
                # where discovery reads requested_gpus (without it Osprey sees a job of unknown size).
                "--gres=gpu:8",
                f"--time={_time_limit_minutes(job)}",
                f"--comment={marker(block)}",
                f"--job-name=bench-{job.index}",
                wrap=f"sleep {job.duration_s}",
            )
            submitted[job_id] = time.time()
            names[job_id] = f"bench-{job.index}"
            if osprey is not None and len(submitted) == 1:
                # The loop's cycles start with the first submission, as the simulator's do: with cycles of
                # seconds and jobs of tens of seconds, their phase decides which cycle first ranks a job.
                osprey.start()
        deadline = time.time() + 3600
        while slurm.squeue_states() and time.time() < deadline:
            time.sleep(0.5)
    finally:
        if osprey is not None:
            osprey.stop()
    client = slurm.client()
    waits, ends = [], []
    starts: dict[str, float] = {}
    for job_id, at in submitted.items():
        info = client.job(job_id) or {}
        start, end = info.get("start_time"), info.get("end_time")
        if not isinstance(start, int) or not isinstance(end, int):
            raise SystemExit(f"{name}: job {job_id} has no start/end time: {info.get('job_state')}")
        waits.append(max(0.0, start - at))
        ends.append(end)
        starts[names[job_id]] = max(start, at) - began
    return {
        "run": FidelityRun({names[job_id]: at - began for job_id, at in submitted.items()}, starts),
        "scheduler": name,
        "mean_wait_s": statistics.fmean(waits),
        "makespan_s": max(ends) - min(submitted.values()),
        "writes": osprey.writes if osprey else 0,
        "cycles": osprey.cycles if osprey else 0,
        "cycle_s": osprey.mean_cycle_s if osprey else 0.0,
        "loop_problem": osprey.health() if osprey else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--min-duration", type=int, default=5)
    parser.add_argument("--max-duration", type=int, default=30)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between Osprey cycles")
    parser.add_argument("--compression", type=float, default=240.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compare-bare",
        action="store_true",
        help="also run Osprey without its job_submit.lua (new jobs at 1)",
    )
    args = parser.parse_args(argv)
    reason = missing_requirements()
    if reason:
        print(f"error: a real Slurm cannot run here: {reason}", file=sys.stderr)
        return 1
    jobs = workload(args.jobs, args.min_duration, args.max_duration, args.seed)
    policy = compressed_policy(args.compression, capacity_gpus=args.nodes * 8)
    compiled = compile_policy(policy)
    results = []
    names = ("slurm", "slurm+osprey", *(("slurm+osprey-bare",) if args.compare_bare else ()))
    for name in names:
        plugin = name == "slurm+osprey"
        slurm = LocalSlurm(
            nodes=args.nodes, gpus=8, cluster="bench", extra_conf=["JobSubmitPlugins=lua"] if plugin else []
        )
        if plugin:  # where the installer puts it, before slurmctld starts (as ParallelCluster's OnNodeStart)
            (slurm.conf.parent / "job_submit.lua").write_text(job_submit_lua())
        with slurm:
            durations = {f"bench-{job.index}": float(job.duration_s) for job in jobs}
            loop = SlurmOspreyLoop(slurm, compiled, args.interval, durations) if name != "slurm" else None
            results.append(run(name, jobs, args.nodes, loop, slurm))
    for result in results:
        print(
            f"scheduler={result['scheduler']} mean_wait_s={result['mean_wait_s']:.1f} makespan_s={result['makespan_s']:.1f}"
        )
    base = results[0]
    for layered in results[1:]:
        print(
            f"ratio {layered['scheduler']}/slurm mean_wait={layered['mean_wait_s'] / max(base['mean_wait_s'], 1e-9):.2f} "
            f"makespan={layered['makespan_s'] / max(base['makespan_s'], 1e-9):.2f} "
            f"(osprey cycles={layered['cycles']} mean_cycle_s={layered['cycle_s']:.2f} "
            f"priority_writes={layered['writes']}; jobs={args.jobs} nodes={args.nodes})"
        )
        if layered["loop_problem"]:
            print(
                f"warning: {layered['scheduler']}: Osprey's loop did not keep up: {layered['loop_problem']}"
            )
    for result in results:
        model = result["scheduler"]
        if model not in ("slurm", "slurm+osprey"):
            continue  # the bare variant has no model of its own
        model_jobs = simulated_jobs(jobs)
        settings: dict[str, Any] = {
            "policy": policy,
            "cycle_s": args.interval,
            "sched_interval_s": SCHED_INTERVAL_S,
        }
        simulated = simulated_starts(model, model_jobs, [8] * args.nodes, **settings)
        line = fidelity_line(model, result["run"], simulated)
        # A run whose loop failed or fell behind measures that, not the model: say so on the line itself.
        print(line if not result["loop_problem"] else f"{line} [Osprey's loop: {result['loop_problem']}]")
        print(noise_line(model, model_jobs, [8] * args.nodes, base=simulated, **settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
