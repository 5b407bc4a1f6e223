"""``osprey local``'s gangs: two co-scheduled EKS Jobs whose watches run the deployed gang watch state machine
(moto's interpreter, the real handler, the in-memory Kubernetes API), one forming in time and one timing out.

The watches wait real seconds, so the gangs get a tiny ``gang_timeout``; every wait below polls with a deadline.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.server import LocalAws, free_port
from osprey.local.session import LocalState, bring_up, read_decisions
from tests.local.test_local_cli import document

DEADLINE_SECONDS = 40.0


def _until(check: Callable[[], Any], what: str, deadline: float = DEADLINE_SECONDS) -> Any:
    end = time.monotonic() + deadline
    while not (result := check()):
        if time.monotonic() > end:
            raise AssertionError(f"{what} not within {deadline:.0f} s")
        time.sleep(0.2)
    return result


def _gangs(state: LocalState) -> dict[str, dict[str, Any]]:
    return {item["job"]: item["gang"] for item in read_decisions(state) if item["gang"]}


def _bring_up(template: dict[str, Any], path: Path, timeout: int) -> Iterator[tuple[LocalAws, LocalState]]:
    with LocalAws(free_port()) as aws:
        yield aws, bring_up(aws, template, path, gang_timeout=timeout)


@pytest.fixture
def quick_gangs(
    template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LocalAws, LocalState]]:
    """`osprey local up` whose gangs time out after 6 s (the watch polls every second; ddp-eks's pods are all
    Ready after 3 s, which leaves a loaded machine 3 s to see them)."""
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    yield from _bring_up(template, tmp_path / "local.json", 6)


@pytest.fixture
def slow_gangs(
    template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LocalAws, LocalState]]:
    """`osprey local up` whose gangs wait 10 minutes: their watches are still running when it stops."""
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "local.json"))
    yield from _bring_up(template, tmp_path / "local.json", 600)


def test_one_gang_forms_and_one_times_out_and_cycle_and_status_show_both(
    quick_gangs: tuple[LocalAws, LocalState],
) -> None:
    aws, state = quick_gangs
    # Given the two gangs started by `up` through the ingest step's registrar
    sfn = aws.client("stepfunctions")
    executions = sfn.list_executions(stateMachineArn=state.gang_state_machine_arn)["executions"]
    # (gang-eks-<cluster>-<namespace>-<name>-<uid>...: the job's key names its cluster and uid)
    names = [execution["name"] for execution in executions]
    assert sorted(job for name in names for job in ("ddp", "moe") if f"-ml-{job}-" in name) == ["ddp", "moe"]

    # When the watches have decided
    gangs = _until(
        lambda: (
            (found := _gangs(state))
            # (vit-eks, discovered by the first cycle, is a gang of one under training-policy's coScheduling)
            and {name: found[name]["phase"] for name in ("ddp-eks", "moe-eks") if name in found}
            == {"ddp-eks": "ready", "moe-eks": "serial"}
            and found
        ),
        "both gang outcomes",
    )

    # Then ddp-eks formed with all 4 pods within the timeout, after the time its pods took to turn Ready ...
    ddp, moe = gangs["ddp-eks"], gangs["moe-eks"]
    assert (ddp["ready_workers"], ddp["requested_workers"], ddp["ready_in_time"]) == (4, 4, True)
    assert 0 < ddp["wait_seconds"] < 6
    assert ddp["summary"] == f"ready {ddp['wait_seconds']:.0f}s"
    # ... moe-eks got 3 of 4, timed out and runs on without the gang guarantee (serial: nothing suspended)
    assert (moe["ready_workers"], moe["requested_workers"], moe["ready_in_time"]) == (3, 4, False)
    assert moe["reason"] == "3/4 workers ready after 6 s (needs 100%)"
    job = json.loads(
        urllib.request.urlopen(f"{state.kubernetes_url}/apis/batch/v1/namespaces/ml/jobs/moe-eks").read()
    )
    assert job["spec"]["suspend"] is False
    # ... both watch executions ended
    _until(
        lambda: (
            {
                e["status"]
                for e in sfn.list_executions(stateMachineArn=state.gang_state_machine_arn)["executions"]
            }
            == {"SUCCEEDED"}
        ),
        "both watches to end",
    )

    # ... and `osprey local cycle` and `status` show the outcomes, in the GANG column and one line per gang
    runner = CliRunner()
    cycle = runner.invoke(app, ["local", "cycle"])
    assert cycle.exit_code == 0, cycle.output
    assert "GANG" in cycle.output
    ddp_row = next(line for line in cycle.output.splitlines() if line.startswith("ddp-eks "))
    assert ddp_row.endswith(ddp["summary"])
    assert f"gang ddp-eks: {ddp['summary']} - 4/4 workers ready" in cycle.output
    assert "gang moe-eks: timeout → serial - 3/4 workers ready after 6 s (needs 100%)" in cycle.output
    status = runner.invoke(app, ["local", "status", "--json"])
    assert status.exit_code == 0, status.output
    decisions = document(status.output)["decisions"]
    phases = {item["job"]: (item["gang"] or {}).get("phase") for item in decisions if item["gang"]}
    assert {name: phases.get(name) for name in ("ddp-eks", "moe-eks")} == {
        "ddp-eks": "ready",
        "moe-eks": "serial",
    }
    # ... and vit-eks, which this cycle discovered, is a gang of one under training-policy's coScheduling
    assert phases.keys() <= {"ddp-eks", "moe-eks", "vit-eks"}


def test_stopping_osprey_local_stops_the_watches_still_waiting(
    slow_gangs: tuple[LocalAws, LocalState],
) -> None:
    aws, state = slow_gangs
    sfn = aws.client("stepfunctions")

    def statuses() -> list[str]:
        executions = sfn.list_executions(stateMachineArn=state.gang_state_machine_arn)["executions"]
        return sorted(execution["status"] for execution in executions)

    # Given two watches waiting for gangs with a 10-minute timeout
    assert statuses() == ["RUNNING", "RUNNING"]
    assert {gang["summary"] for gang in _gangs(state).values()} <= {"waiting", "waiting 0/4", "waiting 1/4"}

    # When `osprey local` stops (what `down` makes `up` do)
    stopped = aws.stop_executions()

    # Then both are aborted at once, not left to poll a server that is gone
    assert stopped == 2
    assert _until(lambda: statuses() == ["ABORTED", "ABORTED"], "the watches to abort", deadline=10)
