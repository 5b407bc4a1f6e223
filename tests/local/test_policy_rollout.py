"""``osprey history`` and ``osprey policy diff / apply / replay`` against a running ``osprey local``: the real
control plane on the embedded AWS, found by the CLI on its own (no flags), after two real cycles."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.server import LocalAws, free_port
from osprey.local.session import LocalState, bring_up
from tests.conftest import REPO_ROOT

TRAINING = REPO_ROOT / "policies" / "training-policy.yaml"


def document(output: str) -> Any:
    """The CLI's JSON document; the in-process handlers' single-line logs may surround it."""
    start = min(index for index in (output.find('{\n  "'), output.find("[\n  {")) if index >= 0)
    parsed, _ = json.JSONDecoder().raw_decode(output[start:])
    return parsed


@pytest.fixture(scope="module")
def local(template: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalState]:
    path = tmp_path_factory.mktemp("local") / "local.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OSPREY_LOCAL_STATE", str(path))
        with LocalAws(free_port()) as aws:
            state = bring_up(aws, template, path)
            runner = CliRunner()
            for _ in range(2):
                result = runner.invoke(app, ["local", "cycle", "--json"])
                assert result.exit_code == 0, result.output
            yield state


def _changed_training_policy(directory: Path, **spec: Any) -> Path:
    document_ = yaml.safe_load(TRAINING.read_text())
    document_["spec"].update(spec)
    path = directory / "training-policy.yaml"
    path.write_text(yaml.safe_dump(document_))
    return path


def _deployed(local: LocalState, name: str) -> dict[str, Any]:
    value = local.client("ssm").get_parameter(Name=f"/osprey/policies/{name}")["Parameter"]["Value"]
    return dict(json.loads(value))


def test_history_lists_each_decision_with_its_inputs_and_each_apply(
    local: LocalState, tmp_path: Path
) -> None:
    # When the busiest Batch job's history is asked for, by name, with no flags
    runner = CliRunner()
    shown = runner.invoke(app, ["history", "resnet-batch"])
    listed = runner.invoke(app, ["history", "resnet-batch", "--json", "--since", "1h"])
    # Then both cycles' decisions are there, each followed by what reached Batch
    assert shown.exit_code == 0, shown.output
    assert "derived" in shown.output
    assert "applied" in shown.output
    events = document(listed.output)["events"]
    derived = [event for event in events if event["event"] == "derived"]
    applied = [event for event in events if event["event"] == "applied"]
    assert len(derived) == 2
    assert [event["priority"] for event in applied] == [event["priority"] for event in derived]
    # ... saying what Batch now holds: the job's share identifier and its weightFactor
    assert all(re.fullmatch(r"written: \S+=[\d.]+", event["detail"]) for event in applied), applied
    # ... each decision with the inputs it was derived from and its per-rule explanation
    count, mean, low, high = derived[0]["inputs"]["nodes"]["gpu_utilization"]
    assert count >= 1
    assert low <= mean <= high
    assert {rule["metric"] for rule in derived[0]["rules"]} >= {"gpu_utilization"}
    # ... a plot on request, and a near miss gets a suggestion
    plot = tmp_path / "history.png"
    assert runner.invoke(app, ["history", "resnet-batch", "--plot", str(plot)]).exit_code == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missed = runner.invoke(app, ["history", "resnet-bach"])
    assert missed.exit_code == 1
    assert "did you mean 'resnet-batch'" in missed.output


def test_diff_and_apply_roll_a_policy_out_and_refuse_what_the_deployment_cannot_invoke(
    local: LocalState, tmp_path: Path
) -> None:
    runner = CliRunner()
    # Given the deployed training policy, unchanged, and an edited copy with a wider deadband
    same = runner.invoke(app, ["policy", "diff", str(TRAINING)])
    assert same.exit_code == 0, same.output
    assert "training-policy: unchanged" in same.output
    edited = _changed_training_policy(tmp_path, deadband=6)
    # When diffed and applied dry
    diff = runner.invoke(app, ["policy", "diff", str(edited)])
    dry = runner.invoke(app, ["policy", "apply", str(edited), "--dry-run"])
    # Then the diff shows the one line that changes, and the dry run writes nothing
    assert "training-policy: changed" in diff.output
    assert "-  deadband: 3" in diff.output
    assert "+  deadband: 6" in diff.output
    assert dry.exit_code == 0, dry.output
    assert _deployed(local, "training-policy")["spec"]["deadband"] == 3
    # When applied for real: the parameter the derive step reads holds the new policy
    applied = runner.invoke(app, ["policy", "apply", str(edited)])
    assert applied.exit_code == 0, applied.output
    assert "1 changed" in applied.output
    assert _deployed(local, "training-policy")["spec"]["deadband"] == 6
    # When a policy names a rule outside the deployment's prefix: refused, with the field, nothing written
    rogue = _changed_training_policy(
        tmp_path,
        deadband=9,
        derivationRules=[
            *yaml.safe_load(TRAINING.read_text())["spec"]["derivationRules"],
            {
                "custom": {
                    "arn": "arn:aws:lambda:us-east-1:123456789012:function:rogue",
                    "fallbackPriority": 50,
                }
            },
        ],
    )
    refused = runner.invoke(app, ["policy", "apply", str(rogue)])
    assert refused.exit_code == 1
    assert "derivationRules[3].custom.arn" in refused.output
    assert _deployed(local, "training-policy")["spec"]["deadband"] == 6
    # (put the shipped policy back for the other tests)
    assert runner.invoke(app, ["policy", "apply", str(TRAINING)]).exit_code == 0


def test_replay_re_derives_the_recorded_decisions_and_shows_how_the_order_moves(
    local: LocalState, tmp_path: Path
) -> None:
    # Given a training policy that only looks at GPU utilization, fully and at once
    gpu_only = _changed_training_policy(
        tmp_path,
        derivationRules=[yaml.safe_load(TRAINING.read_text())["spec"]["derivationRules"][0]],
        maxPriorityChange=100,
        deadband=0,
    )
    # When it is replayed over the recorded history
    runner = CliRunner()
    result = runner.invoke(app, ["policy", "replay", str(gpu_only), "--json"])
    table = runner.invoke(app, ["policy", "replay", str(gpu_only)])
    # Then every active job of that policy is re-derived from its two recorded decisions
    assert result.exit_code == 0, result.output
    jobs = document(result.output)["training-policy"]
    names = {job["name"] for job in jobs}
    assert {"resnet-batch", "etl-batch"} <= names
    for job in jobs:
        assert job["replayable"], job
        assert len(job["decisions"]) == 2
    # ... and, with no damping, each job lands on its GPU rule's priority: the busy job above the idle one
    by_name = {job["name"]: job for job in jobs}
    assert by_name["resnet-batch"]["new_priority"] > by_name["etl-batch"]["new_priority"]
    assert by_name["resnet-batch"]["new_rank"] < by_name["etl-batch"]["new_rank"]
    assert "RANK NOW → REPLAYED" in table.output
