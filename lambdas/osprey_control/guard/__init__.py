"""The guard: every cycle, each pool's candidate orders run forward through its backend's admission rule, and
the order written is the one predicted to wait least without losing goodput, else the backend's native order.

Pure Python, no AWS import, no clock: the collect step (:mod:`osprey_control.metrics.guard`) and the simulator
(``osprey.simulate``) run the same code. docs/policies.md, "The guard", says what it does and why.
"""

from osprey_control.guard.candidates import (
    GUARD_NOTE,
    NO_RESERVATION,
    NO_YIELD,
    POLICY,
    GuardJob,
    build_candidates,
    native_priority,
    priority_floors,
    realize,
    reservation_variants,
    unwritten_priority,
)
from osprey_control.guard.choose import (
    NATIVE,
    Candidate,
    CandidateScore,
    GuardSettings,
    GuardVerdict,
    choose_order,
    echo_arrivals,
    native_verdict,
    pool_signature,
    runtime_prior,
)
from osprey_control.guard.forward import ForwardOutcome, LookJob, LookPool, Model, run_forward
from osprey_control.guard.free_profile import FreeProfile

__all__ = [
    "GUARD_NOTE",
    "NATIVE",
    "NO_RESERVATION",
    "NO_YIELD",
    "POLICY",
    "Candidate",
    "CandidateScore",
    "ForwardOutcome",
    "FreeProfile",
    "GuardJob",
    "GuardSettings",
    "GuardVerdict",
    "LookJob",
    "LookPool",
    "Model",
    "build_candidates",
    "choose_order",
    "echo_arrivals",
    "native_priority",
    "native_verdict",
    "pool_signature",
    "priority_floors",
    "realize",
    "reservation_variants",
    "run_forward",
    "runtime_prior",
    "unwritten_priority",
]
