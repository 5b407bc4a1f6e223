"""Given policies stored in SSM by the CDK app, when the derive step reads them, then they are validated,
compiled, cached, and a broken parameter never hides the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.policy import load_policies
from osprey_control.policy.stored import policy_parameter_value
from osprey_control.policy_store import PolicySource, UnknownPolicyError
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
    assert "spec.derivationRules[0].weight" in source.invalid["bad-weight"]
    assert "does not match the parameter name" in source.invalid["renamed"]


def test_parameters_are_cached_for_max_age(ssm: Any) -> None:
    source = PolicySource(client=ssm, max_age=300)
    assert "training-policy" in source.names()
    ssm.delete_parameter(Name="/osprey/policies/training-policy")
    assert "training-policy" in source.names()  # still cached
    assert "training-policy" not in PolicySource(client=ssm, max_age=0).names()
