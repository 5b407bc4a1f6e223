"""Appliers: write a cycle's priority changes to the backends (docs/design.md §6), one report per cycle.

    >>> from osprey_control.apply import PriorityChange, apply_all, BatchShareApplier, ServiceJobApplier
    >>> report = apply_all(changes, [ServiceJobApplier(batch), BatchShareApplier(batch)])  # doctest: +SKIP

Only changed priorities are written, and only for jobs tagged ``osprey:enabled=true``. The EKS applier lives in
its own module and implements the same :class:`Applier` protocol. See ``docs/metrics-and-actuation.md``.
"""

from osprey_control.apply.base import (
    DERIVED_PRIORITY_TAG,
    Applier,
    ApplyReport,
    ApplyResult,
    GuardedApplier,
    Housekeeper,
    Outcome,
    PriorityChange,
    apply_all,
    is_enabled,
    prefilter,
)
from osprey_control.apply.batch import MAX_WEIGHT, MIN_WEIGHT, BatchShareApplier, weight_factor
from osprey_control.apply.sagemaker import ServiceJobApplier, TrainingJobTagApplier

__all__ = [
    "DERIVED_PRIORITY_TAG",
    "MAX_WEIGHT",
    "MIN_WEIGHT",
    "Applier",
    "ApplyReport",
    "ApplyResult",
    "BatchShareApplier",
    "GuardedApplier",
    "Housekeeper",
    "Outcome",
    "PriorityChange",
    "ServiceJobApplier",
    "TrainingJobTagApplier",
    "apply_all",
    "is_enabled",
    "prefilter",
    "weight_factor",
]
