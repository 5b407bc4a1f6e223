"""Osprey: GPU-job priority control plane for SageMaker, AWS Batch and EKS (Kueue).

The user-facing package. Submodules:

- ``osprey.cli``: the ``osprey`` command line.
- ``osprey.policy``: load and validate ``PriorityDerivationPolicy`` documents.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
