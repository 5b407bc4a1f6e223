"""``osprey``: the command line. Each command group lives in its own module; this one only composes them.

Exit codes (docs/cli.md, one convention for every command): 0 success; 1 the command line was right but the work
failed or found a problem (invalid policy contents, a missing setup, AWS refused, nothing to replay or plan, a
failed cycle), each error one line; 2 a usage error (an unknown command or option, a missing argument, a value
of the wrong type or out of range, a file that does not exist, options that do not go together, a malformed
value such as ``--since yesterday``), as click reports its own.

No command prints a traceback: every command runs inside :class:`GuardedGroup`, which turns what a user error or
a missing setup raises into one line saying what to set (:func:`osprey.cli.target.describe_error`) and anything
unexpected into one line naming it, exit 1 (2 for :class:`osprey.cli.errors.UsageError`, a command line the
command itself found wrong); ``OSPREY_DEBUG=1`` shows the traceback instead.
Shell completion: ``osprey --install-completion`` (bash, zsh, fish, PowerShell) or ``--show-completion``.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption
from typer.exceptions import TyperException

from osprey import __version__
from osprey.cli.cost import cost_command
from osprey.cli.derive import derive_command
from osprey.cli.eks import eks_app
from osprey.cli.errors import DEBUG_VARIABLE, USAGE_EXIT, UsageError, describe_error
from osprey.cli.explain import explain_command
from osprey.cli.history import history_command
from osprey.cli.jobs import jobs_command
from osprey.cli.local import local_app
from osprey.cli.plan import plan_command
from osprey.cli.policy import policy_app
from osprey.cli.report import report_command
from osprey.cli.simulate import simulate_command
from osprey.cli.slurm import slurm_app

__all__: list[str] = []


# typer 0.29 shows the Python type after an option or argument in help, as ``<list[Path]>``, ``<str>``,
# ``<int range>``: the names click itself uses (TEXT, INTEGER, PATH, INTEGER RANGE) read better, and an
# argument that has a metavar (``PATH``, ``FILE|-``) shows it alone, as an option with one already does.
_CLICK_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "bool": "BOOLEAN"}


def _readable(label: str) -> str:
    inner = label.removeprefix("<").removesuffix(">")
    if inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]  # a repeatable option or a variadic argument: click shows the element type
    words = inner.split(" ")
    words[0] = _CLICK_NAMES.get(words[0].lower(), words[0])
    return " ".join(words) if "|" in inner else " ".join(words).upper()


def _option_type(self: TyperOption, ctx: Any) -> str:
    return _readable(_typer_option_type(self, ctx))


def _argument_type(self: TyperArgument, ctx: Any) -> str | None:
    return None if self.metavar is not None else _readable(_typer_argument_type(self, ctx))


_typer_option_type = TyperOption.display_type
_typer_argument_type = TyperArgument.display_type
TyperOption.display_type = _option_type  # type: ignore[method-assign,assignment]
TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign,assignment]


def _one_line(error: Exception) -> str:
    known = describe_error(error)
    if known is not None:
        return f"error: {known}"
    text = " ".join(str(error).split()) or "(no message)"
    return f"error: unexpected {type(error).__name__}: {text} (run with {DEBUG_VARIABLE}=1 for the traceback)"


class GuardedGroup(TyperGroup):
    """The root group: a command's user error or missing setup becomes one line on stderr and exit 1 (2 for
    a :class:`UsageError`)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, TyperException):
            raise  # typer's own exits and usage errors keep their codes and messages
        except Exception as error:
            if os.environ.get(DEBUG_VARIABLE):
                raise
            typer.echo(_one_line(error), err=True)
            raise typer.Exit(USAGE_EXIT if isinstance(error, UsageError) else 1) from None


app = typer.Typer(
    name="osprey",
    cls=GuardedGroup,
    help="Osprey: GPU-job priority control plane for SageMaker, AWS Batch, EKS (Kueue) and Slurm.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
# One line each; the short help is what `osprey --help` lists, kept under 55 characters so an 80-column
# terminal shows it whole (click cuts a longer first sentence with "...").
app.add_typer(policy_app, name="policy", short_help="Validate, diff, apply and replay policies.")
app.command("derive", short_help="Derive one job's next priority, rule by rule.")(derive_command)
app.add_typer(eks_app, name="eks", short_help="Add Osprey's labels and env to EKS manifests.")
app.command("jobs", short_help="List the jobs Osprey manages, highest first.")(jobs_command)
app.command("explain", short_help="Explain a job's last decision, rule by rule.")(explain_command)
app.command("history", short_help="How a job's priority moved: decisions, applies.")(history_command)
app.command("plan", short_help="Recommend a parallel plan (tp, pp, dp, micro-batch).")(plan_command)
app.command("simulate", short_help="Compare schedulers with and without Osprey.")(simulate_command)
app.command("report", short_help="Measured effect per backend and week, before/after.")(report_command)
app.add_typer(local_app, name="local", short_help="Run Osprey on an embedded AWS with a fake fleet.")
app.command("cost", short_help="The control plane's monthly bill for a fleet.")(cost_command)
app.add_typer(
    slurm_app, name="slurm", short_help="Slurm batch scripts with Osprey's block; the job submit plugin."
)


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
    """Osprey: GPU-job priority control plane for SageMaker, AWS Batch, EKS (Kueue) and Slurm."""


def main() -> None:
    """The ``osprey`` entry point: the app, and a last guard for what fails outside a command (e.g. parsing)."""
    try:
        app()
    except Exception as error:
        if os.environ.get(DEBUG_VARIABLE):
            raise
        print(_one_line(error), file=sys.stderr)
        sys.exit(1)
