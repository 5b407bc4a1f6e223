"""Shadow mode end to end in ``osprey local`` (issue 30, item 1): the app synthesized with ``osprey:mode=shadow``,
deployed into the embedded AWS with the simulated fleet on every backend, cycles run through the CLI.

Given cycles in shadow, then nothing reached any backend (the Batch fair-share weights, the SageMaker tags, the
service jobs' schedulingPriority and the Kueue Workloads' priority are what they were before the first cycle)
and everything is recorded (each derived priority, and the value that would have been written, in the registry
and the jobs' history). When ``/osprey/config`` then says enforce (what a ``cdk deploy`` of the context does: no
code changes), the next cycle writes the priorities to every backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.server import LocalAws, free_port
from osprey.local.session import LOCAL_CONTEXT, LocalState, bring_up, read_decisions, synthesize
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.wiring import CONFIG_PARAMETER
from tests.local.test_local_cli import document


@pytest.fixture(scope="module")
def shadow_template() -> dict[str, Any]:
    return synthesize({**LOCAL_CONTEXT, "osprey:mode": "shadow"})


@pytest.fixture
def local(
    shadow_template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalState]:
    path = tmp_path / "local.json"
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(path))
    with LocalAws(free_port()) as aws:
        yield bring_up(aws, shadow_template, path)


def _on_backend(state: LocalState) -> dict[str, Any]:
    return {item["job"]: item["onBackend"] for item in read_decisions(state)}


def _job_rows(output: str) -> list[dict[str, Any]]:
    """`osprey jobs --json`'s one-line list. The gang watches run on in the background in this process, so
    their log and metric lines can land in the same output, before or after it (each on a line of its own)."""
    lists = [line for line in output.splitlines() if line.startswith("[")]
    assert len(lists) == 1, output
    rows: list[dict[str, Any]] = json.loads(lists[0])
    return rows


def _cycle(runner: CliRunner) -> dict[str, Any]:
    result = runner.invoke(app, ["local", "cycle", "--json"])
    assert result.exit_code == 0, result.output
    cycle = document(result.output)
    assert cycle["status"] == "SUCCEEDED"
    return dict(cycle)


def test_shadow_cycles_write_nothing_to_any_backend_and_record_everything(local: LocalState) -> None:
    runner = CliRunner()
    registry = JobRegistry(local.table_name, local.client("dynamodb"), shards=local.shards)
    config = json.loads(local.client("ssm").get_parameter(Name=CONFIG_PARAMETER)["Parameter"]["Value"])
    assert config["mode"]["default"] == "shadow"
    before = _on_backend(local)

    # When two cycles run in shadow
    _cycle(runner)
    after_first = _on_backend(local)
    _cycle(runner)
    after = _on_backend(local)

    # Then no backend holds anything new: every job seeded before the first cycle shows what it showed then,
    # and the EKS job the first cycle discovered shows what it showed after that cycle
    assert {job: after[job] for job in before} == before
    assert after == after_first
    # ... while every job was derived, and what would have been written is recorded, marked shadow
    records = registry.list_active()
    derived = [record for record in records if record.derived_priority is not None]
    assert {record.backend.value for record in derived} == {"batch", "sagemaker", "sagemaker-queued", "eks"}
    for record in derived:
        assert record.shadow_priority == record.derived_priority, record.name
        assert record.derived_priority != record.applied_priority, record.name
        outcomes = {line["outcome"] for line in registry.events.apply_events(record.key)}
        assert outcomes == {"shadow"}, record.name
    # ... and `osprey jobs` (which finds the running local by itself) marks every derived job shadow
    rows = _job_rows(runner.invoke(app, ["jobs", "--json"]).stdout)
    assert {row["apply"] for row in rows if row["priority"] is not None} == {"shadow"}

    # When the deployment's config is switched to enforce (a `cdk deploy -c osprey:mode=enforce` changes only
    # this parameter) and one more cycle runs
    config["mode"]["default"] = "enforce"
    local.client("ssm").put_parameter(
        Name=CONFIG_PARAMETER, Value=json.dumps(config), Type="String", Overwrite=True
    )
    _cycle(runner)

    # Then every backend now holds Osprey's priorities, and the shadow marks are gone
    enforced = _on_backend(local)
    for record in registry.list_active():
        if record.derived_priority is None:
            continue
        assert record.applied_priority == record.derived_priority, record.name
        assert record.shadow_priority is None, record.name
        assert enforced[record.name] != after[record.name] or record.name not in after, record.name
