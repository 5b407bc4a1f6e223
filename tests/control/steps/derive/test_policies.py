"""Given policies stored in SSM by the CDK app, when the derive step reads them, then they are validated,
compiled, cached, and a broken parameter never hides the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from osprey_control.derivation import compile_policy
from osprey_control.policy import load_policies
from osprey_control.policy.stored import policy_parameter_value
from osprey_control.policy_store import InvalidPolicyError, PolicySource, UnknownPolicyError
from tests.conftest import REPO_ROOT


@pytest.fixture
def ssm() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("ssm", region_name="us-east-1")
        for policy in load_policies([REPO_ROOT / "policies", REPO_ROOT / "policies" / "examples"]):
            client.put_parameter(
                Name=f"/osprey/policies/{policy.name}", Value=policy_parameter_value(policy), Type="String"
            )
        yield client


def test_deployed_policies_are_read_and_compiled(ssm: Any) -> None:
    source = PolicySource(client=ssm)
    shipped = sorted(
        policy.name for policy in load_policies([REPO_ROOT / "policies", REPO_ROOT / "policies" / "examples"])
    )
    assert {"aging-policy", "inference-policy", "spot-aware-policy", "training-policy"} <= set(shipped)
    assert source.names() == shipped
    compiled = source.get("training-policy")
    assert [rule.metric for rule in compiled.builtins] == [
        "gpu_utilization",
        "memory_bandwidth_utilization",
        "node_interconnect_latency",
    ]
    assert source.model("inference-policy").spec.deadband == 2


def test_unknown_policy_names_what_is_deployed(ssm: Any) -> None:
    with pytest.raises(UnknownPolicyError, match=r"'nope' is not deployed .*training-policy"):
        PolicySource(client=ssm).get("nope")


def test_a_broken_parameter_is_reported_and_skipped(ssm: Any) -> None:
    ssm.put_parameter(Name="/osprey/policies/hand-edited", Value="{not json", Type="String")
    ssm.put_parameter(
        Name="/osprey/policies/renamed",
        Value=policy_parameter_value(load_policies([REPO_ROOT / "policies/aging-policy.yaml"])[0]),
        Type="String",
    )
    document = json.loads(
        policy_parameter_value(load_policies([REPO_ROOT / "policies/training-policy.yaml"])[0])
    )
    document["metadata"]["name"] = "bad-weight"
    document["spec"]["derivationRules"][0]["weight"] = -1
    ssm.put_parameter(Name="/osprey/policies/bad-weight", Value=json.dumps(document), Type="String")
    source = PolicySource(client=ssm)
    assert "training-policy" in source.names()
    assert sorted(source.invalid) == ["bad-weight", "hand-edited", "renamed"]
    assert "spec.derivationRules[0].weight" in source.invalid["bad-weight"].error
    assert "does not match the parameter name" in source.invalid["renamed"].error


def test_parameters_are_cached_for_max_age(ssm: Any) -> None:
    source = PolicySource(client=ssm, max_age=300)
    assert "training-policy" in source.names()
    ssm.delete_parameter(Name="/osprey/policies/training-policy")
    assert "training-policy" in source.names()  # still cached
    assert "training-policy" not in PolicySource(client=ssm, max_age=0).names()


def _training(**changes: Any) -> str:
    """training-policy's stored value with ``changes`` applied to its spec."""
    document = json.loads(
        policy_parameter_value(load_policies([REPO_ROOT / "policies/training-policy.yaml"])[0])
    )
    document["spec"].update(changes)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[" * 4096, "nesting deeper than 32 levels"),
        ('{"a":' * 200 + "1" + "}" * 200, "nesting deeper than 32 levels"),
        ("[" * 8193, "8193 bytes; a stored policy is at most 8192"),
        ("{not json", "not JSON"),
        ('"just a string"', "a policy document must be a mapping"),
        (
            _training(maxPriorityChnage=5),
            "unknown field 'maxPriorityChnage'; did you mean 'maxPriorityChange'",
        ),
        (_training(deadband=-1), "spec.deadband"),
    ],
    ids=["recursive-4kb", "deep-objects", "oversize", "not-json", "not-a-mapping", "unknown-field", "schema"],
)
def test_any_malformed_value_is_isolated_to_its_own_policy(ssm: Any, value: str, expected: str) -> None:
    # Given training-policy's parameter overwritten by a value that is not a valid policy, with no good
    # version before it (history of one version: a parameter first written broken)
    ssm.delete_parameter(Name="/osprey/policies/training-policy")
    ssm.put_parameter(Name="/osprey/policies/training-policy", Value=value, Type="String", Tier="Advanced")
    source = PolicySource(client=ssm)
    # When the steps look policies up, then the others are usable and nothing raises but for this policy
    assert source.get("aging-policy").builtins
    assert "training-policy" not in source.names()
    invalid = source.invalid_policies()["training-policy"]
    assert expected in invalid.error
    assert invalid.error.startswith("ssm:/osprey/policies/training-policy: ")
    assert invalid.held
    assert invalid.state == "held"
    with pytest.raises(InvalidPolicyError, match=r"'training-policy' is invalid .*keep their last applied"):
        source.get("training-policy")
    with pytest.raises(LookupError):  # what gang start and the metric needs catch for an unusable policy
        source.model("training-policy")


