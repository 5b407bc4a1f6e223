"""``osprey policy diff | apply | replay``: change a running deployment's policies without a redeploy, and try a
change on the recorded history first (docs/policies.md, Rolling out a change).

- ``diff FILES``: per policy in the files, new / changed / unchanged against the deployment, with a YAML diff.
- ``apply FILES [--dry-run]``: validate every file and check every custom rule against the deployment (its
  allowed prefix, account and region), then write the new and changed policies (:mod:`osprey.rollout`); a failed
  write puts back what was already written. ``--dry-run`` stops before writing. Both show the YAML diff of each
  new or changed policy, as ``diff`` does.
- ``replay NEW.yaml [--since 24h] [--as NAME] [--json]``: re-derive the recorded decisions of the jobs under
  each policy of the file (:mod:`osprey.replay`): per job, its priority now and under the new policy, and how
  the order moves. ``--as NAME`` replays against the jobs of the policy NAME instead, so a policy no job runs
  yet (a new name) can be tried on an existing policy's jobs.

All three print the files' validation warnings (weights that do not sum to 1, ...) on stderr, as ``policy
validate`` does. Exit codes (docs/cli.md): 0 done, 1 invalid files, a custom rule the deployment cannot invoke, a
failed write, nothing to replay (no active job runs the policy, or NAME), or a missing setup (one line each);
2 a usage error (an unknown option, a file that does not exist).
"""

from __future__ import annotations

import difflib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from osprey.cli.errors import guarded
from osprey.cli.history import SinceOption, parse_since
from osprey.cli.jobs import console, print_whole
from osprey.cli.target import (
    EndpointOption,
    ProfileOption,
    RegionOption,
    ShardsOption,
    TableOption,
    Target,
    resolve_target,
)
from osprey.replay import replay_policy
from osprey.rollout import PolicyChange, RolloutError, apply_rollout, deployed_policies, plan_rollout
from osprey_control.policy import (
    DEFAULT_ALLOWED_PREFIX,
    LoadedPolicy,
    RuleAllowList,
    load_policy_files,
    rule_arn_issues,
)
from osprey_control.registry import JobRecord

__all__: list[str] = []

FilesArgument = Annotated[
    list[Path],
    typer.Argument(
        help="Policy files, or directories of *.yaml / *.yml.",
        show_default=False,
        metavar="PATH",
        exists=True,
    ),
]


def _fail(lines: list[str]) -> typer.Exit:
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    return typer.Exit(1)


def _load(paths: list[Path], target: Target | None) -> list[LoadedPolicy]:
    """The files' policies, validated, with every custom rule checked against ``target``'s deployment."""
    result = load_policy_files(paths)
    for warning in result.warnings:
        typer.echo(str(warning), err=True)
    if result.errors:
        raise _fail([str(error) for error in result.errors])
    if not result.policies:
        raise _fail([f"no policies found in {', '.join(str(path) for path in paths)}"])
    if target is not None:
        allowed = RuleAllowList.for_deployment(
            target.allowed_rule_prefix or DEFAULT_ALLOWED_PREFIX,
            account=target.account,
            region=target.deployed_region,
        )
        refused = rule_arn_issues(result.policies, allowed)
        if refused:
            raise _fail([f"{issue} (the deployment cannot invoke it)" for issue in refused])
    return list(result.policies)


def _changes(paths: list[Path], target: Target) -> list[PolicyChange]:
    policies = _load(paths, target)
    deployed = deployed_policies(target.client("ssm"), target.policy_prefix)
    try:
        return plan_rollout(policies, deployed, target.policy_prefix)
    except ValueError as error:
        raise _fail([str(error)]) from None


def _summary(changes: list[PolicyChange], verb: str) -> str:
    counts = {
        kind: sum(1 for change in changes if change.kind == kind) for kind in ("new", "changed", "unchanged")
    }
    return f"{verb}: {counts['new']} new, {counts['changed']} changed, {counts['unchanged']} unchanged"


