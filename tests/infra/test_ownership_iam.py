"""Issue 28, item 2 in IAM: over the synthesized template (every backend on, the SageMaker queue created), each
action that changes a backend resource is allowed only on resources tagged ``osprey:enabled=true``, the one tag
write is of Osprey's own key, and no role may rewrite or remove anyone's tags.

What IAM cannot say is said here too: ``batch:UpdateSchedulingPolicy`` is conditioned on the *policy's* tag, and
no condition key names a fair-share entry, so "only entries Osprey created" is the applier's check alone
(``osprey_control.backends.batch.ownership``, tests/control/backends/batch/test_share_ownership.py).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from osprey_control.backends import DERIVED_PRIORITY_TAG
from osprey_infra.config import ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT
from tests.infra.iam import actions, function_statements

TAGGED = {"aws:ResourceTag/osprey:enabled": "true"}
# Every action Osprey's code calls that changes a job, a queue's policy or a tag.
BACKEND_WRITES = {
    "batch:UpdateSchedulingPolicy",  # apply: fair-share weights
    "batch:UpdateServiceJob",  # apply: a SageMaker service job's schedulingPriority
    "sagemaker:AddTags",  # apply: osprey:derived-priority on a training job
    "batch:TerminateJob",  # gang watch: the fail fallback
    "batch:TerminateServiceJob",
    "sagemaker:StopTrainingJob",
}
# Never granted: they would let Osprey rewrite or remove the opt-in or anyone's tags, or act on every job.
NEVER = {
    "sagemaker:DeleteTags",
    "batch:TagResource",
    "batch:UntagResource",
    "batch:CancelJob",
    "batch:SubmitJob",
    "batch:UpdateJobQueue",
    "batch:CreateSchedulingPolicy",
    "batch:DeleteSchedulingPolicy",
}


@pytest.fixture(scope="module")
def statements() -> dict[str, list[dict[str, Any]]]:
    config = ControlPlaneConfig.build(
        {"backends": ["batch", "sagemaker", "eks"], "eks_clusters": ["gpu"], "sagemaker_queue": True}
    )
    stack = OspreyStack(cdk.App(), "Ownership", policy_paths=[REPO_ROOT / "policies"], config=config)
    return function_statements(Template.from_stack(stack).to_json())


def _granting(
    statements: dict[str, list[dict[str, Any]]], wanted: set[str]
) -> list[tuple[str, dict[str, Any]]]:
    return [
        (function, statement)
        for function, found in statements.items()
        for statement in found
        if statement.get("Effect", "Allow") == "Allow" and actions(statement) & wanted
    ]


def test_every_backend_write_is_allowed_only_on_resources_tagged_osprey_enabled(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    # Given every statement of every Osprey function that grants a backend write
    granting = _granting(statements, BACKEND_WRITES)
    # Then all six writes are granted (to apply or the gang watch), and each only under the opt-in tag
    assert {action for _, statement in granting for action in actions(statement)} >= BACKEND_WRITES
    for function, statement in granting:
        assert function in {"apply", "gang_watch"}, f"{function} may write a backend resource"
        assert statement["Condition"]["StringEquals"] == TAGGED, (function, statement)
        assert actions(statement) <= BACKEND_WRITES, "a tag-conditioned statement holds only writes"


def test_the_only_tag_osprey_may_write_is_its_own_derived_priority(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    [(function, statement)] = _granting(statements, {"sagemaker:AddTags"})
    assert function == "apply"
    assert statement["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": [DERIVED_PRIORITY_TAG]}
    # ForAllValues holds for a request without keys too; Null=false requires keys, all of them Osprey's
    assert statement["Condition"]["Null"] == {"aws:TagKeys": "false"}
    assert DERIVED_PRIORITY_TAG.startswith("osprey:")


def test_no_role_may_remove_tags_act_on_every_job_or_use_service_wildcards(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    every = [action for found in statements.values() for statement in found for action in actions(statement)]
    assert not set(every) & NEVER
    assert not [action for action in every if action == "*" or action.endswith(":*")]
    assert not [a for a in every if a.startswith(("batch:", "sagemaker:")) and "*" in a]


def test_the_scheduling_policy_condition_is_on_the_policy_not_its_entries(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    # Given the one statement that allows UpdateSchedulingPolicy
    [(function, statement)] = _granting(statements, {"batch:UpdateSchedulingPolicy"})
    # Then it names scheduling policies and requires the policy's opt-in tag; no condition key names a
    # shareDistribution entry, so entry ownership is enforced by the applier (module docstring)
    assert function == "apply"
    assert "scheduling-policy/*" in str(statement["Resource"])
    assert set(statement["Condition"]) == {"StringEquals"}
