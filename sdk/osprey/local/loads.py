"""The simulated fleet's jobs and their load: what each publishes to CloudWatch, series by series.

Load is a deterministic function of the tick (one tick per cycle), so a demo run is reproducible: each job's GPU
utilisation follows its own sine wave around a base level; memory bandwidth follows at 70 %, GPU memory at 40 %
plus half the utilisation; the interconnect latency is a constant per job.

Each job publishes exactly the series the collector reads for it (:mod:`osprey_control.metrics.queries`): what
its backend's metric source provides, for the metrics its policy reads
(:func:`osprey_control.metrics.needs.metrics_needed`; a policy with a custom rule reads every node metric,
since its Lambda receives them all). So every load the demo prints is one a decision uses, and no decision
says no-data for a metric the demo published. The sources, by backend:

- AWS Batch container jobs: the CloudWatch agent's per-instance ``nvidia_smi_utilization_gpu``,
  ``nvidia_smi_utilization_memory`` (memory bandwidth), ``nvidia_smi_memory_used`` / ``_total``;
- SageMaker training jobs (queued or direct): SageMaker's per-host ``GPUUtilization`` /
  ``GPUMemoryUtilization``, sums over the host's 8 GPUs. SageMaker publishes no memory bandwidth;
- EKS Jobs: Container Insights' ``pod_gpu_utilization`` / ``pod_gpu_memory_utilization`` of every pod that
  runs (a pod never scheduled has no container, hence no series). Container Insights publishes no memory
  bandwidth either;
- every job, as ``osprey.runtime.report_interconnect_latency`` publishes it from the lead process (rank 0):
  ``InterconnectLatencyMicroseconds`` in the Osprey namespace, dimensions ``Backend``, ``JobId``, ``Host``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from osprey_control.metrics import metrics_needed
from osprey_control.policy import load_policy_files, shipped_policy_dir
from osprey_control.wiring import (
    CONTAINER_INSIGHTS_DIMENSIONS,
    CONTAINER_INSIGHTS_NAMESPACE,
    CWAGENT_DIMENSION,
    CWAGENT_GPU_UTILIZATION_METRIC,
    CWAGENT_MEMORY_TOTAL_METRIC,
    CWAGENT_MEMORY_USED_METRIC,
    CWAGENT_MEMORY_UTILIZATION_METRIC,
    CWAGENT_NAMESPACE,
    INTERCONNECT_LATENCY_METRIC,
    METRICS_NAMESPACE,
    POD_GPU_MEMORY_UTILIZATION_METRIC,
    POD_GPU_UTILIZATION_METRIC,
    RUNTIME_DIMENSIONS,
    SAGEMAKER_DIMENSION,
    SAGEMAKER_GPU_MEMORY_UTILIZATION_METRIC,
    SAGEMAKER_GPU_UTILIZATION_METRIC,
    SAGEMAKER_NAMESPACE,
)

__all__: list[str] = []

EKS_CLUSTER = "osprey-local"
EKS_NAMESPACE = "ml"
GPUS_PER_NODE = 8
GPU_MEMORY_MIB = 81920  # an 80 GB A100/H100, as nvidia_smi_memory_total reports it
PERIOD_TICKS = 12


@dataclass(frozen=True)
class FleetJob:
    label: str
    backend: str  # "batch" | "sagemaker-queued" | "sagemaker" | "eks"
    base_gpu: float  # percent
    swing: float  # amplitude of the sine, percent
    phase: float  # fraction of a period
    policy: str = "training-policy"
    gang_workers: int = 0  # EKS: a co-scheduled Job of this many pods (0: one pod, not a gang) ...
    gang_ready: int = 0  # ... of which this many turn Ready within the gang timeout
    # Batch: EC2 sends the job's instance a "rebalance" recommendation or an "interruption" warning.
    spot_warning: str = ""


@dataclass(frozen=True)
class SeededJob:
    label: str
    backend: str
    native_id: str
    node: str  # instance id (Batch) or SageMaker host "<job>/algo-1"
    base_gpu: float
    swing: float
    phase: float
    gang_workers: int = 0
    gang_ready: int = 0
    policy: str = "training-policy"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def pods(self) -> list[str]:
        """EKS: the pods that run (a gang's first ``gang_ready``; the others are never scheduled)."""
        if not self.gang_workers:
            return [self.node]
        return [f"{self.label}-{index}" for index in range(self.gang_ready)]


@dataclass(frozen=True)
class LoadSample:
    """One job's load at one tick: percents, and the interconnect latency in microseconds."""

    gpu: float
    memory_bandwidth: float
    gpu_memory: float
    latency_us: float


@dataclass(frozen=True)
class Series:
    """One CloudWatch series the fleet publishes, and its value this tick."""

    namespace: str
    metric_name: str
    dimensions: tuple[tuple[str, str], ...]
    value: float


def sample_at(job: SeededJob | FleetJob, tick: int) -> LoadSample:
    """The load of ``job`` at ``tick`` (module docstring)."""
    angle = 2 * math.pi * (tick / PERIOD_TICKS + job.phase)
    gpu = round(min(100.0, max(0.0, job.base_gpu + job.swing * math.sin(angle))), 1)
    return LoadSample(gpu, round(gpu * 0.7, 1), round(40 + gpu / 2, 1), round(60 + 240 * job.phase, 1))


def load_at(job: SeededJob | FleetJob, tick: int) -> tuple[float, float]:
    """(GPU %, memory bandwidth %) of ``job`` at ``tick``."""
    sample = sample_at(job, tick)
    return sample.gpu, sample.memory_bandwidth


@cache
def policy_metrics(name: str) -> frozenset[str]:
    """The metrics the collector reads for a job under the shipped (or example) policy ``name``."""
    for directory in (shipped_policy_dir(), shipped_policy_dir(examples=True)):
        path = directory / f"{name}.yaml"
        if path.is_file():
            [loaded] = load_policy_files([path]).policies
            return metrics_needed(loaded.policy)
    raise LookupError(f"the simulated fleet names policy {name!r}, which Osprey does not ship")


def _runtime_dimensions(job: SeededJob) -> tuple[tuple[str, str], ...]:
    """``osprey.runtime``'s dimensions for the job's lead process (rank 0)."""
    if job.backend == "batch":
        values = ("batch", job.native_id, "0")
    elif job.backend == "eks":
        values = ("eks", job.native_id, job.pods()[0])
    else:
        values = ("sagemaker", job.label, "algo-1")  # the training job's name
    return tuple(zip(RUNTIME_DIMENSIONS, values, strict=True))


def series_of(job: SeededJob, tick: int, osprey_namespace: str = METRICS_NAMESPACE) -> list[Series]:
    """Every series ``job`` publishes at ``tick``: its backend's sources for the metrics its policy reads."""
    load, wanted = sample_at(job, tick), policy_metrics(job.policy)
    found: list[tuple[str, str, tuple[tuple[str, str], ...], float, str]] = []
    if job.backend == "batch":
        node = ((CWAGENT_DIMENSION, job.node),)
        used = round(GPU_MEMORY_MIB * load.gpu_memory / 100)
        found += [
            (CWAGENT_NAMESPACE, CWAGENT_GPU_UTILIZATION_METRIC, node, load.gpu, "gpu_utilization"),
            (CWAGENT_NAMESPACE, CWAGENT_MEMORY_UTILIZATION_METRIC, node, load.memory_bandwidth,
             "memory_bandwidth_utilization"),
            (CWAGENT_NAMESPACE, CWAGENT_MEMORY_USED_METRIC, node, used, "gpu_memory_utilization"),
            (CWAGENT_NAMESPACE, CWAGENT_MEMORY_TOTAL_METRIC, node, GPU_MEMORY_MIB, "gpu_memory_utilization"),
        ]  # fmt: skip
    elif job.backend == "eks":
        for pod in job.pods():
            dims = tuple(zip(CONTAINER_INSIGHTS_DIMENSIONS, (EKS_CLUSTER, EKS_NAMESPACE, pod), strict=True))
            found += [
                (CONTAINER_INSIGHTS_NAMESPACE, POD_GPU_UTILIZATION_METRIC, dims, load.gpu, "gpu_utilization"),
                (CONTAINER_INSIGHTS_NAMESPACE, POD_GPU_MEMORY_UTILIZATION_METRIC, dims, load.gpu_memory,
                 "gpu_memory_utilization"),
            ]  # fmt: skip
    else:
        # SageMaker reports the sum over the host's GPUs.
        host = ((SAGEMAKER_DIMENSION, job.node),)
        found += [
            (SAGEMAKER_NAMESPACE, SAGEMAKER_GPU_UTILIZATION_METRIC, host, load.gpu * GPUS_PER_NODE,
             "gpu_utilization"),
            (SAGEMAKER_NAMESPACE, SAGEMAKER_GPU_MEMORY_UTILIZATION_METRIC, host, load.gpu_memory * GPUS_PER_NODE,
             "gpu_memory_utilization"),
        ]  # fmt: skip
    latency = (INTERCONNECT_LATENCY_METRIC, load.latency_us, "node_interconnect_latency")
    found.append((osprey_namespace, latency[0], _runtime_dimensions(job), latency[1], latency[2]))
    return [
        Series(namespace, name, dims, float(value))
        for namespace, name, dims, value, metric in found
        if metric in wanted
    ]
