"""``osprey policy validate | schema`` (and ``diff | apply | replay``, :mod:`osprey.cli.rollout`).

``validate`` checks the documents alone, or, given the deployment's settings, also that every custom rule
names a function the deployment may invoke (the check ``cdk synth`` and the derive step make:
:class:`osprey_control.policy.RuleAllowList`). The settings come from ``--allowed-rule-prefix``, ``--account``
and ``--region``, or from the deployed stack's ``/osprey/config`` with ``--deployment`` (boto3 and AWS
credentials needed, or a running ``osprey local``; flags given as well win).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from osprey.cli.errors import guarded
from osprey.cli.rollout import apply_command, diff_command, replay_command
from osprey.cli.target import resolve_target
from osprey_control.policy import (
    DEFAULT_ALLOWED_PREFIX,
    RuleAllowList,
    load_policy_files,
    policy_json_schema,
    rule_arn_issues,
)
from osprey_control.wiring import CONFIG_PARAMETER

__all__: list[str] = []

policy_app = typer.Typer(
    help="Validate policies, print their JSON Schema, and roll changes out to a deployment (diff, apply, replay).",
    no_args_is_help=True,
)
policy_app.command("diff", short_help="What applying the files would change.")(diff_command)
policy_app.command("apply", short_help="Write the files' policies to the deployment.")(apply_command)
policy_app.command("replay", short_help="Re-derive recorded decisions under a new policy.")(replay_command)


def _allow_list(
    prefix: str | None, account: str | None, region: str | None, deployment: bool
) -> RuleAllowList | None:
    """The rules the deployment may invoke, or None when no deployment setting was given (document only)."""
    if not (deployment or prefix or account or region):
        return None
    if deployment:
        with guarded():  # a missing setup is one line, exit 1
            target = resolve_target()
        prefix = prefix or target.allowed_rule_prefix
        account = account or target.account
        region = region or target.deployed_region
    return RuleAllowList.for_deployment(prefix or DEFAULT_ALLOWED_PREFIX, account=account, region=region)


@policy_app.command("validate", short_help="Validate a policy set (and its custom rules).")
def validate_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Policy files, or directories of *.yaml / *.yml. All paths form one policy set.",
            metavar="PATH",
            exists=True,
        ),
    ],
    allowed_rule_prefix: Annotated[
        str | None,
        typer.Option(
            "--allowed-rule-prefix",
            metavar="PREFIX",
            help=f"The deployment's allowed custom-rule prefix (context osprey:allowedRulePrefix; default "
            f"{DEFAULT_ALLOWED_PREFIX} when --account, --region or --deployment is given).",
        ),
    ] = None,
    account: Annotated[
        str | None,
        typer.Option(
            "--account", metavar="ACCOUNT", help="The deployment's AWS account: custom rules must be in it."
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            "--region", metavar="REGION", help="The deployment's region: custom rules must be in it."
        ),
    ] = None,
    deployment: Annotated[
        bool,
        typer.Option(
            "--deployment",
            help=f"Read the prefix, account and region from the deployment ({CONFIG_PARAMETER}, or a running "
            "osprey local).",
        ),
    ] = False,
) -> None:
    """Validate a policy set. Exit 0 when valid; else print one "FILE: FIELD.PATH: message" line per error
    and exit 1. Weights that do not sum to 1 only warn (they are normalised). With the deployment's settings,
    a custom rule the deployment cannot invoke is an error too."""
    result = load_policy_files(paths)
    allow = _allow_list(allowed_rule_prefix, account, region, deployment)
    errors = [*result.errors, *(rule_arn_issues(result.policies, allow) if allow else [])]
    for warning in result.warnings:
        typer.echo(str(warning), err=True)
    for error in errors:
        typer.echo(str(error), err=True)
    if errors:
        typer.echo(f"{len(errors)} error(s) in {len(paths)} path(s)", err=True)
        raise typer.Exit(1)
    names = ", ".join(loaded.policy.name for loaded in result.policies)
    typer.echo(f"{len(result.policies)} valid polic{'y' if len(result.policies) == 1 else 'ies'}: {names}")


@policy_app.command("schema", short_help="Print the policy document's JSON Schema.")
def schema_command() -> None:
    """Print the JSON Schema of a PriorityDerivationPolicy document (for editors and CI linters)."""
    typer.echo(json.dumps(policy_json_schema(), indent=2, sort_keys=False))
