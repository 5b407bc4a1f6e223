"""Given durations, decisions and gang states, when the CLI renders them, then a person reads them at a glance:
kubectl's units, each rule's real share of the mean, a timed-out gang that says so, and a progress clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from osprey.local.progress import Progress, clock
from osprey.views import decision_inputs, effective_weights, gang_cell, human_duration, load_cell
from osprey_control.derivation import JobMetrics, NodeMetrics, derive
from osprey_control.gang import GangPhase, start
from osprey_control.policy import load_policies
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-3, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3599, "59m"),
        (3600 + 300, "1h5m"),
        (10 * 3600 + 300, "10h"),
        (47 * 3600, "47h"),
        (3 * 86400 + 6 * 3600, "3d6h"),
        (12 * 86400 + 3600, "12d"),
    ],
)
def test_durations_read_like_kubectl_ages(seconds: int, shown: str) -> None:
    assert human_duration(seconds) == shown
    assert human_duration(timedelta(seconds=seconds)) == shown


def test_effective_weights_renormalise_over_the_rules_that_had_data() -> None:
    # Given training-policy (0.6 / 0.3 / 0.1) and a job with no memory bandwidth data
    policy = next(p for p in load_policies([REPO_ROOT / "policies"]) if p.name == "training-policy")
    values = {"gpu_utilization": 80.0, "node_interconnect_latency": 100.0}
    decision = derive(policy, JobMetrics("j", (NodeMetrics("n", values),))).to_dict()

    # Then the dropped rule counts 0 and the others share its weight in proportion
    weights = effective_weights(decision["rules"])
    assert weights == pytest.approx({0: 0.6 / 0.7, 1: 0.0, 2: 0.1 / 0.7})
    # ... and the weighted mean of the rules' priorities with those weights is the engine's base
    base = sum(weights[rule["index"]] * (rule["priority"] or 0.0) for rule in decision["rules"])
    assert base == pytest.approx(decision["base"])
    # ... and the load the rules read is shown, "-" where there was none
    assert decision_inputs(decision) == {
        "gpu_utilization": 80.0,
        "memory_bandwidth_utilization": None,
        "node_interconnect_latency": 100.0,
    }
    assert load_cell(decision_inputs(decision)) == "gpu 80 membw - latency 100"


def test_a_gang_that_timed_out_says_so() -> None:
    state = start(datetime(2026, 12, 1, tzinfo=UTC))
    assert gang_cell(replace(state, phase=GangPhase.SERIAL, ready_in_time=False)) == "timeout → serial"
    assert gang_cell(replace(state, phase=GangPhase.FAILED, ready_in_time=False)) == "timeout → failed"
    assert gang_cell(replace(state, phase=GangPhase.ENDED)) == "ended"


def test_progress_prefixes_the_elapsed_time_and_beats_while_a_step_is_silent() -> None:
    # Given a progress reporter on a clock we move by hand
    now = [100.0]
    lines: list[str] = []
    progress = Progress(lines.append, quiet=15.0, now=lambda: now[0])

    # When a step starts and stays silent for 10 s, then 16 s, then 65 s in all
    progress("npx cdk deploy Osprey ...")
    now[0] += 10
    assert progress.beat() is False
    now[0] += 6
    assert progress.beat() is True
    now[0] += 49
    progress.beat()

    # Then every line carries the time since the start, and the heartbeat names the step and its age
    assert lines == [
        "[0:00] npx cdk deploy Osprey ...",
        "[0:16] ... still at npx cdk deploy Osprey (16 s)",
        "[1:05] ... still at npx cdk deploy Osprey (65 s)",
    ]
    assert clock(725.9) == "12:05"
