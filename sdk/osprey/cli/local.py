"""``osprey local up | cycle | status | down``: the control plane on an embedded AWS, no account needed.

``up`` keeps the embedded AWS (moto server with the real handlers) in its own process, in the foreground until
Ctrl-C or ``osprey local down`` (``--detach`` starts it in the background and returns once it is ready). The
other commands find it through the state file (``$OSPREY_LOCAL_STATE``, default ``~/.osprey/local.json``).
See docs/local.md for what is real and what is simulated.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from osprey.cli.errors import usage_exit
from osprey.local.gangs import GANG_TIMEOUT_SECONDS, gang_lines
from osprey.local.progress import Progress, clock
from osprey.local.server import DEFAULT_PORT
from osprey.views import load_cell

if TYPE_CHECKING:
    from osprey.local.server import LocalAws
    from osprey.local.session import LocalState

__all__: list[str] = []

local_app = typer.Typer(
    help="Run Osprey on an embedded local AWS (moto) with a simulated GPU fleet.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
READY_TIMEOUT_SECONDS = 180.0


@local_app.callback()
def _local() -> None:
    """Run Osprey on an embedded local AWS (moto) with a simulated GPU fleet."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _state() -> LocalState:
    from osprey.local.session import LocalState, state_path  # noqa: PLC0415 - keep other commands fast

    path = state_path()
    if not path.is_file():
        raise _fail(f"osprey local is not up (no {path}); run `osprey local up`")
    state = LocalState.load(path)
    if not _alive(state.pid):
        raise _fail(f"the osprey local server (pid {state.pid}) is gone; run `osprey local up` again")
    return state


# Under every cycle and status table: what the LOAD and ON BACKEND numbers mean, so nobody reads a falling
# weightFactor as a falling priority.
LEGEND = (
    "LOAD: what the policy's rules read (gpu, membw: % utilization; latency: microseconds; - no data).",
    "ON BACKEND: Batch weightFactor, LOWER gets more of the queue (priority 100 → 1.0, 0 → 100.0; share: of "
    "the fleet's Batch jobs); schedulingPriority (0..9999) and Kueue workload priority (0..1000), higher runs "
    "first; the tag on a direct SageMaker job only records the priority.",
)


def on_backend_cell(item: dict[str, Any]) -> str:
    value = str(item.get("onBackend") or "-")
    share = item.get("share")
    return value if share is None else f"{value} ({share:.0%} share)"


