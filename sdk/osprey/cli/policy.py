"""``osprey policy validate|schema``.

``validate`` checks the documents alone, or, given the deployment's settings, also that every custom rule
names a function the deployment may invoke (the check ``cdk synth`` and the derive step make:
:class:`osprey_control.policy.RuleAllowList`). The settings come from ``--allowed-rule-prefix``, ``--account``
and ``--region``, or from the deployed stack's ``/osprey/config`` with ``--deployment`` (boto3 and AWS
credentials needed; flags given as well win).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from osprey_control.policy import (
    DEFAULT_ALLOWED_PREFIX,
    RuleAllowList,
    load_policy_files,
    policy_json_schema,
    rule_arn_issues,
)

__all__ = ["policy_app"]

CONFIG_PARAMETER = "/osprey/config"

policy_app = typer.Typer(help="Validate policies and print their JSON Schema.", no_args_is_help=True)


def _deployment_settings() -> dict[str, Any]:
    """``allowedRulePrefix``, ``account`` and ``region`` of the deployed stack (its ``/osprey/config``)."""
    try:
        from osprey_control.aws import client_for  # noqa: PLC0415 - boto3 only with --deployment

        raw = client_for("ssm").get_parameter(Name=CONFIG_PARAMETER)["Parameter"]["Value"]
        config = json.loads(raw)
    except Exception as error:
        typer.echo(
            f"error: --deployment: cannot read {CONFIG_PARAMETER} ({type(error).__name__}: {error}); pass "
            "--allowed-rule-prefix, --account and --region instead",
            err=True,
        )
        raise typer.Exit(1) from None
    if not isinstance(config, dict):
        typer.echo(f"error: --deployment: {CONFIG_PARAMETER} is not a JSON object", err=True)
        raise typer.Exit(1)
    return config


def _allow_list(
    prefix: str | None, account: str | None, region: str | None, deployment: bool
) -> RuleAllowList | None:
    """The rules the deployment may invoke, or None when no deployment setting was given (document only)."""
    if not (deployment or prefix or account or region):
        return None
    deployed = _deployment_settings() if deployment else {}
    prefix = prefix or deployed.get("allowedRulePrefix") or DEFAULT_ALLOWED_PREFIX
    account = account or deployed.get("account")
    region = region or deployed.get("region")
    return RuleAllowList.for_deployment(str(prefix), account=account, region=region)


@policy_app.command("validate")
def validate_command(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Policy files, or directories of *.yaml / *.yml. All paths form one policy set."),
    ],
    allowed_rule_prefix: Annotated[
        str | None,
        typer.Option(
            "--allowed-rule-prefix",
            help=f"The deployment's allowed custom-rule prefix (context osprey:allowedRulePrefix; default "
            f"{DEFAULT_ALLOWED_PREFIX} when --account, --region or --deployment is given).",
        ),
    ] = None,
    account: Annotated[
        str | None,
        typer.Option("--account", help="The deployment's AWS account: custom rules must be in it."),
    ] = None,
    region: Annotated[
        str | None, typer.Option("--region", help="The deployment's region: custom rules must be in it.")
    ] = None,
    deployment: Annotated[
        bool,
        typer.Option(
            "--deployment", help=f"Read the prefix, account and region from the deployed {CONFIG_PARAMETER}."
        ),
    ] = False,
) -> None:
    """Validate a policy set. Exit 0 when valid; else print one `FILE: FIELD.PATH: message` line per error
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


@policy_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a PriorityDerivationPolicy document (for editors and CI linters)."""
    typer.echo(json.dumps(policy_json_schema(), indent=2, sort_keys=False))
