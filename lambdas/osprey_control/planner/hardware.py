"""GPUs, instance types and the cluster a plan runs on, with presets and explicit overrides.

Preset figures (dense, no sparsity) and their sources:

========== ============= ============= ========= ======== ================== =====================================
GPU        bf16 TFLOP/s  fp8 TFLOP/s   memory    HBM GB/s NVLink GB/s (1 dir) source
========== ============= ============= ========= ======== ================== =====================================
V100       125 (fp16)    -             32 GB     900      150                NVIDIA V100 datasheet
A100-40GB  312           -             40 GB     1555     300 (NVLink 3)     NVIDIA A100 datasheet (SXM4)
A100-80GB  312           -             80 GB     2039     300                NVIDIA A100 datasheet (SXM4)
H100       989           1979          80 GB     3350     450 (NVLink 4)     NVIDIA H100 datasheet (SXM5)
H200       989           1979          141 GB    4800     450                NVIDIA H200 datasheet (SXM)
B200       2250          4500          180 GB    8000     900 (NVLink 5)     NVIDIA HGX B200 / DGX B200 datasheet
========== ============= ============= ========= ======== ================== =====================================

Instance types (AWS instance-type pages, "Accelerated computing": GPUs, GPU memory, network bandwidth; EFA is
the whole node's network here, all NICs together):

================ ===================== ============ =========================== =========================
instance type    GPUs                  GPU memory   network (EFA)               $ / GPU-hour (indicative)
================ ===================== ============ =========================== =========================
p4d.24xlarge     8 x A100 40 GB        320 GB       400 Gb/s (4 x 100, EFA v1)  4.10
p4de.24xlarge    8 x A100 80 GB        640 GB       400 Gb/s (4 x 100, EFA v1)  5.12
p5.48xlarge      8 x H100 80 GB        640 GB       3200 Gb/s (32 x 100, EFA v2) 6.88
p5e.48xlarge     8 x H200 141 GB       1128 GB      3200 Gb/s (32 x 100, EFA v2) 7.91
p5en.48xlarge    8 x H200 141 GB       1128 GB      3200 Gb/s (16 x 200, EFA v3) 8.40
p6-b200.48xlarge 8 x B200 180 GB       1440 GB      3200 Gb/s (8 x 400, EFA v4)  14.24
================ ===================== ============ =========================== =========================

Memory is entered in GiB as the driver reports it (H100 80 GB: 79.6 GiB, rounded to the nominal figure for
the 80 GB parts, 140 GiB for H200, 179 GiB for B200). Prices only scale the score, so a plan comparison on one
cluster does not depend on them. Override any figure (``cluster(..., price_per_gpu_hour=...)``), or give all
of them without a preset name (``cluster(gpus, peak_tflops=..., gpu_memory_gib=..., hbm_gbytes=...,
nvlink_gbytes=..., network_gbits=...)``): a custom GPU.
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
    # Fraction of peak a large dense 16-bit GEMM sustains on this GPU; None: the efficiency model's ``gemm``
    # (calibrated on A100, which holds its boost clock under tensor-core load). FP8 GEMMs run at the
    # efficiency model's own ``gemm_fp8`` of ``peak_tflops_fp8`` (set from a measured FP8/16-bit GEMM ratio).
    gemm_efficiency: float | None = None
    # FP8 GEMMs take only the TN layout (Ada, Hopper), so Transformer Engine writes a transposed FP8 copy
    # of every cast tensor; Blackwell reads either layout (TE's FP8 current-scaling docs, "Transpose handling").
    fp8_transposes: bool = True

    @property
    def has_fp8(self) -> bool:
        return self.peak_tflops_fp8 is not None


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
    "H100": GpuSpec("H100", 989.0, 80.0, 3350.0, 450.0, peak_tflops_fp8=1979.0, gemm_efficiency=0.72),
    "H200": GpuSpec("H200", 989.0, 140.0, 4800.0, 450.0, peak_tflops_fp8=1979.0, gemm_efficiency=0.72),
    "B200": GpuSpec(
        "B200",
        2250.0,
        179.0,
        8000.0,
        900.0,
        peak_tflops_fp8=4500.0,
        gemm_efficiency=0.72,
        fp8_transposes=False,
    ),
}

INSTANCE_TYPES: dict[str, InstanceSpec] = {
    "p4d.24xlarge": InstanceSpec("p4d.24xlarge", "A100-40GB", 8, 400.0, 4.10),
    "p4de.24xlarge": InstanceSpec("p4de.24xlarge", "A100-80GB", 8, 400.0, 5.12),
    "p5.48xlarge": InstanceSpec("p5.48xlarge", "H100", 8, 3200.0, 6.88),
    "p5e.48xlarge": InstanceSpec("p5e.48xlarge", "H200", 8, 3200.0, 7.91),
    "p5en.48xlarge": InstanceSpec("p5en.48xlarge", "H200", 8, 3200.0, 8.40),
    "p6-b200.48xlarge": InstanceSpec("p6-b200.48xlarge", "B200", 8, 3200.0, 14.24),
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
