"""The one definition of "this job opted in to Osprey": one exact value per form, one predicate, one reason.

=========================================  ==========  =========  ===========================================
where the opt-in is read                   opts in     opts out   who reads it with :func:`opt_in`
=========================================  ==========  =========  ===========================================
AWS tag ``osprey:enabled``                 ``true``    ``false``  ingest recognition, every applier (live
                                                                  tags), the gang backends; IAM's
                                                                  ``StringEquals`` condition on the tag
Kubernetes label ``osprey.aws/enabled``    ``true``    ``false``  EKS discovery, the Kueue/Job appliers, the
                                                                  label selector ``osprey.aws/enabled=true``
Slurm comment token ``osprey:enabled``     ``true``    ``false``  the Slurm marker and ``job_submit.lua``
environment ``OSPREY_ENABLED``             ``1``       ``0``      ingest recognition without tags, the Slurm
                                                                  marker, the SDK's script annotation
=========================================  ==========  =========  ===========================================

The value must be exactly the one in the table: no other case, no surrounding spaces, no ``1`` for a tag. IAM's
condition (``StringEquals aws:ResourceTag/osprey:enabled = true``) and a label selector both compare exactly,
so a value every reader accepted but IAM refused (``True``) made a job "managed" that the apply role could not
write. Anything else (``True``, `` TRUE ``, ``1`` as a tag, ``yes``) is not an opt-in: the job is not
managed, and :func:`opt_in` says why and what to write instead (the ingest log and ``osprey explain``
carry that reason). The SDK writes exactly these values (:func:`osprey_control.contract.to_tags`, ...).

The environment keeps ``1`` (docs/design.md §5): it is a shell flag no IAM condition or selector reads, and
changing it would make every job already submitted with ``OSPREY_ENABLED=1`` unmanaged (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from osprey_control.wiring import ENABLED_ENV, ENABLED_KUBERNETES, ENABLED_TAG

__all__ = [
    "ENVIRONMENT_OPT_IN",
    "ENVIRONMENT_OPT_OUT",
    "OPT_IN",
    "OPT_OUT",
    "OptIn",
    "OptInState",
    "opt_in",
    "opt_in_value",
    "opted_in",
]

OPT_IN = "true"  # tags, labels, Slurm comment tokens: what IAM's StringEquals condition and selectors match
OPT_OUT = "false"
ENVIRONMENT_OPT_IN = "1"
ENVIRONMENT_OPT_OUT = "0"

# The exact (opt-in, opt-out) values by key: every key that can opt a job in.
_VALUES: Mapping[str, tuple[str, str]] = {
    ENABLED_TAG: (OPT_IN, OPT_OUT),
    ENABLED_KUBERNETES: (OPT_IN, OPT_OUT),
    ENABLED_ENV: (ENVIRONMENT_OPT_IN, ENVIRONMENT_OPT_OUT),
}


class OptInState(StrEnum):
    IN = "in"  # exactly the opt-in value
    OUT = "out"  # exactly the opt-out value: the job says it is not managed
    ABSENT = "absent"  # the key is not there
    INVALID = "invalid"  # something else: not managed, with a reason


@dataclass(frozen=True, slots=True)
class OptIn:
    state: OptInState
    reason: str = ""  # why the job is not managed (empty when it is)

    @property
    def managed(self) -> bool:
        return self.state is OptInState.IN


def opt_in_value(key: str) -> str:
    """The one value of ``key`` that opts a job in (``true``, or ``1`` for ``OSPREY_ENABLED``)."""
    return _VALUES[key][0]


def opt_in(key: str, value: object) -> OptIn:
    """Whether ``value`` of the opt-in key ``key`` (:data:`ENABLED_TAG`, :data:`ENABLED_KUBERNETES` or
    :data:`ENABLED_ENV`) opts the job in; when it does not, the reason says what to write."""
    accepted, refused = _VALUES[key]
    if value is None:
        return OptIn(OptInState.ABSENT, f"no {key}; set {key}={accepted} to opt the job in")
    if value == accepted:
        return OptIn(OptInState.IN)
    if value == refused:
        return OptIn(OptInState.OUT, f"{key}={refused}: the job opted out")
    shown = repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r}"
    return OptIn(
        OptInState.INVALID,
        f"invalid value {shown:.100}: only exactly {accepted!r} opts the job in (no other case, no spaces: "
        f"IAM conditions and selectors compare it exactly) and {refused!r} opts out; write {key}={accepted}",
    )


def opted_in(key: str, values: Mapping[str, object] | None) -> bool:
    """Whether the tags, labels or environment ``values`` opt the job in by ``key`` (the predicate every
    reader uses: ingest, the appliers, EKS discovery, the Slurm marker)."""
    return opt_in(key, (values or {}).get(key)).managed
