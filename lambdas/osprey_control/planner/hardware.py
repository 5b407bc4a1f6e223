"""GPUs, instance types and the cluster a plan runs on, with presets and explicit overrides.

Preset figures are vendor datasheet values (dense, no sparsity): 16-bit tensor-core peak, HBM capacity and
bandwidth, NVLink bandwidth per GPU in one direction. Network bandwidth is per node (all NICs together).
Prices are indicative on-demand list prices per GPU-hour; they only scale the score, so a plan comparison
on one cluster does not depend on them. Override any of them (``cluster(..., price_per_gpu_hour=...)``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

__all__ = [
    "GPUS",
    "INSTANCE_TYPES",
    "Cluster",
    "GpuSpec",
    "InstanceSpec",
    "cluster",
]


@dataclass(frozen=True, slots=True)
class GpuSpec:
    name: str
    peak_tflops: float
    memory_gib: float
    hbm_gbytes: float
    nvlink_gbytes: float
    peak_tflops_fp8: float | None = None
    bf16: bool = True


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    name: str
    gpu: str
    gpus_per_node: int
    network_gbits: float
    price_per_gpu_hour: float


GPUS: dict[str, GpuSpec] = {
    "V100": GpuSpec("V100", 125.0, 32.0, 900.0, 150.0, bf16=False),
    "A100-40GB": GpuSpec("A100-40GB", 312.0, 40.0, 1555.0, 300.0),
    "A100-80GB": GpuSpec("A100-80GB", 312.0, 80.0, 2039.0, 300.0),
    "H100": GpuSpec("H100", 989.0, 80.0, 3350.0, 450.0, peak_tflops_fp8=1979.0),
    "H200": GpuSpec("H200", 989.0, 141.0, 4800.0, 450.0, peak_tflops_fp8=1979.0),
}

INSTANCE_TYPES: dict[str, InstanceSpec] = {
    "p4d.24xlarge": InstanceSpec("p4d.24xlarge", "A100-40GB", 8, 400.0, 4.10),
    "p4de.24xlarge": InstanceSpec("p4de.24xlarge", "A100-80GB", 8, 400.0, 5.12),
    "p5.48xlarge": InstanceSpec("p5.48xlarge", "H100", 8, 3200.0, 6.88),
    "p5e.48xlarge": InstanceSpec("p5e.48xlarge", "H200", 8, 3200.0, 7.91),
    "p5en.48xlarge": InstanceSpec("p5en.48xlarge", "H200", 8, 3200.0, 8.40),
}

# Latencies of one message hop, used for every collective step and pipeline send.
DEFAULT_NVLINK_LATENCY_US = 5.0
DEFAULT_NETWORK_LATENCY_US = 15.0


@dataclass(frozen=True, slots=True)
class Cluster:
    """``nodes`` x ``gpus_per_node`` GPUs. ``speed_factors`` (one per GPU in rank order, 1.0 = nominal) model
    stragglers and mixed hardware; empty means all nominal."""

    nodes: int
    gpus_per_node: int
    gpu: GpuSpec
    network_gbits: float
    nvlink_gbytes: float
    network_latency_us: float = DEFAULT_NETWORK_LATENCY_US
    nvlink_latency_us: float = DEFAULT_NVLINK_LATENCY_US
    price_per_gpu_hour: float = 1.0
    speed_factors: tuple[float, ...] = field(default=())
    allow_cross_node_tp: bool = False

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("nodes and gpus_per_node must be positive integers")
        for name in ("network_gbits", "nvlink_gbytes", "price_per_gpu_hour"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name in ("network_latency_us", "nvlink_latency_us"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")
        if self.speed_factors:
            if len(self.speed_factors) != self.gpus:
                raise ValueError(
                    f"speed_factors needs one value per GPU ({self.gpus}), got {len(self.speed_factors)}"
                )
            if not all(math.isfinite(f) and f > 0 for f in self.speed_factors):
                raise ValueError("speed_factors must be positive numbers")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def network_bytes_per_s(self) -> float:
        return self.network_gbits * 1e9 / 8.0

    @property
    def nvlink_bytes_per_s(self) -> float:
        return self.nvlink_gbytes * 1e9

    @property
    def uniform(self) -> bool:
        return not self.speed_factors or min(self.speed_factors) == max(self.speed_factors)

    def speed(self, rank: int) -> float:
        return self.speed_factors[rank] if self.speed_factors else 1.0

    def with_changes(
        self,
        *,
        network_gbits: float | None = None,
        network_latency_us: float | None = None,
        nvlink_gbytes: float | None = None,
        speed_factors: Sequence[float] | None = None,
    ) -> Cluster:
        """A copy with measured values in place of the nominal ones (what re-planning evaluates against)."""
        return replace(
            self,
            network_gbits=self.network_gbits if network_gbits is None else network_gbits,
            network_latency_us=self.network_latency_us if network_latency_us is None else network_latency_us,
            nvlink_gbytes=self.nvlink_gbytes if nvlink_gbytes is None else nvlink_gbytes,
            speed_factors=self.speed_factors if speed_factors is None else tuple(speed_factors),
        )


def cluster(
    gpus: int,
    *,
    instance_type: str | None = None,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    peak_tflops: float | None = None,
    gpu_memory_gib: float | None = None,
    nvlink_gbytes: float | None = None,
    network_gbits: float | None = None,
    price_per_gpu_hour: float | None = None,
    network_latency_us: float = DEFAULT_NETWORK_LATENCY_US,
    speed_factors: Sequence[float] = (),
    allow_cross_node_tp: bool = False,
) -> Cluster:
    """Build a cluster from an instance-type and/or GPU preset; every explicit argument overrides the preset.

    ``gpu`` alone (no instance type) needs ``network_gbits``; ``gpus`` must fill whole nodes."""
    instance = None
    if instance_type is not None:
        if instance_type not in INSTANCE_TYPES:
            raise ValueError(f"unknown instance type {instance_type!r}; known: {', '.join(INSTANCE_TYPES)}")
        instance = INSTANCE_TYPES[instance_type]
    gpu_name = gpu if gpu is not None else (instance.gpu if instance else None)
    if gpu_name is None:
        raise ValueError("give an instance type or a GPU")
    if gpu_name not in GPUS:
        raise ValueError(f"unknown GPU {gpu_name!r}; known: {', '.join(GPUS)}")
    spec = GPUS[gpu_name]
    spec = replace(
        spec,
        peak_tflops=spec.peak_tflops if peak_tflops is None else peak_tflops,
        memory_gib=spec.memory_gib if gpu_memory_gib is None else gpu_memory_gib,
        nvlink_gbytes=spec.nvlink_gbytes if nvlink_gbytes is None else nvlink_gbytes,
    )
    per_node = gpus_per_node or (instance.gpus_per_node if instance else 8)
    network = network_gbits if network_gbits is not None else (instance.network_gbits if instance else None)
    if network is None:
        raise ValueError("network bandwidth per node is required without an instance type")
    if 0 < gpus < per_node:
        # A job on part of one node: the node is as large as the job.
        per_node = gpus
    if gpus < 1 or gpus % per_node:
        raise ValueError(f"gpus ({gpus}) must be a positive multiple of gpus per node ({per_node})")
    price = (
        price_per_gpu_hour
        if price_per_gpu_hour is not None
        else (instance.price_per_gpu_hour if instance else 1.0)
    )
    return Cluster(
        nodes=gpus // per_node,
        gpus_per_node=per_node,
        gpu=spec,
        network_gbits=network,
        nvlink_gbytes=spec.nvlink_gbytes,
        network_latency_us=network_latency_us,
        price_per_gpu_hour=price,
        speed_factors=tuple(speed_factors),
        allow_cross_node_tp=allow_cross_node_tp,
    )