def diff_command(
    paths: FilesArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: one object per policy.")] = False,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Show what applying the policy files would change in the deployment."""
    with guarded():
        target = resolve_target(profile=profile, region=region, endpoint_url=endpoint_url)
        changes = _changes(paths, target)
    if as_json:
        typer.echo(json.dumps([{**change.to_dict(), "diff": change.diff()} for change in changes], indent=2))
        return
    _show(changes)
    typer.echo(_summary(changes, f"against {target.description}"))


def _show(changes: list[PolicyChange]) -> None:
    """Each policy's change and, for a new or changed one, its YAML diff (``diff`` and ``apply`` alike)."""
    for change in changes:
        typer.echo(f"{change.name}: {change.kind} ({change.source} → {change.parameter})")
        for line in change.diff():
            typer.echo(f"  {line}")


def apply_command(
    paths: FilesArgument,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate, check and show the changes; write nothing.")
    ] = False,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Validate the policy files and write them to the deployment; the next cycles derive under them."""
    with guarded():
        target = resolve_target(profile=profile, region=region, endpoint_url=endpoint_url)
        changes = _changes(paths, target)
        _show(changes)
        if dry_run:
            typer.echo(_summary(changes, "dry run, nothing written"))
            return
        try:
            written = apply_rollout(target.client("ssm"), changes)
        except RolloutError as error:
            raise _fail([str(error)]) from None
    typer.echo(_summary(changes, f"applied to {target.description}"))
    if written:
        typer.echo(
            "the derive step reads policies at most a minute old: the next cycles use them. Commit the files to "
            "policies/ too, or the next change to them there will replace these."
        )


def replay_command(
    path: Annotated[
        Path, typer.Argument(help="The new policy file (one or more policies).", metavar="FILE", exists=True)
    ],
    since: SinceOption = "24h",
    jobs_of: Annotated[
        str | None,
        typer.Option(
            "--as",
            metavar="NAME",
            help="Replay against the jobs of the deployed policy NAME (default: each policy's own name).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: one object per job.")] = False,
    table: TableOption = None,
    shards: ShardsOption = None,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Re-derive the recorded decisions under a new policy: per job, old and new priority and rank."""
    now = datetime.now(UTC)
    with guarded():
        start = parse_since(since, now)
        policies = _load([path], None)
        target = resolve_target(
            table=table, shards=shards, profile=profile, region=region, endpoint_url=endpoint_url
        )
        registry = target.registry()
        active = registry.list_active()
        if jobs_of is not None:
            _check_policy_in_use(jobs_of, active)
        replays = {
            loaded.policy.name: replay_policy(loaded.policy, registry, start or now, active, jobs_of=jobs_of)
            for loaded in policies
        }
    if not any(replays.values()):
        used = sorted({record.policy for record in active})
        raise _fail(
            [
                f"nothing to replay: no active job runs {' or '.join(repr(name) for name in replays)}; replay it "
                f"against another policy's jobs with --as NAME (in use: {', '.join(used) or 'none'})"
            ]
        )
    if as_json:
        typer.echo(
            json.dumps(
                {name: [job.to_dict() for job in jobs] for name, jobs in replays.items()},
                indent=2,
                default=str,
            )
        )
        return
    out = console()
    for name, jobs in replays.items():
        if not jobs:
            out.print(
                f"{name}: no active job runs this policy; nothing to replay (--as NAME: another's jobs)"
            )
            continue
        whose = f" of {jobs_of}" if jobs_of else ""
        view = Table(
            title=f"{name}: {len(jobs)} jobs{whose}, decisions since {since} re-derived (rank 1 = first in line)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for header in (
            "JOB",
            "NAME",
            "DECISIONS",
            "PRIORITY NOW",
            "REPLAYED",
            "CHANGE",
            "RANK NOW → REPLAYED",
        ):
            view.add_column(
                header, no_wrap=True, justify="right" if header not in ("JOB", "NAME") else "left"
            )
        for job in jobs:
            moved = job.old_rank - job.new_rank
            rank = f"{job.old_rank} → {job.new_rank}" + (
                f" (up {moved})" if moved > 0 else f" (down {-moved})" if moved < 0 else ""
            )
            note = "" if job.replayable else " *"
            view.add_row(
                escape(str(job.record.key)),
                escape(job.record.name),
                f"{len(job.steps)}{note}",
                str(job.old_priority),
                str(job.new_priority),
                f"{job.new_priority - job.old_priority:+d}",
                rank,
            )
        print_whole(out, view)
        if any(not job.replayable for job in jobs):
            out.print(
                "* some decisions were recorded without their inputs (before they were kept): those keep their priority"
            )


def _check_policy_in_use(name: str, active: list[JobRecord]) -> None:
    used = sorted({record.policy for record in active})
    if name in used:
        return
    close = difflib.get_close_matches(name, used, 3, 0.6)
    hint = f"; did you mean {' or '.join(repr(found) for found in close)}?" if close else ""
    raise _fail([f"--as {name}: no active job runs that policy{hint} (in use: {', '.join(used) or 'none'})"])