def _table(decisions: list[dict[str, Any]]) -> str:
    """The jobs' decisions, one row each, the legend, then one line per gang watch (outcome, wait, reason)."""
    rows = [("JOB", "BACKEND", "LOAD", "PREVIOUS", "PRIORITY", "TARGET", "REASON", "ON BACKEND", "GANG")]
    for item in decisions:
        target = item["target"]
        rows.append(
            (
                str(item["job"]),
                str(item["backend"]),
                load_cell(item.get("inputs") or {}),
                "-" if item["previous"] is None else str(item["previous"]),
                "-" if item["priority"] is None else str(item["priority"]),
                "-" if target is None else f"{target:.1f}",
                str(item["reason"] or "-"),
                on_backend_cell(item),
                str((item.get("gang") or {}).get("summary") or "-"),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    return "\n".join([*(line.rstrip() for line in lines), *LEGEND, *gang_lines(decisions)])


def _detach(port: int, template: Path | None, deploy: str, path: Path, gang_timeout: int) -> None:
    from osprey.local.session import LocalState  # noqa: PLC0415 - keep other commands fast

    command = [
        sys.executable,
        "-c",
        "from osprey.cli.main import main; main()",
        "local",
        "up",
        "--port",
        str(port),
        "--deploy",
        deploy,
        "--gang-timeout",
        str(gang_timeout),
    ]
    if template is not None:
        command += ["--template", str(template)]
    log = path.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as output:
        # Unbuffered: this process relays the progress lines from the log while the child works.
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    started = time.monotonic()
    deadline = started + READY_TIMEOUT_SECONDS
    with log.open() as progress:
        while time.monotonic() < deadline:
            _relay(progress)
            if process.poll() is not None:
                _relay(progress)
                raise _fail(f"osprey local up exited with {process.returncode}; see {log}")
            if path.is_file() and LocalState.load(path).pid == process.pid:
                typer.echo(
                    f"[{clock(time.monotonic() - started)}] osprey local is up at http://localhost:{port} "
                    f"(pid {process.pid}, log {log})"
                )
                return
            time.sleep(0.5)
    raise _fail(f"osprey local up was not ready after {READY_TIMEOUT_SECONDS:.0f} s; see {log}")


def _relay(log: TextIO) -> None:
    """Echo the progress lines (``[m:ss] ...``) the background ``up`` wrote to its log since the last call;
    the handlers' own log lines stay in the file."""
    for line in log.readlines():
        if re.match(r"\[\d+:\d\d\] ", line):
            typer.echo(line.rstrip("\n"))


def _bring_up(
    aws: LocalAws, path: Path, deploy: str, template: Path | None, gang_timeout: int, progress: Progress
) -> LocalState:
    from osprey.local.cdk import CdkDeployError  # noqa: PLC0415
    from osprey.local.session import bring_up, bring_up_with_cdk, synthesize  # noqa: PLC0415

    if deploy == "cdk":
        try:
            return bring_up_with_cdk(aws, path, log=progress, gang_timeout=gang_timeout)
        except CdkDeployError as error:
            raise _fail(str(error)) from None
    progress("synthesizing the Osprey app ..." if template is None else f"reading {template} ...")
    body = json.loads(template.read_text()) if template is not None else synthesize()
    progress("creating the template's resources, seeding the simulated fleet ...")
    return bring_up(aws, body, path, gang_timeout=gang_timeout)


@local_app.command("up", short_help="Start the embedded AWS, deploy Osprey, seed a fleet.")
def up_command(
    port: Annotated[int, typer.Option(help="Port of the embedded AWS on localhost.")] = DEFAULT_PORT,
    template: Annotated[
        Path | None,
        typer.Option(help="A synthesized template (cdk.out/Osprey.template.json); default: synth now."),
    ] = None,
    detach: Annotated[bool, typer.Option(help="Run in the background and return when ready.")] = False,
    deploy: Annotated[
        str,
        typer.Option(
            help="cdk: npx cdk bootstrap and npx cdk deploy into the embedded AWS; template: create the "
            "synthesized template's resources directly (faster, no Node.js). --template implies template."
        ),
    ] = "cdk",
    gang_timeout: Annotated[
        int,
        typer.Option(
            min=1,
            max=86_400,
            help="The seeded gangs' gang_timeout in seconds: one forms within it, one times out (serial).",
        ),
    ] = GANG_TIMEOUT_SECONDS,
) -> None:
    """Start the embedded AWS, deploy the Osprey control plane into it and seed a simulated fleet."""
    from osprey.checkout import CheckoutNotFoundError, find_checkout  # noqa: PLC0415
    from osprey.local.cdk import cdk_available  # noqa: PLC0415
    from osprey.local.server import LocalAws  # noqa: PLC0415 - keep other commands fast
    from osprey.local.session import LocalState, state_path  # noqa: PLC0415

    if deploy not in ("cdk", "template"):
        raise usage_exit([f"--deploy must be cdk or template, got {deploy!r}"])
    if template is not None:
        deploy = "template"
    try:
        checkout = find_checkout()
    except CheckoutNotFoundError as error:
        raise _fail(str(error)) from None
    if deploy == "cdk" and not cdk_available(checkout):
        raise _fail("`npx cdk` is not installed here (npm ci in the repo); or use --deploy template")
    path = state_path()
    if path.is_file() and _alive(LocalState.load(path).pid):
        raise _fail(f"osprey local is already up (see {path}); run `osprey local down` first")
    if detach:
        _detach(port, template, deploy, path, gang_timeout)
        return
    stop = threading.Event()
    # `down` sends SIGTERM; SIGINT (Ctrl-C) too, even where a shell started us with SIGINT ignored.
    for stopping in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stopping, lambda *_: stop.set())
    progress = Progress(typer.echo)
    progress(f"starting the embedded AWS on http://localhost:{port} ...")
    with LocalAws(port) as aws:
        with progress:  # a line every 15 s while a step (cdk deploy: a minute or two) says nothing
            state = _bring_up(aws, path, deploy, template, gang_timeout, progress)
        progress(
            f"deployed: state machine {state.state_machine_arn.rsplit(':', 1)[-1]}, table {state.table_name}, "
            f"{len(state.functions)} functions; fleet: {len(state.jobs)} jobs"
        )
        gangs = [job.label for job in state.jobs if job.gang_workers]
        if state.gang_timeout:  # 0: no watches (no EKS cluster, or no gang watch state machine deployed)
            progress(f"gang watches started for {', '.join(gangs)} (gang_timeout {state.gang_timeout} s)")
        progress(
            f"ready. Run `osprey local cycle` in another shell; Ctrl-C or `osprey local down` stops ({path})"
        )
        try:
            while not stop.wait(0.5):
                pass
        finally:
            path.unlink(missing_ok=True)
            # A gang watch still waiting would keep polling a server that is shutting down: stop it first.
            stopped = aws.stop_executions()
            if stopped:
                typer.echo(f"stopped {stopped} running execution(s) (gang watches)")
    typer.echo("osprey local stopped")


@local_app.command("cycle", short_help="Publish the next minute of metrics, run a cycle.")
def cycle_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print the decisions as JSON.")] = False,
    count: Annotated[int, typer.Option(min=1, max=1000, help="How many cycles to run.")] = 1,
    plot: Annotated[
        Path | None, typer.Option(help="Afterwards, write a PNG of every job's priorities over all cycles.")
    ] = None,
    live: Annotated[
        bool, typer.Option(help="A live table (Rich) of jobs, load and priorities, redrawn after each cycle.")
    ] = False,
) -> None:
    """Publish the next minute of fleet metrics and run one cycle of the deployed state machine."""
    from osprey.local.session import run_cycle  # noqa: PLC0415 - keep other commands fast

    if live and json_output:  # the command line first: a usage error whether or not a local is up
        raise usage_exit(["--live and --json do not go together"])
    state = _state()
    if live:
        from osprey.local.live import run_live  # noqa: PLC0415 - Rich only for --live

        results = run_live(lambda: run_cycle(state), count)
        if results[-1].status != "SUCCEEDED":
            raise typer.Exit(code=1)
        count = 0  # done: only the plot below remains
    for _ in range(count):
        result = run_cycle(state)
        if json_output:
            typer.echo(json.dumps(result.to_dict(), indent=2))
        else:
            typer.echo(f"cycle {result.execution}: {result.status} (tick {result.tick})")
            typer.echo(_table(result.decisions))
        if result.status != "SUCCEEDED":
            raise typer.Exit(code=1)
    if plot is not None:
        from osprey.local.plot import per_cycle, plot_priorities, priority_history  # noqa: PLC0415 - slow

        history = priority_history(state)
        plot_priorities(per_cycle(history), plot)
        typer.echo(f"wrote {plot} ({len(history.cycles)} cycles)", err=json_output)


@local_app.command("status", short_help="Where the embedded AWS is, and the priorities.")
def status_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Where the embedded AWS is and the priorities the registry holds."""
    from osprey.local.session import read_decisions  # noqa: PLC0415 - keep other commands fast

    state = _state()
    decisions = read_decisions(state)
    if json_output:
        typer.echo(
            json.dumps({"endpoint": state.endpoint, "pid": state.pid, "decisions": decisions}, indent=2)
        )
        return
    typer.echo(f"osprey local is up at {state.endpoint} (pid {state.pid})")
    typer.echo(_table(decisions))


@local_app.command("down", short_help="Stop the embedded AWS (everything in it is gone).")
def down_command() -> None:
    """Stop the embedded AWS started by "osprey local up" (everything in it is gone)."""
    from osprey.local.session import LocalState, state_path  # noqa: PLC0415 - keep other commands fast

    path = state_path()
    if not path.is_file():
        typer.echo("osprey local is not up")
        return
    state = LocalState.load(path)
    if _alive(state.pid):
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while _alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    path.unlink(missing_ok=True)
    typer.echo(f"osprey local (pid {state.pid}) stopped")
