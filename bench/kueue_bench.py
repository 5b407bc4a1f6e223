"""Real-scheduler benchmark: one compressed workload through a real Kueue, with and without Osprey.

Run: ``.venv/bin/python bench/kueue_bench.py`` (the etcd, kube-apiserver and Kueue manager ``.ci/k8s`` builds;
options ``--jobs``, ``--nodes``, ``--min-duration``/``--max-duration``, ``--interval``, ``--seed``,
``--compression``, ``--tenants``). It prints::

    scheduler=kueue mean_wait_s=<x> makespan_s=<x>
    scheduler=kueue+osprey mean_wait_s=<x> makespan_s=<x>

the ratio of the layered run to the native one, and, for each, the simulator's model of the same scheduler on
the same submissions and how closely it follows the real one (``bench/fidelity.py``)::

    fidelity scheduler=kueue order_tau=<x> wait_ratio=<sim/real mean wait> (goal ...: met|MISSED)

with, before those, a ``timing`` line per run: how long each job held its quota beyond its duration, and the
mean time from a finish to the next admission (the real run's latency, which the model does not have).
``--trace`` also prints each job's real and simulated start.

The workload is ``bench/slurm_bench.py``'s (seeded): ``--jobs`` jobs of 1, 2, 4 or 8 nodes of 8 GPUs (weights
4:3:2:1), each lasting ``--min-duration``..``--max-duration`` seconds, arriving over the first 20 s, with the
user's ``expected_runtime`` estimate (the duration within ±20 %). One control plane (tests/k8s/cluster.py:
etcd, kube-apiserver, Kueue's CRDs and manager on loopback) serves both runs; each run gets a namespace and a
ClusterQueue of its own with a nominal quota of ``--nodes`` x 8 ``nvidia.com/gpu``, and the same submissions at
the same offsets (``bench/kueue_driver.py``: the Jobs, the driver that plays pods and training, Osprey's loop):

- ``kueue``: Kueue alone: every Workload at priority 0 (no priority class), so BestEffortFIFO is creation
  order, and ``LowerPriority`` preemption never fires;
- ``kueue+osprey``: Osprey's loop every ``--interval`` seconds: the real derivation engine on the shipped
  ``default-policy`` with its time ranges divided by ``--compression`` (as slurm_bench), the production
  reservation plan, and the real EKS applier patching each Workload's ``spec.priority``.

With ``--tenants FILE.yaml`` (``bench/data/tenants-kueue-bench.yaml`` with ``--nodes 12``) the two runs are
``kueue-cohort`` and ``kueue-cohort+osprey`` instead: one ClusterQueue per team in a cohort (quotas, borrowing and
lending limits, preemption as the file sets them), each job submitted by the teams in turn, and the simulated side
runs the ``kueue-cohort`` models (``osprey.simulate.cohort``) with the same teams. A file the model refuses (quotas
beyond the cluster, a job its team can never hold, which a real Kueue would leave pending for good) exits 2 before
anything starts.

Wait is the driver's first sight of a Workload's admission minus its Job's submission; makespan is the last
``Finished`` minus the first submission. The simulated side runs the ``kueue``/``kueue+osprey`` models on a
cluster of ``--nodes`` 8-GPU nodes with no start-up delay, each job's estimate as its declared runtime (what the
simulated control plane reads before progress reports) and the Osprey cycle every ``--interval`` seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.k8s.cluster: the same control plane the tests start

from tests.k8s.cluster import METRICS_CERT_DIR, LocalKubernetes, find_binaries  # noqa: E402

from bench.fidelity import Run as FidelityRun  # noqa: E402
from bench.fidelity import fidelity_line  # noqa: E402
from bench.kueue_driver import Driver, KueueOspreyLoop, Tracked  # noqa: E402
from bench.kueue_queues import NODE_GPUS, make_cohort, make_queue, submit  # noqa: E402
from bench.slurm_bench import Job, compressed_policy, workload  # noqa: E402
from osprey.simulate.cohort import check_cohort  # noqa: E402
from osprey.simulate.kueue import Kueue  # noqa: E402
from osprey.simulate.model import Job as SimJob  # noqa: E402
from osprey.simulate.model import SimulationError, Workload  # noqa: E402
from osprey.simulate.runner import make_scheduler  # noqa: E402
from osprey.simulate.sim import Simulator  # noqa: E402
from osprey.simulate.tenants import Tenants, load_tenants  # noqa: E402
from osprey_control.derivation import compile_policy  # noqa: E402
from osprey_control.policy import PriorityDerivationPolicy  # noqa: E402

__all__ = ["main", "missing_requirements", "simulated_jobs", "team_of"]

# An RFC 1123 label, at most 40 characters: the run's namespace suffix still fits the 63 of a ClusterQueue name.
KUBERNETES_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")


def missing_requirements() -> str | None:
    """Why a real Kueue cannot run here (as tests/k8s/conftest.py checks), or None."""
    missing = find_binaries().missing(kueue_manager=True)
    if missing:
        return f"not built: {', '.join(map(str, missing))}; `bash .ci/k8s` builds them (needs Go)"
    if os.geteuid() != 0 and not (METRICS_CERT_DIR / "tls.key").exists():
        return f"the Kueue manager reads a certificate from {METRICS_CERT_DIR}, which only root can create"
    return None


def team_of(job: Job, tenants: Tenants | None) -> str:
    """The team a bench job is submitted by: the tenants file's teams in turn (``default`` without one)."""
    return "default" if tenants is None else tenants.teams[job.index % len(tenants.teams)].name


