"""Which mode a job is in (osprey_control.steps.mode): shadow-only backends always shadow, then the overrides
that name the job (the cautious one wins), then the deployment's default; and what a bad setting says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from osprey_control.registry import Backend
from osprey_control.steps.mode import Mode, ModeError, ModeSettings, read_modes

SHADOW, ENFORCE = Mode.SHADOW, Mode.ENFORCE


@pytest.mark.parametrize(
    ("settings", "backend", "policy", "expected", "why"),
    [
        ({}, Backend.BATCH, "team-a", ENFORCE, "the deployment's default is enforce"),
        ({"default": "shadow"}, Backend.EKS, "team-a", SHADOW, "the deployment's default is shadow"),
        (
            {"default": "shadow", "backends": {"batch": "enforce"}},
            Backend.BATCH,
            "team-a",
            ENFORCE,
            "backend batch is enforce",
        ),
        (
            {"default": "shadow", "policies": {"team-a": "enforce"}},
            Backend.EKS,
            "team-a",
            ENFORCE,
            "policy team-a is enforce",
        ),
        (
            {"policies": {"team-a": "shadow"}, "backends": {"eks": "enforce"}},
            Backend.EKS,
            "team-a",
            SHADOW,
            "policy team-a is shadow",
        ),
        (
            {"policies": {"team-a": "enforce"}, "backends": {"eks": "shadow"}},
            Backend.EKS,
            "team-a",
            SHADOW,
            "backend eks is shadow",
        ),
        (
            {"policies": {"team-a": "enforce"}, "shadowOnly": ["slurm"]},
            Backend.SLURM,
            "team-a",
            SHADOW,
            "backend slurm is shadow-only",
        ),
        # The SageMaker training queue's service jobs are SageMaker's
        (
            {"backends": {"sagemaker": "shadow"}},
            Backend.SAGEMAKER_QUEUED,
            "team-a",
            SHADOW,
            "backend sagemaker is shadow",
        ),
    ],
)
def test_a_jobs_mode_and_why(
    settings: dict[str, Any], backend: Backend, policy: str, expected: Mode, why: str
) -> None:
    assert ModeSettings.build(settings).explain(backend, policy) == (expected, why)


def test_housekeeping_runs_only_where_some_job_may_be_enforced() -> None:
    modes = ModeSettings.build({"default": "shadow", "backends": {"eks": "enforce"}, "shadowOnly": ["slurm"]})
    assert [modes.may_enforce(b) for b in (Backend.BATCH, Backend.EKS, Backend.SLURM)] == [False, True, False]
    # A policy enforced anywhere may put writes on any backend that is not itself shadow
    assert ModeSettings.build({"default": "shadow", "policies": {"p": "enforce"}}).may_enforce(Backend.BATCH)


def test_a_deployment_without_a_mode_enforces_everywhere() -> None:
    assert ModeSettings.from_config({"tableName": "t"}).all_enforce
    assert not ModeSettings.build({"policies": {"p": "shadow"}}).all_enforce


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"default": "observe"}, "mode.default: Input should be 'shadow' or 'enforce'"),
        ({"backends": {"kueue": "shadow"}}, "mode.backends: Value error, unknown backend 'kueue'"),
        ({"policies": {"Team A": "shadow"}}, "'Team A' is not a policy name"),
        ({"shadowOnly": ["batch"], "backends": {"batch": "enforce"}}, "batch is shadow-only"),
        ({"default": "shadow", "extra": 1}, "mode.extra: Extra inputs are not permitted"),
    ],
)
def test_a_bad_setting_names_the_field(value: dict[str, Any], message: str) -> None:
    with pytest.raises(ModeError) as raised:
        ModeSettings.build(value)
    assert message in str(raised.value)


class Ssm:
    def __init__(self, value: str) -> None:
        self.value = value

    def get_parameter(self, Name: str) -> dict[str, Any]:  # noqa: N803 - boto3's parameter name
        return {"Parameter": {"Name": Name, "Value": self.value}}


def test_the_config_parameter_round_trips() -> None:
    modes = ModeSettings.build({"default": "shadow", "backends": {"batch": "enforce"}, "shadowOnly": ["eks"]})
    assert read_modes(Ssm(json.dumps({"mode": modes.to_config()})), "/osprey/config") == modes
    with pytest.raises(ModeError, match="/osprey/config is not JSON"):
        read_modes(Ssm("{"), "/osprey/config")
    with pytest.raises(ModeError, match="mode: expected an object"):
        read_modes(Ssm(json.dumps({"mode": "shadow"})), "/osprey/config")
