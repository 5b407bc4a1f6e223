"""``osprey cost``: the monthly bill of today's deployment for a fleet, per line item, with its arithmetic.

``osprey cost --nodes N --gpus-per-node G --jobs J --cycle S [--policy NAME] [--replanned-jobs K] [--json]
[--template PATH] [--agent-config PATH] [--include-agent]``. Every job runs the shipped policy ``--policy``
(default ``default-policy``), which decides the series read per node and job; ``--replanned-jobs`` of the
running jobs also publish their step time for the planner. The counts come from the synthesized template
(``--template``, default
``cdk.out/Osprey.template.json`` when it exists, else the app is synthesized in-process, about 20 s), from the
collector's queries built for a synthetic fleet, and from the CloudWatch agent configuration; prices from
:mod:`osprey.cost.prices`. ``--json`` prints ``{"monthly_usd": total, "lines": [{"item", "monthly_usd",
"arithmetic"}]}``. ``--include-agent`` adds the agent's own custom metrics and PutMetricData (billed to the
fleet) to the lines and the total. Bad input: ``error: --FLAG: ...`` on stderr, exit 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from osprey.checkout import CheckoutNotFoundError
from osprey.cli.errors import usage_exit
from osprey.cost import (
    PRICES_DATE,
    SOURCES,
    Assumptions,
    CostReport,
    FleetShape,
    TemplateError,
    agent_metrics,
    estimate,
    metric_load,
    read_template,
    synthetic_fleet,
)
from osprey.cost.fleet import DEFAULT_POLICY
from osprey.cost.source import (
    default_agent_config,
    default_template,
    load_json,
    shipped_policy_names,
    synthesize,
)
from osprey_control.wiring import REGISTRY_SHARDS_VARIABLE

__all__: list[str] = []

CYCLE_RANGE = (10, 86_400)
MAX_COUNT = 1_000_000


def _fail(lines: list[str]) -> NoReturn:
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(1)


def _positive(flag: str, text: str, upper: int, *, lower: int = 1) -> tuple[int | None, str | None]:
    try:
        value = int(text.strip())
    except ValueError:
        return None, f"{flag}: not an integer (got {text!r}); allowed: a whole number {lower}..{upper:,}"
    if not lower <= value <= upper:
        return None, f"{flag}: out of range (got {value}); allowed: a whole number {lower}..{upper:,}"
    return value, None


def parse_flags(nodes: str, gpus: str, jobs: str, cycle: str) -> tuple[FleetShape, int] | list[str]:
    """The fleet and the cycle interval, or one message per bad flag (naming it and what is allowed)."""
    problems: list[str] = []
    values: list[int] = []
    for flag, text, upper in (
        ("--nodes", nodes, MAX_COUNT),
        ("--gpus-per-node", gpus, 64),
        ("--jobs", jobs, MAX_COUNT),
    ):
        value, problem = _positive(flag, text, upper)
        if problem:
            problems.append(problem)
        values.append(value or 0)
    low, high = CYCLE_RANGE
    try:
        seconds = int(cycle.strip())
        if not low <= seconds <= high:
            problems.append(f"--cycle: out of range (got {seconds}); allowed: seconds {low}..{high:,}")
    except ValueError:
        problems.append(f"--cycle: not an integer (got {cycle!r}); allowed: seconds {low}..{high:,}")
        seconds = 0
    if problems:
        return problems
    return FleetShape(values[0], values[1], values[2]), seconds


def _template(path: Path | None) -> dict[str, Any]:
    if path is None:
        try:
            path = default_template()
        except CheckoutNotFoundError as error:
            _fail([f"--template: none given, and {error}"])
        if not path.is_file():
            return _synthesized()
    try:
        return load_json(path)
    except (OSError, ValueError) as error:
        _fail([f"--template: cannot read {path}: {error}"])


def _synthesized() -> dict[str, Any]:
    typer.echo("synthesizing the CDK app (pass --template to skip) ...", err=True)
    try:
        return synthesize()
    except Exception as error:  # node, aws-cdk or the app missing: say so, no traceback
        _fail([f"--template: no template given and synthesizing failed: {type(error).__name__}: {error}"])


def _render(report: CostReport, shape: FleetShape, cycle: int, agent_total: float | None) -> None:
    console = Console(width=None if sys.stdout.isatty() else 240)
    table = Table(
        box=box.SIMPLE,
        title=f"Osprey: {shape.nodes} nodes x {shape.gpus_per_node} GPUs, "
        f"{shape.jobs} jobs on {shape.policy}, {cycle} s cycle, per month (30 days)",
    )
    table.add_column("ITEM")
    table.add_column("$/MONTH", justify="right")
    table.add_column("ARITHMETIC", overflow="fold")
    for line in report.lines:
        table.add_row(line.item, f"{line.monthly_usd:,.2f}", line.arithmetic)
    table.add_row("[bold]total[/bold]", f"[bold]{report.monthly_usd:,.2f}[/bold]", "")
    console.print(table)
    if agent_total is not None:
        console.print(
            f"Not in the total: the CloudWatch agent's own metrics on the fleet, ${agent_total:,.2f} a month "
            "(--include-agent adds them)."
        )
    console.print(f"us-east-1 list prices of {PRICES_DATE}: " + ", ".join(sorted(set(SOURCES.values()))))


def cost_command(
    nodes: Annotated[str, typer.Option("--nodes", help="GPU nodes (EC2 instances) in the fleet.")],
    gpus_per_node: Annotated[str, typer.Option("--gpus-per-node", help="GPUs per node.")],
    jobs: Annotated[str, typer.Option("--jobs", help="Active jobs sharing the nodes.")],
    cycle: Annotated[str, typer.Option("--cycle", help="Cycle interval in seconds, 10..86400.")] = "60",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    template: Annotated[
        Path | None,
        typer.Option(
            "--template",
            exists=True,
            dir_okay=False,
            help="Synthesized template (default cdk.out/Osprey.template.json, else synthesize the app).",
        ),
    ] = None,
    agent_config: Annotated[
        Path | None,
        typer.Option(
            "--agent-config",
            exists=True,
            dir_okay=False,
            help="CloudWatch agent configuration of the GPU nodes (default: the one the checkout deploys).",
        ),
    ] = None,
    include_agent: Annotated[
        bool,
        typer.Option("--include-agent", help="Add the agent's metrics (billed to the fleet) to the total."),
    ] = False,
    policy: Annotated[
        str, typer.Option("--policy", help="The shipped policy every job runs (it decides the series read).")
    ] = DEFAULT_POLICY,
    replanned_jobs: Annotated[
        str,
        typer.Option("--replanned-jobs", help="Running jobs that re-plan (each publishes its step time)."),
    ] = "0",
) -> None:
    """The monthly bill of the control plane for a fleet, per line item, with its arithmetic."""
    parsed = parse_flags(nodes, gpus_per_node, jobs, cycle)
    problems = parsed if isinstance(parsed, list) else []
    allowed = shipped_policy_names()
    if policy not in allowed:
        problems.append(f"--policy: unknown policy {policy!r}; allowed: {', '.join(allowed)}")
    replanned, problem = _positive("--replanned-jobs", replanned_jobs, MAX_COUNT, lower=0)
    if problem:
        problems.append(problem)
    if problems or isinstance(parsed, list):
        raise usage_exit(problems)  # only the flags are wrong: a usage error (docs/cli.md)
    shape, seconds = parsed
    shape = FleetShape(shape.nodes, shape.gpus_per_node, shape.jobs, policy)
    if replanned and replanned > min(shape.jobs, shape.nodes):
        raise usage_exit(
            [
                f"--replanned-jobs: more than the running jobs (got {replanned}); allowed: 0..{min(shape.jobs, shape.nodes)}"
            ]
        )
    try:
        agent_config = agent_config or default_agent_config()
    except CheckoutNotFoundError as error:
        _fail([f"--agent-config: none given, and {error}"])
    try:
        agent_file = load_json(agent_config)
    except (OSError, ValueError) as error:
        _fail([f"--agent-config: cannot read {agent_config}: {error}"])
    try:
        facts = read_template(_template(template))
        agent = agent_metrics(agent_file, gpus_per_node=shape.gpus_per_node)
        load = metric_load(synthetic_fleet(shape), int(facts.setting("shards", REGISTRY_SHARDS_VARIABLE)))
        assumptions = Assumptions(replanned_jobs=replanned or 0)
        with_agent = estimate(facts, shape, load, seconds, agent=agent, assumptions=assumptions)
    except (TemplateError, ValueError, KeyError) as error:
        _fail([f"--template: not an Osprey template the cost model can read: {error}"])
    if include_agent:
        report = with_agent
        agent_total = None
    else:
        report = CostReport(tuple(line for line in with_agent.lines if not line.item.startswith("Fleet:")))
        agent_total = round(with_agent.monthly_usd - report.monthly_usd, 2)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    _render(report, shape, seconds, agent_total)