def simulated_jobs(jobs: list[Job], tenants: Tenants | None = None) -> list[SimJob]:
    """The bench's submissions as the simulator's jobs: whole 8-GPU nodes, the same offsets, durations and teams;
    the user's estimate is the declared runtime, which the simulated control plane reads where the real loop
    reads ``expected_runtime`` (both until the job reports progress)."""
    return [
        SimJob(
            job_id=f"bench-{job.index}",
            submit_s=job.offset_s,
            gpus=job.nodes * NODE_GPUS,
            duration_s=job.duration_s,
            declared_runtime_s=float(job.estimate_s),
            share=team_of(job, tenants),
        )
        for job in jobs
    ]


def bench_workload(model: str, jobs: list[Job], nodes: int, tenants: Tenants | None) -> Workload:
    return Workload(
        f"{model} fidelity", tuple(simulated_jobs(jobs, tenants)), (NODE_GPUS,) * nodes, tenants=tenants
    )


def simulated_starts(
    model: str,
    jobs: list[Job],
    nodes: int,
    stamps: dict[str, tuple[float, str]],
    *,
    policy: PriorityDerivationPolicy,
    cycle_s: float,
    tenants: Tenants | None = None,
) -> FidelityRun:
    """The simulator's ``model`` on the bench's submissions, ordering its queue with the real run's Workload
    creation seconds and UIDs (``stamps``): Kueue breaks ties within a second by UID, which no model can
    guess."""
    scheduler = make_scheduler(model, policy=policy, cycle_s=cycle_s)
    assert isinstance(scheduler, Kueue)
    scheduler.workload_stamps = dict(stamps)
    sim = Simulator(bench_workload(model, jobs, nodes, tenants), scheduler)
    sim.run(None)
    started = {run.job.job_id: run.intervals[0].start_s for run in sim.runs if run.intervals}
    return FidelityRun({run.job.job_id: run.job.submit_s for run in sim.runs}, started)


def _handoff_s(tracked: list[Tracked]) -> float:
    """Mean time from a job's ``Finished`` to the next admission, over admissions of jobs that had waited (the
    real Kueue's reaction and the API's latency; the model admits at once)."""
    finishes = sorted(job.done_s for job in tracked if job.done_s is not None)
    gaps = []
    for job in tracked:
        for interval in job.intervals:
            before = [at for at in finishes if at <= interval.start_s]
            if before and interval.start_s - job.submitted_s > 1.0:
                gaps.append(interval.start_s - before[-1])
    return statistics.fmean(gaps) if gaps else 0.0


