"""``osprey derive``: run the real derivation engine on one job's metrics and explain the result."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from osprey.cli.render import render_decision
from osprey_control.derivation import (
    CustomRuleCall,
    CustomRuleError,
    FailureReason,
    MetricsFileError,
    compile_policy,
    derive,
    read_metrics_file,
)
from osprey_control.policy import PriorityDerivationPolicy, load_policy_files

__all__: list[str] = []


class ScriptedInvoker:
    """Answers custom rules from ``--custom INDEX=VALUE|fail``; rules not named fall back (not invoked)."""

    def __init__(self, answers: dict[int, float | None]) -> None:
        self._answers = answers

    def invoke(self, call: CustomRuleCall) -> Any:
        if call.rule_index not in self._answers:
            raise CustomRuleError(FailureReason.NOT_INVOKED, "no --custom value given")
        answer = self._answers[call.rule_index]
        if answer is None:
            raise CustomRuleError(FailureReason.ERROR, "--custom asked this rule to fail")
        return {"derived_priority": answer}


def parse_custom_options(options: list[str], policy: PriorityDerivationPolicy) -> dict[int, float | None]:
    """``["3=72", "4=fail"]`` → ``{3: 72.0, 4: None}``; raises typer.BadParameter naming the problem."""
    custom_indexes = {index for index, _ in policy.custom_rules()}
    answers: dict[int, float | None] = {}
    for option in options:
        index_text, separator, value_text = option.partition("=")
        if not separator or not re.fullmatch(r"[0-9]+", index_text.strip()):
            raise typer.BadParameter(f"{option!r}: expected INDEX=VALUE or INDEX=fail", param_hint="--custom")
        index = int(index_text)
        if index in answers:
            raise typer.BadParameter(f"{option!r}: rule {index} is given twice", param_hint="--custom")
        if index not in custom_indexes:
            allowed = ", ".join(str(i) for i in sorted(custom_indexes)) or "none in this policy"
            raise typer.BadParameter(
                f"{option!r}: derivationRules[{index}] is not a custom rule; custom rule indexes: {allowed}",
                param_hint="--custom",
            )
        if value_text.strip().lower() == "fail":
            answers[index] = None
            continue
        try:
            value = float(value_text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise typer.BadParameter(
                f"{option!r}: VALUE must be a finite number or 'fail'", param_hint="--custom"
            )
        answers[index] = value
    return answers


def _select_policy(policy_file: Path, name: str | None) -> PriorityDerivationPolicy:
    result = load_policy_files([policy_file])
    if result.errors:
        for error in result.errors:
            typer.echo(str(error), err=True)
        raise typer.Exit(1)
    policies = result.by_name()
    if name is not None:
        if name not in policies:
            raise typer.BadParameter(
                f"no policy named {name!r}; found: {', '.join(policies)}", param_hint="--name"
            )
        return policies[name]
    if len(policies) > 1:
        raise typer.BadParameter(
            f"{policy_file} holds {len(policies)} policies ({', '.join(policies)}); choose one with --name",
            param_hint="--name",
        )
    return next(iter(policies.values()))


def derive_command(
    policy_file: Annotated[
        Path, typer.Option("--policy", exists=True, help="Policy file (YAML), or a directory of them.")
    ],
    metrics_file: Annotated[
        Path, typer.Option("--metrics", exists=True, help="Metrics file (JSON, or YAML by suffix).")
    ],
    current: Annotated[
        int | None,
        typer.Option(
            "--current", min=0, max=100, help="Applied priority now (default: the policy's initialPriority)."
        ),
    ] = None,
    custom: Annotated[
        list[str] | None,
        typer.Option(
            "--custom",
            help="Answer for custom rule INDEX (0-based in derivationRules): INDEX=VALUE or INDEX=fail.",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Policy name, when the file holds several.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as one JSON object.")] = False,
) -> None:
    """Derive one job's next priority exactly as the control plane would, and explain every rule."""
    policy = _select_policy(policy_file, name)
    answers = parse_custom_options(custom or [], policy)
    try:
        job = read_metrics_file(metrics_file)
    except MetricsFileError as error:
        typer.echo(f"{metrics_file}: {error.path}: {error.message}", err=True)
        raise typer.Exit(1) from None
    except (OSError, UnicodeDecodeError) as error:
        typer.echo(f"{metrics_file}: (file): cannot read: {error}", err=True)
        raise typer.Exit(1) from None
    decision = derive(compile_policy(policy), job, current, ScriptedInvoker(answers))
    if as_json:
        typer.echo(json.dumps(decision.to_dict()))
    else:
        render_decision(decision, job)
