"""What the ``annotate`` commands (``osprey eks annotate``, ``osprey slurm annotate``) share: the ``osprey``
block's options, reading the input file or stdin, and the one-line error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from osprey.cli.errors import usage_exit

__all__: list[str] = []

CoScheduleOption = Annotated[
    bool | None,
    typer.Option(
        "--co-schedule/--no-co-schedule", help="Gang-schedule the job (default: the policy decides)."
    ),
]
# The ranges are the block's (osprey_control.contract), checked by click too so that an out-of-range flag is a
# usage error (exit 2) like any other bad option value; a value read from the file stays the file's error (1).
GangTimeoutOption = Annotated[
    int | None,
    typer.Option("--gang-timeout", metavar="SECONDS", min=1, max=86_400, help="Gang timeout in seconds."),
]
MinWorkersOption = Annotated[
    int | None,
    typer.Option("--min-workers", metavar="PERCENT", min=1, max=100, help="Required workers, percent."),
]
InitialPriorityOption = Annotated[
    int | None,
    typer.Option("--initial-priority", metavar="N", min=0, max=100, help="Initial priority."),
]
ExpectedRuntimeOption = Annotated[
    int | None,
    typer.Option(
        "--expected-runtime",
        metavar="SECONDS",
        min=1,
        max=2_592_000,
        help="Your estimate of the job's run time in seconds (remaining_time before progress).",
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
        raise usage_exit([f"{source}: cannot read: {error}"]) from None  # a missing input file: exit 2