def run(
    name: str,
    jobs: list[Job],
    k8s: LocalKubernetes,
    nodes: int,
    args: argparse.Namespace,
    *,
    tenants: Tenants | None = None,
) -> dict[str, Any]:
    client = k8s.client()
    namespace = f"bench-{secrets.token_hex(3)}"
    k8s.apply_namespace(namespace)
    if tenants is None:
        queue = make_queue(client, namespace, nodes * NODE_GPUS)
        queues = {"default": queue}
    else:
        queues = make_cohort(client, namespace, tenants)
    began = time.time()
    driver = Driver(client, namespace, began)
    loop = None
    if name.endswith("+osprey"):
        compiled = compile_policy(compressed_policy(args.compression))
        loop = KueueOspreyLoop(client, driver, compiled, args.interval, nodes * NODE_GPUS)
    stop = threading.Event()

    def drive() -> None:
        while not stop.is_set():
            driver.poll()
            stop.wait(driver.poll_s)

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    if loop is not None:
        loop.start()
    try:
        for job in jobs:
            delay = began + job.offset_s - time.time()
            if delay > 0:
                time.sleep(delay)
            created = submit(
                client, namespace, queues[team_of(job, tenants)], f"bench-{job.index}", job.nodes
            )
            driver.add(Tracked(f"bench-{job.index}", created["metadata"]["uid"], job.nodes, job.duration_s,
                               job.estimate_s, time.time() - began))  # fmt: skip
        deadline = time.time() + 3600
        while not driver.done() and time.time() < deadline:
            time.sleep(0.2)
    finally:
        if loop is not None:
            loop.stop()
        stop.set()
        thread.join(timeout=30)
    tracked = list(driver.jobs.values())
    unfinished = [job.name for job in tracked if job.done_s is None or job.first_start_s is None]
    if unfinished:
        raise SystemExit(f"{name}: jobs never finished within the hour: {unfinished[:5]}")
    started = {job.name: job.first_start_s for job in tracked if job.first_start_s is not None}
    return {
        "run": FidelityRun({job.name: job.submitted_s for job in tracked}, started),
        "scheduler": name,
        "mean_wait_s": statistics.fmean(started[job.name] - job.submitted_s for job in tracked),
        "makespan_s": max(job.done_s or 0.0 for job in tracked) - min(job.submitted_s for job in tracked),
        "preemptions": sum(job.preemptions for job in tracked),
        # How much longer than its duration each job held its quota (the driver's poll, the API's answers,
        # Kueue's reaction to Finished): the real run's timing noise, which the simulator has none of.
        "handoff_s": _handoff_s(tracked),
        "overrun_s": statistics.fmean(
            (job.intervals[-1].end_s or 0.0) - job.intervals[-1].start_s - job.duration_s for job in tracked
        ),
        "evicted_by": sorted(reason for job in tracked for reason in job.evicted_by),
        "writes": loop.writes if loop else 0,
        "cycles": loop.cycles if loop else 0,
        "loop_problem": loop.health() if loop else None,
        "pods_ready_refused": driver.pods_ready_refused,
        "stamps": {job.name: job.stamp for job in tracked if job.stamp is not None},
    }


