"""``osprey explain JOB``: a job's last decision rule by rule, like Slurm's sprio for one job.

Per rule: the raw value, its normalised value and score, the priority it gave, the policy's weight and the
EFFECTIVE weight it really had, since rules without data are dropped and the others renormalised
(docs/design.md §4); a line names the dropped rules. Then the guard's verdict for the job's pool (in bold: the
order chosen, why, each candidate's predicted wait and goodput) and the other notes, the damping (previous →
priority, base, target, reason; ``guarded`` when the pool stood down to its native order), what the backend
holds, and the gang watch. A job is named as in ``osprey jobs`` (name, native id, or
``BACKEND#ID``); a name that matches nothing gets "did you mean" (:func:`osprey.cli.target.find_job`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from osprey.cli.errors import guarded
from osprey.cli.jobs import JsonOption, apply_state, console, print_whole, stamp, summary
from osprey.cli.policy_state import read_invalid_policies
from osprey.cli.render import dropped_line, gang_line, rules_table
from osprey.cli.target import (
    EndpointOption,
    ProfileOption,
    RegionOption,
    ShardsOption,
    TableOption,
    find_job,
    resolve_target,
)
from osprey.views import decision_notes, effective_weights, guard_note, reason_text, shadow_text
from osprey_control.gang.store import GangStore
from osprey_control.registry import ACTIVE_STATUSES

__all__: list[str] = []


def _number(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def explain_command(
    job: Annotated[str, typer.Argument(help="Job name, native id, or BACKEND#ID (e.g. batch#a1b2...).")],
    as_json: JsonOption = False,
    table: TableOption = None,
    shards: ShardsOption = None,
    profile: ProfileOption = None,
    region: RegionOption = None,
    endpoint_url: EndpointOption = None,
) -> None:
    """Explain a job's last decision rule by rule, and the state of its gang watch.

    WEIGHT is the policy's weight of a rule; EFFECTIVE its share once the rules without data were dropped and
    the rest renormalised. A job whose stored policy is invalid gets a line saying what is wrong and what the
    job gets instead (its policy's last good version, or its last applied priority). JSON: the "osprey jobs
    --json" row, "decision" (the stored decision with its rules, each with "effective_weight") and
    "dropped_rules" (indexes of the rules that had no data).
    """
    with guarded():
        target = resolve_target(
            table=table, shards=shards, profile=profile, region=region, endpoint_url=endpoint_url
        )
        registry = target.registry()
        record = find_job(registry, job)
        gang, _ = GangStore(registry.table_name, client=registry.client).load(record.key)
        invalid = read_invalid_policies(target)
    decision = record.last_decision
    rules = list((decision or {}).get("rules", []))
    effective = effective_weights(rules)
    if as_json:
        if decision:
            decision = {
                **decision,
                "rules": [{**rule, "effective_weight": effective.get(int(rule["index"]))} for rule in rules],
            }
        dropped = [
            int(rule["index"])
            for rule in rules
            if rule.get("weight") is not None and effective.get(int(rule["index"])) == 0.0
        ]
        row = summary(record, gang, invalid=invalid)
        typer.echo(json.dumps({**row, "decision": decision, "dropped_rules": dropped}))
        return
    out = console()
    out.print(escape(f"{record.key} · policy {record.policy} · {record.status.value}"))
    if invalid is not None and record.policy in invalid:
        out.print(escape(invalid[record.policy].describe()))
    if gang is not None:
        out.print(escape(gang_line(gang)))
    if not decision:
        if invalid is not None and record.policy in invalid:
            out.print("no decision yet: its policy is invalid, so the cycle does not derive it")
        else:
            out.print("no decision yet: the job has not been through a cycle")
        return
    _print_decision(out, decision, rules)
    state = apply_state(record)
    if state == "applied":
        applied = f"applied {record.applied_priority} at {stamp(record.applied_at)}"
    elif state == "shadow" and record.shadow_priority is not None:
        backend = record.backend.value
        applied = shadow_text(record.shadow_priority, record.applied_priority, record.shadow_at, backend)
    else:
        holds = "nothing yet" if record.applied_priority is None else str(record.applied_priority)
        applied = f"derived {record.derived_priority}, backend holds {holds} ({state})"
        if record.apply_failure is not None:
            applied += f": {record.apply_failure.reason}"
    out.print(escape(applied))
    active = "active" if record.status in ACTIVE_STATUSES else "finished"
    submitted = record.submitted_at or record.observed_at or record.status_time
    out.print(
        f"job is {active}, submitted {stamp(submitted)}; priority last changed {stamp(record.last_changed_at)}"
    )


def _print_decision(out: Console, decision: Mapping[str, Any], rules: list[Any]) -> None:
    """The decision: the guard's verdict, the rules, the other notes and the damping line."""
    verdict = guard_note(decision)
    if verdict is not None:
        # The pool's verdict decides whether the rules below set the priority at all: it comes first, in bold.
        out.print(escape(f"guard: {verdict}"), style="bold")
    print_whole(out, rules_table(rules))
    dropped_text = dropped_line(rules)
    if dropped_text is not None:
        out.print(escape(dropped_text))
    for signal, note in decision_notes(decision, guard=False).items():
        out.print(escape(f"{signal}: {note}"))
    out.print(
        escape(
            f"previous {decision['previous']} → priority {decision['priority']} "
            f"(base {_number(decision.get('base'))}, target {_number(decision.get('target'))}, "
            f"{reason_text(decision)})"
        )
    )
