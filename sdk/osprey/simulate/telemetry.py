"""Simulated CloudWatch and registry: what the derivation engine would read for a job at a cycle.

Node metrics: a training job publishes, per node, ``gpu_utilization`` and ``memory_bandwidth_utilization``
(percent: its profile ± Gaussian noise, clamped to 0..100) and ``node_interconnect_latency`` (µs, ± noise);
a job that is queued, backing off or still starting publishes none yet (the agent starts with the job).
Missing data stays missing, never zero.

Job-level metrics come from :mod:`osprey_control.derivation.job_signals`, the definitions the production
collector uses, fed with what production would know:

- ``queue_wait``: seconds since submission (docs/design.md §3; the collector's definition, so it keeps growing
  while the job runs);
- ``attained_service``: the job's allocation intervals x GPUs (the registry's intervals);
- ``remaining_time``: while the job trains, the runtime's progress report (``report_progress``: the
  ``RemainingSeconds`` it computes from work done of the total, which a training script knows as steps);
  otherwise its budget minus the time it has held GPUs: the user's ``expected_runtime`` estimate when it has
  one, else its declared runtime limit. A job with neither has no data until it reports. The true duration is never read before the job reports progress;
- ``requested_gpus``: the job's GPUs.
"""

from __future__ import annotations

import random

from osprey.simulate.sim import JobRun, Status
from osprey_control.derivation import (
    NodeMetrics,
    ProgressReport,
    attained_service_gpu_hours,
    held_seconds,
    job_level_values,
    remaining_time_s,
)

__all__: list[str] = []


def _clamp(value: float, low: float, high: float) -> float:
    return low if value < low else high if value > high else value


def _progress(run: JobRun, now: float) -> ProgressReport | None:
    if run.status is not Status.TRAINING or run.train_started_s is None:
        return None
    # One "step" per second of work, so the runtime's RemainingSeconds, (total - step) x step time, is the
    # work left in seconds.
    done = run.work_done_s + (now - run.train_started_s)
    return ProgressReport(remaining_s=max(0.0, run.job.duration_s - done), at_s=now)


def node_metrics(run: JobRun, rng: random.Random, noise: float = 3.0) -> tuple[NodeMetrics, ...]:
    """What the CloudWatch agent shows for a training job's nodes (none for a job not training)."""
    if run.status is not Status.TRAINING:
        return ()
    job = run.job
    gauss = rng.gauss
    util = 100.0 * job.utilization
    bandwidth = 100.0 * job.memory_bandwidth
    latency = job.interconnect_latency_us
    return tuple(
        NodeMetrics(
            f"{job.job_id}/node-{node}",
            {
                "gpu_utilization": _clamp(gauss(util, noise), 0.0, 100.0),
                "memory_bandwidth_utilization": _clamp(gauss(bandwidth, noise), 0.0, 100.0),
                "node_interconnect_latency": max(0.0, gauss(latency, latency * noise / 100.0)),
            },
        )
        for node, _ in run.allocation
    )


def job_values(run: JobRun, now: float) -> dict[str, float]:
    """The job-level metrics, from the production definitions (module docstring)."""
    job = run.job
    remaining = remaining_time_s(
        now_s=now,
        progress=_progress(run, now),
        running=run.status in (Status.STARTING, Status.TRAINING),
        held_s=held_seconds(run.intervals, now),
        expected_runtime_s=job.expected_runtime_s,
        declared_limit_s=job.declared_runtime_s,
    )
    return job_level_values(
        queue_wait_s=now - job.submit_s,
        attained_gpu_hours=attained_service_gpu_hours(run.intervals, now),
        remaining_s=remaining,
        requested_gpus=job.gpus,
    )
