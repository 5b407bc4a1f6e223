"""What the ``annotate`` commands (``osprey eks annotate``, ``osprey slurm annotate``) share: the ``osprey``
block's options, reading the input file or stdin, and the one-line error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

__all__: list[str] = []

CoScheduleOption = Annotated[
    bool | None,
    typer.Option(
        "--co-schedule/--no-co-schedule", help="Gang-schedule the job (default: the policy decides)."
    ),
]
GangTimeoutOption = Annotated[
    int | None, typer.Option("--gang-timeout", help="Gang timeout in seconds, 1..86400.")
]
MinWorkersOption = Annotated[
    int | None, typer.Option("--min-workers", help="Required workers, percent 1..100.")
]
InitialPriorityOption = Annotated[
    int | None, typer.Option("--initial-priority", help="Initial priority 0..100.")
]
ExpectedRuntimeOption = Annotated[
    int | None,
    typer.Option(
        "--expected-runtime",
        help="Your estimate of the job's run time in seconds, 1..2592000 (remaining_time before progress).",
    ),
]


def block_options(**options: Any) -> dict[str, Any]:
    """The ``osprey`` block keys the user gave (``min_workers`` is the block's ``required_min_workers``)."""
    if "min_workers" in options:
        options["required_min_workers"] = options.pop("min_workers")
    return {key: value for key, value in options.items() if value is not None}


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def read_source(source: str) -> str:
    """The text of ``source`` (a path, or ``-`` for stdin); a one-line error naming it otherwise."""
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise fail(f"{source}: cannot read: {error}") from None
