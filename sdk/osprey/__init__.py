"""Osprey: GPU-job priority control plane for SageMaker, AWS Batch and EKS (Kueue).

The user-facing package. Submodules:

- ``osprey.cli``: the ``osprey`` command line.
- ``osprey.policy``: load and validate ``PriorityDerivationPolicy`` documents.
"""

from osprey.parallelism import adjust_parallelism
from osprey.planning import report_progress, request_planning

__all__ = ["__version__", "adjust_parallelism", "report_progress", "request_planning"]

__version__ = "0.1.0"
