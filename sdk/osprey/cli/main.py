"""``osprey``: the command line. Each command group lives in its own module; this one only composes them.

Exit codes: 0 success, 1 invalid input (the errors are printed one per line), 2 usage error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from osprey import __version__
from osprey.cli.cost import cost_command
from osprey.cli.derive import derive_command
from osprey.cli.eks import eks_app
from osprey.cli.jobs import explain_command, jobs_command
from osprey.cli.local import local_app
from osprey.cli.plan import plan_command
from osprey.cli.policy import policy_app
from osprey.cli.simulate import simulate_command

__all__ = ["app", "main"]

app = typer.Typer(
    name="osprey",
    help="Osprey: GPU-job priority control plane for SageMaker, AWS Batch and EKS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(policy_app, name="policy")
app.command("derive")(derive_command)
# Further command groups (eks, jobs, local, plan, ...) are registered below, one line each.
app.add_typer(eks_app, name="eks")
app.command("jobs")(jobs_command)
app.command("explain")(explain_command)
app.command("plan")(plan_command)
app.command("simulate")(simulate_command)
app.add_typer(local_app, name="local")
app.command("cost")(cost_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"osprey {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Osprey: GPU-job priority control plane for SageMaker, AWS Batch and EKS."""


def main() -> None:
    app()
