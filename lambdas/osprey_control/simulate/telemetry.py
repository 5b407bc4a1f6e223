"""Simulated CloudWatch: what the derivation engine would read for a job at a cycle.

A training job publishes, per node, ``gpu_utilization`` and ``memory_bandwidth_utilization`` (percent: its
profile ± Gaussian noise, clamped to 0..100) and ``node_interconnect_latency`` (µs, ± noise); a job that is
queued, backing off or still starting publishes no node metrics yet (the agent starts with the job), only
the job-level ``queue_wait`` (seconds spent queued so far). Missing data stays missing, never zero.
"""

from __future__ import annotations

import random

from osprey_control.derivation import JobMetrics, NodeMetrics
from osprey_control.simulate.sim import JobRun, Status

__all__ = ["job_metrics"]


def _clamp(value: float, low: float, high: float) -> float:
    return low if value < low else high if value > high else value


def job_metrics(run: JobRun, now: float, rng: random.Random, noise: float = 3.0) -> JobMetrics:
    waited = run.queued_s + (now - run.queued_since_s if run.queued_since_s is not None else 0.0)
    job = run.job
    nodes: tuple[NodeMetrics, ...] = ()
    if run.status is Status.TRAINING:
        gauss = rng.gauss
        util = 100.0 * job.utilization
        bandwidth = 100.0 * job.memory_bandwidth
        latency = job.interconnect_latency_us
        nodes = tuple(
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
    return JobMetrics(job.job_id, nodes, {"queue_wait": waited}, backend="simulated", name=job.job_id)