def _checked_tenants(parser: argparse.ArgumentParser, path: Path, jobs: list[Job], nodes: int) -> Tenants:
    """The tenants file, refused (exit 2) where the model refuses it (quotas beyond the cluster, a job its team
    can never hold, which the real Kueue would leave pending for good) or a team name Kubernetes cannot take."""
    try:
        tenants = load_tenants(path)
        workload = bench_workload("check", jobs, nodes, tenants)
        tenants.check(workload)
        check_cohort(tenants, workload)
    except SimulationError as error:
        parser.error(f"--tenants {path}: {error}")
    unnamed = [team.name for team in tenants.teams if not KUBERNETES_NAME.fullmatch(team.name)]
    if unnamed:
        parser.error(
            f"--tenants {path}: team {unnamed[0]!r} names a ClusterQueue and a LocalQueue here, so it must be a "
            "Kubernetes name (lower-case letters, digits and '-', starting and ending alphanumeric)"
        )
    return tenants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--min-duration", type=int, default=5)
    parser.add_argument("--max-duration", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between Osprey cycles")
    parser.add_argument("--compression", type=float, default=240.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tenants",
        type=Path,
        default=None,
        help="teams sharing the cluster (docs/multi-tenant.md): a Kueue cohort, ClusterQueue per team; jobs go to "
        "the teams in turn",
    )
    parser.add_argument("--schedulers", default=None, help=argparse.SUPPRESS)  # tracing one
    parser.add_argument("--trace", action="store_true", help="also print each job's real and simulated start")
    args = parser.parse_args(argv)
    if args.nodes < 8:
        parser.error("--nodes must be at least 8: the workload has jobs of 8 nodes")
    if not 0 < args.min_duration <= args.max_duration < 300:
        parser.error(
            "durations must satisfy 0 < --min-duration <= --max-duration < 300 (waitForPodsReady's 5 min)"
        )
    jobs = workload(args.jobs, args.min_duration, args.max_duration, args.seed)
    tenants = None if args.tenants is None else _checked_tenants(parser, args.tenants, jobs, args.nodes)
    reason = missing_requirements()
    if reason:
        print(f"error: a real Kueue cannot run here: {reason}", file=sys.stderr)
        return 1
    names = args.schedulers or ("kueue-cohort,kueue-cohort+osprey" if tenants else "kueue,kueue+osprey")
    results = []
    with LocalKubernetes(find_binaries()) as k8s:
        for name in names.split(","):
            results.append(run(name, jobs, k8s, args.nodes, args, tenants=tenants))
    for result in results:
        print(f"scheduler={result['scheduler']} mean_wait_s={result['mean_wait_s']:.1f} "
              f"makespan_s={result['makespan_s']:.1f}")  # fmt: skip
    if args.trace:
        for result in results:
            print(f"  {result['scheduler']} evictions: {result['evicted_by']}")
    base, layered = results[0], results[-1]
    print(
        f"ratio {layered['scheduler']}/{base['scheduler']} "
        f"mean_wait={layered['mean_wait_s'] / max(base['mean_wait_s'], 1e-9):.2f} "
        f"makespan={layered['makespan_s'] / max(base['makespan_s'], 1e-9):.2f} "
        f"(osprey cycles={layered['cycles']} priority_writes={layered['writes']} "
        f"preemptions={layered['preemptions']}; jobs={args.jobs} nodes={args.nodes})"
    )
    for result in results:
        print(
            f"timing scheduler={result['scheduler']} quota_held_beyond_duration_s={result['overrun_s']:.2f} "
            f"finish_to_next_admission_s={result['handoff_s']:.2f}"
        )
    for result in results:
        if result["loop_problem"]:
            print(f"warning: {result['scheduler']}: Osprey's loop did not keep up: {result['loop_problem']}")
        if result["pods_ready_refused"]:
            print(
                f"note: {result['scheduler']}: the API server refused status.ready: {result['pods_ready_refused']}"
            )
    policy = compressed_policy(args.compression)
    for result in results:
        model = result["scheduler"]
        simulated = simulated_starts(
            model, jobs, args.nodes, result["stamps"], policy=policy, cycle_s=args.interval, tenants=tenants
        )
        print(fidelity_line(model, result["run"], simulated))
        if args.trace:
            real = result["run"]
            for name in sorted(real.started, key=lambda n: real.started[n]):
                print(f"  {model} {name} submitted={real.submitted[name]:.1f} real_start={real.started[name]:.1f} "
                      f"sim_start={simulated.started[name]:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    # A SIGTERM unwinds like Ctrl-C, so the control plane's processes are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    raise SystemExit(main())
