"""The one catalog of GPU hardware: each GPU model and each EC2 / SageMaker instance type once.

Pure Python, no AWS import. Every part that needs a hardware fact reads it here: ingest (GPUs of a SageMaker
``ResourceConfig``), the collector (SageMaker reports a host's GPU utilisation summed over its GPUs, so it
divides by the host's GPU count) and the planner (its instance-type and GPU presets,
:mod:`osprey_control.planner.hardware`).

GPU models (dense, no sparsity) and their sources:

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

Memory is entered in GiB as the driver reports it (H100 80 GB: 79.6 GiB, rounded to the nominal figure for
the 80 GB parts, 140 GiB for H200, 179 GiB for B200).

Instance types the planner has presets for (AWS instance-type pages, "Accelerated computing": GPUs, GPU
memory, network bandwidth; EFA is the whole node's network here, all NICs together):

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

The other instance types (p3, p3dn, p5.4xlarge, g4dn, g5, g6, g6e: the sizes SageMaker and Batch GPU fleets
use) carry only their GPU count, from the same AWS pages; that is all the collector and ingest need. A type
gets a GPU model, network and price when the planner is to offer it as a preset. Prices only scale the
planner's score, so a plan comparison on one cluster does not depend on them; ``osprey cost`` prices the
control plane, not the fleet, and reads none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "GPUS",
    "INSTANCE_CATALOG",
    "GpuSpec",
    "InstanceType",
    "gpus_for_instance_type",
]

# SageMaker names an instance type "ml.<EC2 type>"; the hardware is the EC2 type's.
_SAGEMAKER_PREFIX = "ml."


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model: the figures of the module docstring's first table (the planner's cost model reads them)."""

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
class InstanceType:
    """One instance type (EC2 name, without SageMaker's ``ml.``): its GPUs per instance, and, for the planner's
    presets, its GPU model (a key of :data:`GPUS`), network bandwidth per node (Gb/s, all EFA NICs together)
    and indicative on-demand price per GPU-hour ($). None: the project does not use that figure for the type."""

    name: str
    gpus: int
    gpu: str | None = None
    network_gbits: float | None = None
    price_per_gpu_hour: float | None = None


GPUS: Mapping[str, GpuSpec] = MappingProxyType(
    {
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
)

# Each instance type once (a second entry is an error at import, see _by_name). Order is the order the planner
# lists its presets in (``--instance-type`` help, "known: ..." errors).
_ENTRIES: tuple[InstanceType, ...] = (
    # GPU count only (module docstring).
    InstanceType("p3.2xlarge", 1),
    InstanceType("p3.8xlarge", 4),
    InstanceType("p3.16xlarge", 8),
    InstanceType("p3dn.24xlarge", 8),
    # The planner's presets: the module docstring's second table.
    InstanceType("p4d.24xlarge", 8, "A100-40GB", 400.0, 4.10),
    InstanceType("p4de.24xlarge", 8, "A100-80GB", 400.0, 5.12),
    InstanceType("p5.4xlarge", 1),
    InstanceType("p5.48xlarge", 8, "H100", 3200.0, 6.88),
    InstanceType("p5e.48xlarge", 8, "H200", 3200.0, 7.91),
    InstanceType("p5en.48xlarge", 8, "H200", 3200.0, 8.40),
    InstanceType("p6-b200.48xlarge", 8, "B200", 3200.0, 14.24),
    # GPU count only.
    InstanceType("g4dn.xlarge", 1),
    InstanceType("g4dn.2xlarge", 1),
    InstanceType("g4dn.4xlarge", 1),
    InstanceType("g4dn.8xlarge", 1),
    InstanceType("g4dn.16xlarge", 1),
    InstanceType("g4dn.12xlarge", 4),
    InstanceType("g4dn.metal", 8),
    *(
        InstanceType(f"{family}.{size}", gpus)
        for family in ("g5", "g6", "g6e")
        for size, gpus in (
            ("xlarge", 1),
            ("2xlarge", 1),
            ("4xlarge", 1),
            ("8xlarge", 1),
            ("16xlarge", 1),
            ("12xlarge", 4),
            ("24xlarge", 4),
            ("48xlarge", 8),
        )
    ),
)


def _by_name(entries: Iterable[InstanceType]) -> Mapping[str, InstanceType]:
    """The entries by name; a name twice, or a GPU model not in :data:`GPUS`, is a mistake in this file."""
    table: dict[str, InstanceType] = {}
    for entry in entries:
        if entry.name in table:
            raise ValueError(f"instance type {entry.name!r} is in the catalog twice; keep one entry")
        if entry.gpu is not None and entry.gpu not in GPUS:
            raise ValueError(f"instance type {entry.name!r} names GPU {entry.gpu!r}, which is not in GPUS")
        table[entry.name] = entry
    return MappingProxyType(table)


INSTANCE_CATALOG: Mapping[str, InstanceType] = _by_name(_ENTRIES)


def gpus_for_instance_type(instance_type: str | None) -> int | None:
    """GPUs per host of an EC2 or SageMaker (``ml.``) instance type, None when unknown."""
    if not instance_type:
        return None
    entry = INSTANCE_CATALOG.get(instance_type.removeprefix(_SAGEMAKER_PREFIX))
    return entry.gpus if entry else None
