"""``osprey policy validate|schema``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from osprey_control.policy import load_policy_files, policy_json_schema

__all__ = ["policy_app"]

policy_app = typer.Typer(help="Validate policies and print their JSON Schema.", no_args_is_help=True)


@policy_app.command("validate")
def validate_command(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Policy files, or directories of *.yaml / *.yml. All paths form one policy set."),
    ],
) -> None:
    """Validate a policy set. Exit 0 when valid; else print one `FILE: FIELD.PATH: message` line per error
    and exit 1. Weights that do not sum to 1 only warn (they are normalised)."""
    result = load_policy_files(paths)
    for warning in result.warnings:
        typer.echo(str(warning), err=True)
    for error in result.errors:
        typer.echo(str(error), err=True)
    if result.errors:
        typer.echo(f"{len(result.errors)} error(s) in {len(paths)} path(s)", err=True)
        raise typer.Exit(1)
    names = ", ".join(loaded.policy.name for loaded in result.policies)
    typer.echo(f"{len(result.policies)} valid polic{'y' if len(result.policies) == 1 else 'ies'}: {names}")


@policy_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a PriorityDerivationPolicy document (for editors and CI linters)."""
    typer.echo(json.dumps(policy_json_schema(), indent=2, sort_keys=False))