def test_an_invalid_update_falls_back_to_the_last_good_version(ssm: Any) -> None:
    # Given training-policy at version 1 (good), version 2 (good, deadband 7), version 3 (4 KB of "[")
    ssm.put_parameter(
        Name="/osprey/policies/training-policy", Value=_training(deadband=7), Type="String", Overwrite=True
    )
    ssm.put_parameter(
        Name="/osprey/policies/training-policy", Value="[" * 4096, Type="String", Overwrite=True
    )
    source = PolicySource(client=ssm)
    # Then its jobs are derived under version 2, and the policy is reported invalid with that fallback
    assert source.model("training-policy").spec.deadband == 7
    assert source.get("training-policy").builtins
    assert "training-policy" in source.names()
    invalid = source.invalid_policies()["training-policy"]
    assert (invalid.fallback_version, invalid.state) == (2, "last-good")
    assert "last good version (2)" in str(invalid)
    # And once fixed, it is valid again and no longer reported
    ssm.put_parameter(
        Name="/osprey/policies/training-policy", Value=_training(deadband=3), Type="String", Overwrite=True
    )
    fixed = PolicySource(client=ssm)
    assert fixed.model("training-policy").spec.deadband == 3
    assert fixed.invalid_policies() == {}


def test_without_a_readable_history_the_version_last_read_stays_in_use(ssm: Any) -> None:
    # Given a source that has read training-policy as valid, and a role that may not read parameter history
    source = PolicySource(client=ssm, max_age=0)
    assert source.model("training-policy").spec.deadband == 3

    def deny(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetParameterHistory"
        )

    ssm.meta.events.register("before-call.ssm.GetParameterHistory", deny)
    # When the parameter is overwritten with a broken value
    ssm.put_parameter(Name="/osprey/policies/training-policy", Value="{", Type="String", Overwrite=True)
    # Then the version read before stays in use, and the policy is reported invalid
    assert source.model("training-policy").spec.deadband == 3
    assert source.invalid_policies()["training-policy"].state == "last-good"
    # And a new container, which never saw a good version, holds its jobs and says why
    cold = PolicySource(client=ssm)
    assert cold.invalid_policies()["training-policy"].held
    assert "history could not be read: ClientError" in cold.invalid_policies()["training-policy"].error


def test_an_unforeseen_exception_is_only_that_policys_problem(
    ssm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given compiling one policy raises something no one planned for
    def fragile(policy: Any) -> Any:
        if policy.name == "aging-policy":
            raise MemoryError("out of memory")
        return compile_policy(policy)

    monkeypatch.setattr("osprey_control.policy_store.compile_policy", fragile)
    source = PolicySource(client=ssm)
    # Then every other policy is usable and the broken one names the error
    assert source.get("training-policy").builtins
    assert source.invalid_policies()["aging-policy"].error == "MemoryError: out of memory"
