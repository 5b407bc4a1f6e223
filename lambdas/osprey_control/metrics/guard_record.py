"""What the guard left in the registry for the next cycle: each pool's last verdict, read back from its jobs'
decisions (``inputs.notes``), and the signature that says whether that verdict still stands.

Every job the guard realizes carries, beside the verdict's text (``notes["guard"]``), the order chosen
(``guard-order``), the collection's instant (``guard-cycle``, in the registry's lexically sortable form) and the
pool's signature (``guard-signature``). The pool's last verdict is the one in its newest decision carrying them.
Decisions are written only when a job's priority or reason changes, so that is the verdict of the last cycle in
which it changed some job; a switch between the native order and a policy order changes every job's reason, so
it is always written.

The signature is :func:`osprey_control.guard.pool_signature` (which jobs the pool holds and which of them run)
with what the pool was judged under (its capacity, the guard's settings, its deployed policies): while it is
unchanged no job arrived, started, ended or was requeued and nothing was redeployed, so the verdict stands and
the lookahead is not run again, as the simulator's guard does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from osprey_control.derivation import CompiledPolicy
from osprey_control.guard import GUARD_NOTE, POLICY, GuardSettings, LookJob, pool_signature
from osprey_control.registry import JobRecord, format_time
from osprey_control.wiring import GUARD_CYCLE_NOTE, GUARD_ORDER_NOTE, GUARD_SIGNATURE_NOTE

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class RecordedVerdict:
    cycle: str  # the collection's instant, format_time
    order: str
    signature: str | None
    note: str | None  # the verdict's text as recorded


def last_verdict(members: Iterable[JobRecord]) -> RecordedVerdict | None:
    """The pool's newest recorded verdict (module docstring), None when no decision carries one."""
    newest: RecordedVerdict | None = None
    for record in members:
        inputs = (record.last_decision or {}).get("inputs")
        notes = inputs.get("notes") if isinstance(inputs, Mapping) else None
        if not isinstance(notes, Mapping):
            continue
        order, cycle = notes.get(GUARD_ORDER_NOTE), notes.get(GUARD_CYCLE_NOTE)
        if not (isinstance(order, str) and isinstance(cycle, str)):
            continue
        signature, note = notes.get(GUARD_SIGNATURE_NOTE), notes.get(GUARD_NOTE)
        found = RecordedVerdict(
            cycle,
            order,
            signature if isinstance(signature, str) else None,
            note if isinstance(note, str) else None,
        )
        if newest is None or (found.cycle, found.order) > (newest.cycle, newest.order):
            newest = found
    return newest


def previous_order(members: Sequence[JobRecord], recorded: RecordedVerdict | None) -> str | None:
    """The order chosen last: the recorded verdict's; the policy's when the pool's jobs were derived but no
    decision carries a verdict (the guard did not run for them, so the policy's order was in force, and a tie
    keeps it rather than moving every job); None for a pool never derived."""
    if recorded is not None:
        return recorded.order
    return POLICY if any(record.last_decision is not None for record in members) else None


def judged_signature(
    looks: Sequence[LookJob], policies: Iterable[CompiledPolicy], capacity: int, settings: GuardSettings
) -> str:
    """The pool's signature with what it is judged under (module docstring). ``repr`` of the frozen
    dataclasses is the same in every process (unlike ``hash``), so the next invocation compares equal."""
    digest = hashlib.sha256(pool_signature(looks).encode())
    judged = (capacity, settings, sorted((policy.name, repr(policy)) for policy in policies))
    digest.update(repr(judged).encode())
    return digest.hexdigest()[:16]


def stamp(order: str, now: datetime, signature: str) -> dict[str, str]:
    """The notes that let the next cycle (and ``osprey report``) read this verdict back."""
    # format_time sorts lexically in time order, which is how last_verdict compares cycles.
    return {GUARD_ORDER_NOTE: order, GUARD_CYCLE_NOTE: format_time(now), GUARD_SIGNATURE_NOTE: signature}
