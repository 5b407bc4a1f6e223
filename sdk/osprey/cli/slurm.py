"""``osprey slurm annotate FILE|-``: write an sbatch script with the Osprey marker and environment to stdout.

The block is the script's own ``OSPREY_*`` values plus the options (a contradiction is an error naming both);
``OSPREY_INTERVAL`` and the runtime's other variables are left alone. Without a policy in either place the
script gets ``default-policy`` and a note on stderr. Errors go to stderr, exit code 1 (``osprey.slurm``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from osprey.slurm import annotate_script
from osprey_control.contract import OspreyBlockError

__all__ = ["annotate_command", "slurm_app"]

slurm_app = typer.Typer(
    help="Slurm (ParallelCluster, HyperPod) batch scripts: add the Osprey marker and environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@slurm_app.callback()
def _slurm() -> None:
    """Slurm (ParallelCluster, HyperPod) batch scripts: add the Osprey marker and environment."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


@slurm_app.command("annotate")
def annotate_command(
    source: str = typer.Argument(..., metavar="FILE|-", help="sbatch script, or - for stdin."),
    *,
    policy: str | None = typer.Option(
        None,
        "--policy",
        "-p",
        help="Policy name (default: the script's OSPREY_PRIORITY_POLICY, else default-policy).",
    ),
    co_schedule: bool | None = typer.Option(
        None, "--co-schedule/--no-co-schedule", help="Gang-schedule the job (default: the policy decides)."
    ),
    gang_timeout: int | None = typer.Option(
        None, "--gang-timeout", help="Gang timeout in seconds, 1..86400."
    ),
    min_workers: int | None = typer.Option(None, "--min-workers", help="Required workers, percent 1..100."),
    initial_priority: int | None = typer.Option(None, "--initial-priority", help="Initial priority 0..100."),
    expected_runtime: int | None = typer.Option(
        None, "--expected-runtime", help="Your estimate of the job's run time in seconds, 1..2592000."
    ),
) -> None:
    """Annotate the sbatch script FILE (or stdin) and write it to stdout."""
    name = "<stdin>" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _fail(f"{name}: cannot read: {error}") from None
    options: dict[str, Any] = {
        "priority_derivation_profile": policy,
        "co_schedule": co_schedule,
        "gang_timeout": gang_timeout,
        "required_min_workers": min_workers,
        "initial_priority": initial_priority,
        "expected_runtime": expected_runtime,
    }
    try:
        annotated = annotate_script(text, {key: value for key, value in options.items() if value is not None})
    except OspreyBlockError as error:
        raise _fail(f"{name}: {error}") from None
    for note in annotated.notes:
        typer.echo(f"note: {name}: {note}", err=True)
    typer.echo(annotated.text, nl=False)
