"""Which deployed policies are invalid, as ``osprey jobs`` and ``osprey explain`` show them next to their jobs.

Read the way the control plane reads them (:class:`osprey_control.policy_store.PolicySource`, the same bounded
parser and the same last-good-version rule), so the CLI says what the derive step does with those jobs. A
deployment whose policies cannot be read (no ``ssm:GetParametersByPath`` for this user) still lists its jobs:
the state is then unknown (None) and one warning line on stderr says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import typer
from botocore.exceptions import ClientError

from osprey.cli.target import Target
from osprey_control.policy import InvalidPolicy

__all__ = ["invalid_lines", "read_invalid_policies"]


def read_invalid_policies(target: Target) -> dict[str, InvalidPolicy] | None:
    """The deployed policies whose stored value is refused, by name; None (and a warning) if unreadable."""
    from osprey_control.policy_store import PolicySource  # noqa: PLC0415 - compiles policies: only when used

    try:
        source = PolicySource(target.policy_prefix, client=target.client("ssm"), max_age=0)
        return source.invalid_policies()
    except ClientError as error:
        # Only an answer from SSM (access denied, throttled) is a warning here; no credentials, no region or no
        # endpoint is the command's own error, which reading the jobs would hit next: one line, not two.
        typer.echo(f"warning: cannot read the deployed policies ({error}); policy states not shown", err=True)
        return None


def invalid_lines(
    rows: Sequence[Mapping[str, Any]], invalid: Mapping[str, InvalidPolicy] | None
) -> list[str]:
    """One line per invalid policy that has listed jobs: what is wrong and what its jobs get."""
    jobs = Counter(str(row["policy"]) for row in rows)
    known = invalid or {}
    return [f"{known[name].describe()} [{jobs[name]} job(s) listed]" for name in sorted(known) if jobs[name]]
