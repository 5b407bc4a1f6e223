"""``osprey.rollout``: what a policy roll-out would change, and a roll-out that is never half-applied (moto SSM)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey.rollout import RolloutError, apply_rollout, deployed_policies, plan_rollout
from osprey_control.policy import load_policy_files
from osprey_control.policy.stored import policy_parameter_value
from tests.conftest import REPO_ROOT

PREFIX = "/osprey/policies"


@pytest.fixture
def ssm() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("ssm", region_name="us-east-1")


def _shipped() -> list[Any]:
    return list(load_policy_files([REPO_ROOT / "policies"]).policies)


class FailingFor:
    """The SSM client, except that writing ``name`` fails (as a throttled or refused PutParameter would)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client, self.name = client, name

    def put_parameter(self, **kwargs: Any) -> Any:
        if kwargs["Name"] == self.name:
            raise RuntimeError("ThrottlingException")
        return self.client.put_parameter(**kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.client, attribute)


def test_a_roll_out_writes_new_and_changed_policies_and_leaves_the_rest(ssm: Any) -> None:
    # Given one shipped policy deployed as it is and one deployed in an older version
    policies = _shipped()
    first, second = policies[0], policies[1]
    ssm.put_parameter(
        Name=f"{PREFIX}/{first.policy.name}", Value=policy_parameter_value(first.policy), Type="String"
    )
    ssm.put_parameter(Name=f"{PREFIX}/{second.policy.name}", Value='{"old": true}', Type="String")
    # When the shipped set is planned and applied
    changes = plan_rollout(policies, deployed_policies(ssm, PREFIX), PREFIX)
    written = apply_rollout(ssm, changes)
    # Then each policy is new, changed or unchanged as deployed, and only the first two kinds were written
    kinds = {change.name: change.kind for change in changes}
    assert kinds[first.policy.name] == "unchanged"
    assert kinds[second.policy.name] == "changed"
    assert {change.name for change in written} == {
        name for name, kind in kinds.items() if kind != "unchanged"
    }
    assert deployed_policies(ssm, PREFIX) == {
        p.policy.name: policy_parameter_value(p.policy) for p in policies
    }


def test_a_failed_write_puts_back_what_was_written(ssm: Any) -> None:
    # Given one policy deployed in an older version and the others not at all
    policies = _shipped()
    ssm.put_parameter(Name=f"{PREFIX}/{policies[0].policy.name}", Value='{"old": true}', Type="String")
    before = deployed_policies(ssm, PREFIX)
    changes = plan_rollout(policies, before, PREFIX)
    # When the last write fails
    failing = FailingFor(ssm, changes[-1].parameter)
    with pytest.raises(RolloutError, match="put back"):
        apply_rollout(failing, changes)
    # Then the deployment is exactly as it was: the changed one restored, the new ones deleted
    assert deployed_policies(ssm, PREFIX) == before


def test_the_diff_is_the_yaml_lines_that_change() -> None:
    # Given a deployed policy whose deadband differs from the file's
    (loaded,) = _shipped()[:1]
    deployed = loaded.policy.model_copy(
        update={"spec": loaded.policy.spec.model_copy(update={"deadband": 7.5})}
    )
    ((change),) = plan_rollout([loaded], {loaded.policy.name: policy_parameter_value(deployed)}, PREFIX)
    # Then it is changed, and its diff is that one line
    assert change.kind == "changed"
    changed = [line for line in change.diff() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-  deadband: 7.5", f"+  deadband: {loaded.policy.spec.deadband}"]


def test_a_broken_deployed_policy_can_be_diffed_and_replaced(ssm: Any) -> None:
    # Given a deployed policy parameter holding 4 KB of "[" (the JSON decoder recurses on it)
    loaded = _shipped()[0]
    name = loaded.policy.name
    ssm.put_parameter(Name=f"{PREFIX}/{name}", Value="[" * 4096, Type="String")
    # When the operator plans and applies the policy from its file
    (change,) = [
        c for c in plan_rollout(_shipped(), deployed_policies(ssm, PREFIX), PREFIX) if c.name == name
    ]
    # Then the broken value is shown as it is, replaced by the valid one
    assert change.kind == "changed"
    assert "-" + "[" * 4096 in change.diff()
    apply_rollout(ssm, [change])
    stored = ssm.get_parameter(Name=f"{PREFIX}/{name}")["Parameter"]["Value"]
    assert stored == policy_parameter_value(loaded.policy)
