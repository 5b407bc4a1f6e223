"""Osprey: GPU-job priority control plane for SageMaker, AWS Batch, EKS (Kueue) and Slurm (ParallelCluster).

The user-facing package. What a training job calls is here: :func:`adjust_parallelism`,
:func:`request_planning` and :func:`report_plan_progress` (the parallelism planner). Submodules:

- ``osprey.sagemaker``: the SageMaker v2 ``PyTorch`` estimator with the ``osprey`` block in ``distribution``;
- ``osprey.batch``, ``osprey.eks``, ``osprey.slurm``: the same block for AWS Batch, Kubernetes and Slurm jobs;
- ``osprey.runtime``: what a running job reports (progress, step time, interconnect latency);
- ``osprey.simulate``: the cluster simulator (each scheduler with and without Osprey);
- ``osprey.local``: the control plane on an embedded local AWS; ``osprey.cost``: its monthly bill;
- ``osprey.cli``: the ``osprey`` command line.
"""

from osprey.parallelism import adjust_parallelism
from osprey.planning import report_plan_progress, request_planning

__all__ = ["__version__", "adjust_parallelism", "report_plan_progress", "request_planning"]

__version__ = "0.1.0"
