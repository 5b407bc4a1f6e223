"""``osprey slurm annotate FILE|-``: write an sbatch script with the Osprey marker and environment to stdout.
``osprey slurm submit-plugin``: write the head node's installer of Osprey's ``job_submit.lua`` (new opted-in jobs
start mid-range at submission; docs/slurm.md), or with ``--lua`` the script itself.

The block is the script's own ``OSPREY_*`` values plus the options (a contradiction is an error naming both);
``OSPREY_INTERVAL`` and the runtime's other variables are left alone. Without a policy in either place the
script gets ``default-policy`` and a note on stderr. Errors go to stderr, exit code 1 (``osprey.slurm``).
"""

from __future__ import annotations

import typer

from osprey.cli.block_options import (
    CoScheduleOption,
    ExpectedRuntimeOption,
    GangTimeoutOption,
    InitialPriorityOption,
    MinWorkersOption,
    block_options,
    fail,
    read_source,
)
from osprey.slurm import annotate_script
from osprey_control.backends.slurm import (
    DEFAULT_SLURM_PRIORITY_RANGE,
    SlurmPriorityRange,
    install_script,
    job_submit_lua,
)
from osprey_control.contract import OspreyBlockError

__all__: list[str] = []

slurm_app = typer.Typer(
    help="Slurm (ParallelCluster, HyperPod): batch scripts with the Osprey marker; the job submit plugin.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@slurm_app.callback()
def _slurm() -> None:
    """Slurm (ParallelCluster, HyperPod): batch scripts with the Osprey marker; the job submit plugin."""


@slurm_app.command("annotate", short_help="Add the Osprey marker to an sbatch script.")
def annotate_command(
    source: str = typer.Argument(..., metavar="FILE|-", help="sbatch script, or - for stdin."),
    *,
    policy: str | None = typer.Option(
        None,
        "--policy",
        "-p",
        help="Policy name (default: the script's OSPREY_PRIORITY_POLICY, else default-policy).",
    ),
    co_schedule: CoScheduleOption = None,
    gang_timeout: GangTimeoutOption = None,
    min_workers: MinWorkersOption = None,
    initial_priority: InitialPriorityOption = None,
    expected_runtime: ExpectedRuntimeOption = None,
) -> None:
    """Annotate the sbatch script FILE (or stdin) and write it to stdout."""
    name = "<stdin>" if source == "-" else source
    text = read_source(source)
    options = block_options(
        priority_derivation_profile=policy,
        co_schedule=co_schedule,
        gang_timeout=gang_timeout,
        min_workers=min_workers,
        initial_priority=initial_priority,
        expected_runtime=expected_runtime,
    )
    try:
        annotated = annotate_script(text, options)
    except OspreyBlockError as error:
        raise fail(f"{name}: {error}") from None
    for note in annotated.notes:
        typer.echo(f"note: {name}: {note}", err=True)
    typer.echo(annotated.text, nl=False)


@slurm_app.command("submit-plugin", short_help="Print the job_submit.lua installer (new jobs mid-range).")
def submit_plugin_command(
    *,
    priority_range: str = typer.Option(
        f"{DEFAULT_SLURM_PRIORITY_RANGE.low}..{DEFAULT_SLURM_PRIORITY_RANGE.high}",
        "--priority-range",
        metavar="LOW..HIGH",
        help="The deployment's priorityRange (context osprey:slurm); new jobs start at its middle.",
    ),
    lua: bool = typer.Option(False, "--lua", help="Write job_submit.lua itself, not its installer."),
) -> None:
    """Write the head node's installer of job_submit.lua (an OnNodeStart action; --enable on a running cluster)."""
    try:
        parsed = SlurmPriorityRange.parse(priority_range)
    except ValueError as error:
        raise fail(f"--priority-range: {error}") from None
    typer.echo(job_submit_lua(parsed) if lua else install_script(parsed), nl=False)
