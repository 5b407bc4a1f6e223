"""Workloads: the Alibaba 2023 GPU trace, a job CSV, the seeded LLM gang generator and the seed's case.

Alibaba ``cluster-trace-gpu-v2023`` (Weng et al., USENIX ATC '23), shipped in this package's ``data/`` (its
README gives provenance and terms):

- **Window**: replay starts at the first task end (t = 9,964,972 s), the start of the 34-day window in which
  every task ends; times are shifted so the window starts at 0.
- **Long-running pods**: the tasks created before the window (long-running services, mostly still
  Running at the trace end) are dropped, not pre-placed: no scheduler ever queues them, and keeping them would
  only remove their GPUs from every scheduler alike. Right-censored tasks keep their observed duration.
- **Fractional GPUs**: none of the schedulers shares a GPU (Batch and Kueue allocate whole
  ``nvidia.com/gpu``), so a task asking for ``gpu_milli < 1000`` takes one whole GPU; its utilization is
  scaled by ``gpu_milli / 1000`` (it cannot keep a whole GPU busier than the share it asked for).
- The trace has no utilization: each task draws one from ``uniform(0.35, 0.95)`` (seeded per task);
  memory bandwidth is 50-90 % of that. ``gpu_spec`` constraints are ignored (any GPU serves).
- Share identifier (fair share) = ``qos``; Kueue priority class from ``qos``: Guaranteed 300, LS 200,
  Burstable 100, BE 0. Tasks do not checkpoint: a preempted task starts over.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Sequence
from pathlib import Path

from osprey.simulate.model import Job, SimulationError, StartupModel, Workload

__all__ = ["TRACE_DIR", "homogeneous_nodes", "llm_workload", "read_alibaba", "read_job_csv", "seed_workload"]

TRACE_DIR = Path(__file__).resolve().parent / "data"
TRACE_FILE = "alibaba_openb2023_gpu_replay.csv"
NODES_FILE = "alibaba_openb2023_gpu_nodes.csv"
WINDOW_START_S = 9_964_972
QOS_PRIORITY = {"Guaranteed": 300, "LS": 200, "Burstable": 100, "BE": 0}
GANG_NODE_GPUS = 8

# Worker startup for LLM gangs: 20-90 s (image cached, NCCL init); 3 % of workers straggle for 4-15 min
# (cold image pull, a slow node). Kueue's 5-minute waitForPodsReady timeout sits inside that tail.
LLM_STARTUP = StartupModel(20.0, 90.0, 0.03, 240.0, 900.0)


def homogeneous_nodes(gpus: int, node_size: int = GANG_NODE_GPUS) -> tuple[int, ...]:
    """``gpus`` as nodes of ``node_size`` (the remainder, if any, on one smaller node)."""
    if gpus < 1:
        raise SimulationError(f"a cluster needs at least 1 GPU, got {gpus}")
    whole, rest = divmod(gpus, node_size)
    return (node_size,) * whole + ((rest,) if rest else ())


def read_node_list(path: Path) -> tuple[int, ...]:
    with path.open(newline="") as handle:
        return tuple(int(row["gpu"]) for row in csv.DictReader(handle) if int(row["gpu"]) > 0)


def _rng(seed: int, key: str) -> random.Random:
    return random.Random(f"{seed}/{key}")


def read_alibaba(
    trace_dir: Path = TRACE_DIR, *, gpus: int | None = None, seed: int = 0, limit: int | None = None
) -> Workload:
    """The trace on its real cluster (``gpus`` None) or on ``gpus`` GPUs of 8-GPU nodes (contention).

    ``limit`` keeps only the first N tasks of the window (for quick runs).
    """
    nodes = read_node_list(trace_dir / NODES_FILE) if gpus is None else homogeneous_nodes(gpus)
    jobs: list[Job] = []
    dropped = 0
    with (trace_dir / TRACE_FILE).open(newline="") as handle:
        for row in csv.DictReader(handle):
            submit = int(row["submit_time_s"])
            if submit < WINDOW_START_S:
                dropped += 1
                continue
            if limit is not None and len(jobs) >= limit:
                break
            job_id = row["job_id"]
            rng = _rng(seed, job_id)
            share_of_gpu = min(1000, int(row["gpu_milli"])) / 1000.0
            utilization = rng.uniform(0.35, 0.95) * share_of_gpu
            qos = row["qos"] or "default"
            jobs.append(
                Job(
                    job_id=job_id,
                    submit_s=float(submit - WINDOW_START_S),
                    gpus=max(1, int(row["num_gpus"])),
                    duration_s=max(1.0, float(row["duration_s"])),
                    utilization=utilization,
                    memory_bandwidth=utilization * rng.uniform(0.5, 0.9),
                    interconnect_latency_us=50.0,
                    share=qos,
                    priority_class=QOS_PRIORITY.get(qos, 0),
                )
            )
    cluster = "real cluster" if gpus is None else f"{sum(nodes)} GPUs"
    notes = (
        f"alibaba 2023 trace on the {cluster}: {len(jobs)} tasks, {dropped} created before the window dropped",
    )
    return Workload("alibaba", tuple(jobs), nodes, StartupModel(), notes)


def _column(row: dict[str, str], name: str, kind: type[float] | type[int], default: float | None) -> float:
    text = (row.get(name) or "").strip()
    if not text:
        if default is None:
            raise ValueError(f"{name}: a value is required")
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name}: {text!r} is not finite")
    return value


def read_job_csv(path: Path, node_gpus: Sequence[int], *, name: str | None = None) -> Workload:
    """A CSV with ``job_id, submit_time_s, num_gpus, duration_s`` and optionally ``utilization``,
    ``memory_bandwidth`` (fractions 0..1), ``share``, ``priority_class``, ``checkpoint_s``,
    ``interconnect_latency_us``, ``declared_runtime_s`` (the runtime limit the user declared; empty: none). Workers start like the LLM workload's (:data:`LLM_STARTUP`). Raises
    :class:`SimulationError` naming the line and the column."""
    jobs: list[Job] = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"job_id", "submit_time_s", "num_gpus", "duration_s"} - set(reader.fieldnames or ())
        if missing:
            raise SimulationError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        for line, row in enumerate(reader, start=2):
            try:
                utilization = _column(row, "utilization", float, 0.8)
                bandwidth = _column(row, "memory_bandwidth", float, 0.5)
                if not (0 <= utilization <= 1 and 0 <= bandwidth <= 1):
                    raise ValueError("utilization and memory_bandwidth are fractions between 0 and 1")
                declared = _column(row, "declared_runtime_s", float, math.nan)
                if not math.isnan(declared) and declared <= 0:
                    raise ValueError("declared_runtime_s: must be > 0 seconds (or empty for none)")
                jobs.append(
                    Job(
                        job_id=row["job_id"] or f"line-{line}",
                        submit_s=_column(row, "submit_time_s", float, None),
                        gpus=int(_column(row, "num_gpus", int, None)),
                        duration_s=_column(row, "duration_s", float, None),
                        utilization=utilization,
                        memory_bandwidth=bandwidth,
                        interconnect_latency_us=_column(row, "interconnect_latency_us", float, 100.0),
                        share=row.get("share") or "default",
                        priority_class=int(_column(row, "priority_class", int, 0)),
                        checkpoint_s=_column(row, "checkpoint_s", float, 0.0),
                        declared_runtime_s=None if math.isnan(declared) else declared,
                    )
                )
            except ValueError as error:
                raise SimulationError(f"{path}: line {line}: {error}") from None
    jobs.sort(key=lambda job: job.submit_s)
    return Workload(name or path.stem, tuple(jobs), tuple(node_gpus), LLM_STARTUP)


_SIZES = (8, 16, 32, 64, 128, 256, 512)
# (name, probability, utilization range, memory-bandwidth range, interconnect latency range in µs)
_PROFILES = (
    ("well-tuned", 0.5, (0.85, 0.97), (0.55, 0.80), (100.0, 400.0)),
    ("input-bound", 0.3, (0.25, 0.50), (0.15, 0.35), (100.0, 400.0)),
    ("communication-bound", 0.2, (0.50, 0.70), (0.30, 0.50), (800.0, 1600.0)),
)
_TEAMS = (("team-a", 0.4), ("team-b", 0.3), ("team-c", 0.2), ("team-d", 0.1))


# Users declare a limit with a margin: 1.1x to 4x the time the job needs (log-uniform), rounded up to
# whole hours, as people set "8 hours" rather than 7.3 h.
DECLARED_OVERESTIMATE = (1.1, 4.0)


def declared_runtime(duration_s: float, rng: random.Random) -> float:
    """A declared runtime limit for a job that needs ``duration_s``: an over-estimate in whole hours."""
    low, high = DECLARED_OVERESTIMATE
    factor = math.exp(rng.uniform(math.log(low), math.log(high)))
    return 3600.0 * math.ceil(duration_s * factor / 3600.0)


def llm_workload(*, seed: int = 0, jobs: int = 200, gpus: int = 1024, load: float = 0.9) -> Workload:
    """Seeded LLM-style training gangs on ``gpus`` GPUs of 8-GPU nodes.

    - Size: 8 to 512 GPUs (whole nodes, at most the cluster), P(size) ∝ size^-0.9: many small, a few large.
    - Duration: log-normal, median 2 h, sigma = 1.2 (heavy tail), clipped to 10 min .. 3 days.
    - Profile: 50 % well-tuned (GPU 85-97 %), 30 % input-bound (25-50 %), 20 % communication-bound
      (50-70 %, high interconnect latency).
    - Team (fair-share identifier) a/b/c/d with 40/30/20/10 %; 15 % are Kueue priority class 1000
      ("production"), the rest 100. Checkpoints every 30 min.
    - Arrivals: Poisson, at the rate that offers ``load`` x the cluster's GPU-time over the arrival span.
    - Declared runtime limit (:func:`declared_runtime`): what a user sets as the job's maximum runtime, an
      over-estimate, drawn from its own random stream so the jobs themselves do not depend on it.
    """
    if jobs < 1 or not 0 < load <= 10 or gpus < GANG_NODE_GPUS:
        raise SimulationError("llm workload needs jobs >= 1, 0 < load <= 10 and at least 8 GPUs")
    rng = _rng(seed, "llm")
    declared_rng = _rng(seed, "llm-declared")
    sizes = [s for s in _SIZES if s <= gpus]
    weights = [s**-0.9 for s in sizes]
    drafts = []
    for index in range(jobs):
        size = rng.choices(sizes, weights)[0]
        duration = min(3 * 86400.0, max(600.0, rng.lognormvariate(math.log(7200.0), 1.2)))
        profile = rng.choices(_PROFILES, [p[1] for p in _PROFILES])[0]
        team = rng.choices([t for t, _ in _TEAMS], [w for _, w in _TEAMS])[0]
        drafts.append((index, size, duration, profile, team, rng.random() < 0.15))
    offered = sum(size * duration for _, size, duration, *_ in drafts)
    mean_gap = offered / (load * gpus) / jobs
    clock = 0.0
    out = []
    for index, size, duration, (_, _, util, bandwidth, latency), team, production in drafts:
        out.append(
            Job(
                job_id=f"llm-{index:04d}",
                submit_s=round(clock, 3),
                gpus=size,
                duration_s=round(duration, 3),
                utilization=rng.uniform(*util),
                memory_bandwidth=rng.uniform(*bandwidth),
                interconnect_latency_us=rng.uniform(*latency),
                share=team,
                priority_class=1000 if production else 100,
                checkpoint_s=1800.0,
                declared_runtime_s=declared_runtime(duration, declared_rng),
            )
        )
        clock += rng.expovariate(1.0 / mean_gap)
    notes = (f"llm generator: seed {seed}, {jobs} jobs, {gpus} GPUs, offered load {load:.2f}",)
    return Workload("llm", tuple(out), homogeneous_nodes(gpus), LLM_STARTUP, notes)


def seed_workload(gpus: int = 64) -> Workload:
    """The seed's case: 64 GPUs (8 nodes of 8), 5 jobs submitted a minute apart and all wanting to run at
    once (552 GPU-hours, 8.6 h of the whole cluster), one of them as large as the cluster. Each declares a
    runtime limit drawn as in the LLM workload (:func:`declared_runtime`, seeded per job)."""
    hour = 3600.0
    spec = (
        ("seed-a", 32, 4 * hour, 0.92, 0.70, 200.0, "team-a", 100),
        ("seed-b", 64, 3 * hour, 0.95, 0.75, 250.0, "team-b", 1000),
        ("seed-c", 16, 6 * hour, 0.35, 0.20, 200.0, "team-a", 100),
        ("seed-d", 8, 2 * hour, 0.60, 0.40, 1200.0, "team-c", 100),
        ("seed-e", 24, 5 * hour, 0.40, 0.25, 300.0, "team-b", 100),
    )
    jobs = tuple(
        Job(
            name,
            60.0 * i,
            size,
            duration,
            util,
            bandwidth,
            latency,
            team,
            klass,
            1800.0,
            declared_runtime(duration, _rng(0, f"declared/{name}")),
        )
        for i, (name, size, duration, util, bandwidth, latency, team, klass) in enumerate(spec)
    )
    return Workload("seed", jobs, homogeneous_nodes(gpus), LLM_STARTUP, ("the seed's 64 GPUs, 5 jobs",))
