"""Which fair-share entries Osprey owns, and so may create, change and remove (issue 28; docs/metrics-and-actuation.md,
"What Osprey changes, and what it never touches").

An entry's ``weightFactor`` weighs *every* job submitted with its share identifier, opted in or not, so owning an
entry takes two things, both checked before any write:

- *the identifier is Osprey's*: it starts with ``osprey-`` (:data:`PREFIX`): a team share
  ``osprey-<team>-g<class>`` (``osprey.batch.team_share``) or a job's own ``osprey-job-<id>``
  (``osprey.batch.own_share``, :func:`own_share_identifier`). Any other identifier (``team-b``) may be a
  team's, used by jobs that never opted in: Osprey neither creates its entry (which would weigh the whole team by
  one job's priority) nor changes it, and refuses the job with :func:`not_osprey_identifier`'s reason;
- *this deployment created the entry*: its share ledger recorded it before the update that added it
  (:mod:`osprey_control.registry.shares`). An ``osprey-`` entry that a person, another tool or another Osprey
  deployment (another table) created is refused with :func:`~.pending.foreign`'s reason.

Batch has no condition on UpdateSchedulingPolicy per entry (IAM can only require the policy's own tag), so these
checks are in code only.
"""

from __future__ import annotations

import uuid

from osprey_control.backends.batch.team_shares import PREFIX

__all__ = [
    "OWN_SHARE_PREFIX",
    "PREFIX",
    "is_osprey_identifier",
    "not_osprey_identifier",
    "own_share_identifier",
]

OWN_SHARE_PREFIX = f"{PREFIX}job-"


def is_osprey_identifier(share: str) -> bool:
    """Whether ``share`` is in Osprey's namespace (``osprey-...``; a wildcard entry never is)."""
    return share.startswith(PREFIX) and len(share) > len(PREFIX) and not share.endswith("*")


def own_share_identifier() -> str:
    """A share identifier of a job's own, in Osprey's namespace: ``osprey-job-<16 hex digits>``, random, so no
    other job is submitted with it (a job's id is not known before SubmitJob). It is never a team share: those
    end in ``-g<class>``, and ``g`` is not a hex digit."""
    return f"{OWN_SHARE_PREFIX}{uuid.uuid4().hex[:16]}"


def not_osprey_identifier(share: str) -> str:
    """Why a job submitted with ``share``, not in Osprey's namespace, is refused."""
    return (
        f"share identifier {share} is not one of Osprey's (they start with '{PREFIX}'): jobs that did not opt in "
        f"may be submitted with it too, and its weightFactor would weigh them all by this job's priority, so "
        "Osprey neither creates nor changes its entry; submit the job with its team's Osprey share "
        "(osprey.batch.team_share) or a share of its own (osprey.batch.own_share)"
    )
