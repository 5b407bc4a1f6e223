"""The cluster a plan runs on: instance-type and GPU presets (from :mod:`osprey_control.catalog`, where every
figure and its source is) with explicit overrides.

Override any figure (``cluster(..., price_per_gpu_hour=...)``), or give all of them without a preset name
(``cluster(gpus, peak_tflops=..., gpu_memory_gib=..., hbm_gbytes=..., nvlink_gbytes=..., network_gbits=...)``):
a custom GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from osprey_control.catalog import GPUS, INSTANCE_CATALOG, GpuSpec

__all__ = ["INSTANCE_TYPES", "Cluster", "InstanceSpec", "cluster"]


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """An instance type the planner offers as a preset: every figure its cost model needs is known."""

    name: str
    gpu: str
    gpus_per_node: int
    network_gbits: float
    price_per_gpu_hour: float


# The planner's presets: the catalog's instance types with a GPU model, a network bandwidth and a price, in the
# catalog's order.
INSTANCE_TYPES: dict[str, InstanceSpec] = {
    entry.name: InstanceSpec(entry.name, entry.gpu, entry.gpus, entry.network_gbits, entry.price_per_gpu_hour)
    for entry in INSTANCE_CATALOG.values()
    if entry.gpu is not None and entry.network_gbits is not None and entry.price_per_gpu_hour is not None
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
    hbm_gbytes: float | None = None,
    peak_tflops_fp8: float | None = None,
    nvlink_gbytes: float | None = None,
    network_gbits: float | None = None,
    price_per_gpu_hour: float | None = None,
    network_latency_us: float = DEFAULT_NETWORK_LATENCY_US,
    speed_factors: Sequence[float] = (),
    allow_cross_node_tp: bool = False,
) -> Cluster:
    """Build a cluster from an instance-type and/or GPU preset; every explicit argument overrides the preset.

    With neither preset, ``peak_tflops``, ``gpu_memory_gib``, ``hbm_gbytes``, ``nvlink_gbytes`` and
    ``network_gbits`` describe a custom GPU (``peak_tflops_fp8`` if it has FP8). ``gpu`` alone (no instance
    type) needs ``network_gbits``; ``gpus`` must fill whole nodes."""
    instance = None
    if instance_type is not None:
        if instance_type not in INSTANCE_TYPES:
            raise ValueError(f"unknown instance type {instance_type!r}; known: {', '.join(INSTANCE_TYPES)}")
        instance = INSTANCE_TYPES[instance_type]
    gpu_name = gpu if gpu is not None else (instance.gpu if instance else None)
    if gpu_name is None:
        spec = _custom_gpu(peak_tflops, gpu_memory_gib, hbm_gbytes, nvlink_gbytes)
    elif gpu_name not in GPUS:
        raise ValueError(f"unknown GPU {gpu_name!r}; known: {', '.join(GPUS)}")
    else:
        spec = GPUS[gpu_name]
    spec = replace(
        spec,
        peak_tflops=spec.peak_tflops if peak_tflops is None else peak_tflops,
        memory_gib=spec.memory_gib if gpu_memory_gib is None else gpu_memory_gib,
        hbm_gbytes=spec.hbm_gbytes if hbm_gbytes is None else hbm_gbytes,
        nvlink_gbytes=spec.nvlink_gbytes if nvlink_gbytes is None else nvlink_gbytes,
        peak_tflops_fp8=spec.peak_tflops_fp8 if peak_tflops_fp8 is None else peak_tflops_fp8,
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


CUSTOM_GPU_FIELDS = ("peak_tflops", "gpu_memory_gib", "hbm_gbytes", "nvlink_gbytes")


def _custom_gpu(
    peak_tflops: float | None,
    gpu_memory_gib: float | None,
    hbm_gbytes: float | None,
    nvlink_gbytes: float | None,
) -> GpuSpec:
    """A GPU with no preset: every figure the cost model reads must be given."""
    given = dict(
        zip(CUSTOM_GPU_FIELDS, (peak_tflops, gpu_memory_gib, hbm_gbytes, nvlink_gbytes), strict=True)
    )
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise ValueError(
            "give an instance type or a GPU, or describe the GPU fully; missing: " + ", ".join(missing)
        )
    return GpuSpec(
        "custom",
        float(peak_tflops or 0),
        float(gpu_memory_gib or 0),
        float(hbm_gbytes or 0),
        float(nvlink_gbytes or 0),
    )
