"""``osprey.batch.submit_job``: requests validated by botocore's Stubber against the real Batch model."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from osprey.batch import submit_job
from osprey_control.contract import OspreyBlockError

BLOCK = {
    "co_schedule": True,
    "gang_timeout": 120,
    "priority_derivation_profile": "training-policy",
    "initial_priority": 50,
    "share_identifier": "vision",
}
OSPREY_ENV = [
    {"name": "OSPREY_ENABLED", "value": "1"},
    {"name": "OSPREY_PRIORITY_POLICY", "value": "training-policy"},
    {"name": "OSPREY_CO_SCHEDULE", "value": "true"},
    {"name": "OSPREY_GANG_TIMEOUT", "value": "120"},
    {"name": "OSPREY_INITIAL_PRIORITY", "value": "50"},
]
OSPREY_TAGS = {
    "osprey:enabled": "true",
    "osprey:policy": "training-policy",
    "osprey:co-schedule": "true",
    "osprey:gang-timeout": "120",
    "osprey:initial-priority": "50",
}
EKS_ANNOTATIONS = {
    "osprey.aws/co-schedule": "true",
    "osprey.aws/gang-timeout": "120",
    "osprey.aws/initial-priority": "50",
}
RESPONSE = {"jobArn": "arn:aws:batch:us-east-1:123456789012:job/abc", "jobName": "train", "jobId": "abc"}
BASE: dict[str, Any] = {"jobName": "train", "jobQueue": "gpu-fair-share", "jobDefinition": "trainer:3"}


@pytest.fixture
def batch() -> Any:
    return boto3.client("batch", region_name="us-east-1")


def test_given_a_container_job_when_submitted_then_env_tags_share_and_priority_are_added(batch: Any) -> None:
    expected = {
        **BASE,
        "containerOverrides": {"environment": [{"name": "NCCL_DEBUG", "value": "INFO"}, *OSPREY_ENV]},
        "tags": {"team": "vision", **OSPREY_TAGS},
        "shareIdentifier": "vision",
        "schedulingPriorityOverride": 5000,
    }
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        response = submit_job(
            batch,
            osprey=BLOCK,
            containerOverrides={"environment": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
            tags={"team": "vision"},
            **BASE,
        )
        stubber.assert_no_pending_responses()
    assert response["jobId"] == "abc"


def test_given_a_multinode_job_when_submitted_then_every_node_range_gets_the_environment(batch: Any) -> None:
    node_overrides = {
        "numNodes": 4,
        "nodePropertyOverrides": [
            {"targetNodes": "0", "containerOverrides": {"command": ["main"]}},
            {"targetNodes": "1:"},
        ],
    }
    expected = {
        **BASE,
        "nodeOverrides": {
            "numNodes": 4,
            "nodePropertyOverrides": [
                {"targetNodes": "0", "containerOverrides": {"command": ["main"], "environment": OSPREY_ENV}},
                {"targetNodes": "1:", "containerOverrides": {"environment": OSPREY_ENV}},
            ],
        },
        "tags": OSPREY_TAGS,
        "shareIdentifier": "vision",
        "schedulingPriorityOverride": 5000,
    }
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(batch, osprey=BLOCK, nodeOverrides=node_overrides, **BASE)
        stubber.assert_no_pending_responses()


def test_given_multinode_form_without_overrides_when_submitted_then_all_nodes_are_targeted(
    batch: Any,
) -> None:
    expected = {
        **BASE,
        "nodeOverrides": {
            "nodePropertyOverrides": [
                {"targetNodes": "0:", "containerOverrides": {"environment": OSPREY_ENV}}
            ]
        },
        "tags": OSPREY_TAGS,
        "shareIdentifier": "vision",
        "schedulingPriorityOverride": 5000,
    }
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(batch, osprey=BLOCK, form="multinode", **BASE)
        stubber.assert_no_pending_responses()


def test_given_an_eks_job_when_submitted_then_containers_get_env_and_the_pod_osprey_labels(
    batch: Any,
) -> None:
    eks_env = [{"name": item["name"], "value": item["value"]} for item in OSPREY_ENV]
    expected = {
        **BASE,
        "eksPropertiesOverride": {
            "podProperties": {
                "containers": [{"name": "trainer", "env": eks_env}],
                "metadata": {
                    "labels": {
                        "app": "train",
                        "osprey.aws/enabled": "true",
                        "osprey.aws/policy": "training-policy",
                    },
                    "annotations": EKS_ANNOTATIONS,
                },
            }
        },
        "tags": OSPREY_TAGS,
        "shareIdentifier": "vision",
        "schedulingPriorityOverride": 5000,
    }
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(
            batch,
            osprey=BLOCK,
            eksPropertiesOverride={
                "podProperties": {
                    "containers": [{"name": "trainer"}],
                    "metadata": {"labels": {"app": "train"}},
                }
            },
            **BASE,
        )
        stubber.assert_no_pending_responses()


def test_given_the_queue_in_the_block_when_no_job_queue_passed_then_it_is_used(batch: Any) -> None:
    block = {"priority_derivation_profile": "training-policy", "queue": "gpu-fair-share"}
    expected = {
        "jobName": "train",
        "jobQueue": "gpu-fair-share",
        "jobDefinition": "trainer:3",
        "containerOverrides": {"environment": OSPREY_ENV[:2]},
        "tags": {"osprey:enabled": "true", "osprey:policy": "training-policy"},
    }
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(batch, osprey=block, jobName="train", jobDefinition="trainer:3")
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("osprey", "kwargs", "expected"),
    [
        ({**BLOCK, "initial_priority": 200}, {}, "osprey.initial_priority"),
        ({**BLOCK, "gang_timout": 1}, {}, "did you mean 'gang_timeout'"),
        (BLOCK, {"shareIdentifier": "other"}, "shareIdentifier: 'other' contradicts osprey.share_identifier"),
        (BLOCK, {"schedulingPriorityOverride": 1}, "contradicts osprey.initial_priority (maps to 5000)"),
        (
            BLOCK,
            {"containerOverrides": {"environment": [{"name": "OSPREY_GANG_TIMEOUT", "value": "60"}]}},
            "containerOverrides.environment OSPREY_GANG_TIMEOUT: 60 contradicts osprey.gang_timeout=120",
        ),
        (BLOCK, {"tags": {"osprey:enabled": "false"}}, "tags osprey:enabled: 'false' contradicts"),
        (BLOCK, {"ecsPropertiesOverride": {}}, "ecsPropertiesOverride: not supported"),
    ],
)
def test_given_a_bad_block_or_contradiction_when_submitting_then_no_aws_call_is_made(
    osprey: dict[str, Any], kwargs: dict[str, Any], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: creating a client would fail the test, so validation must come first
    monkeypatch.setattr(boto3, "client", lambda *a, **k: pytest.fail("a client was created"))
    with pytest.raises(OspreyBlockError) as raised:
        submit_job(osprey=osprey, **{**BASE, **kwargs})
    assert expected in str(raised.value)


def test_given_no_client_when_submitting_then_one_is_created_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = boto3.client("batch", region_name="us-east-1")
    created: list[str] = []

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        created.append(service)
        return batch

    monkeypatch.setattr(boto3, "client", client)
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE)
        submit_job(osprey=BLOCK, **BASE)
    assert created == ["batch"]


def test_given_a_multinode_eks_job_when_submitted_then_each_node_pod_gets_env_labels_and_annotations(
    batch: Any,
) -> None:
    # Given: node ranges written in the EKS form
    node_overrides = {
        "numNodes": 2,
        "nodePropertyOverrides": [
            {"targetNodes": "0", "eksPropertiesOverride": {"podProperties": {"containers": [{"name": "m"}]}}},
            {"targetNodes": "1:"},
        ],
    }
    labels = {"osprey.aws/enabled": "true", "osprey.aws/policy": "training-policy"}

    def pod(containers: list[dict[str, Any]]) -> dict[str, Any]:
        metadata = {"labels": labels, "annotations": EKS_ANNOTATIONS}
        return {"eksPropertiesOverride": {"podProperties": {"containers": containers, "metadata": metadata}}}

    expected = {
        **BASE,
        "nodeOverrides": {
            "numNodes": 2,
            "nodePropertyOverrides": [
                {"targetNodes": "0", **pod([{"name": "m", "env": OSPREY_ENV}])},
                {"targetNodes": "1:", **pod([{"env": OSPREY_ENV}])},
            ],
        },
        "tags": OSPREY_TAGS,
        "shareIdentifier": "vision",
        "schedulingPriorityOverride": 5000,
    }
    # When / Then: the request matches, and the Stubber validates it against the real Batch model
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(batch, osprey=BLOCK, nodeOverrides=node_overrides, **BASE)
        stubber.assert_no_pending_responses()


def test_given_tags_as_a_key_value_list_when_submitted_then_batch_gets_a_mapping(batch: Any) -> None:
    expected = {
        **BASE,
        "containerOverrides": {"environment": OSPREY_ENV},
        "tags": {"team": "vision", **OSPREY_TAGS},
        "shareIdentifier": "vision",
        "schedulingPriorityOverride": 5000,
    }
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(batch, osprey=BLOCK, tags=[{"Key": "team", "Value": "vision"}], **BASE)
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"containerOverrides": None}, "containerOverrides: must be a mapping (got NoneType)"),
        ({"nodeOverrides": None}, "nodeOverrides: must be a mapping (got NoneType)"),
        (
            {"eksPropertiesOverride": {"podProperties": None}},
            "eksPropertiesOverride.podProperties: must be a mapping (got NoneType)",
        ),
        ({"tags": ["a"]}, "tags: must be a mapping of tag values (got list)"),
        ({"tags": [{"Key": "a"}]}, "tags[0]: each tag needs a 'Key' and a 'Value'"),
        (
            {"containerOverrides": {"environment": [{"value": "61"}]}},
            "containerOverrides.environment[0].name: required",
        ),
        (
            {"containerOverrides": {"environment": [{"name": "OSPREY_MIN_WORKERS", "value": 50}]}},
            "OSPREY_MIN_WORKERS: must be a string (got int 50)",
        ),
        ({"form": "bogus"}, "form: invalid value 'bogus'; allowed: container, multinode, eks"),
        (
            {
                "eksPropertiesOverride": {
                    "podProperties": {
                        "metadata": {
                            "labels": {"osprey.aws/policy": "training-policy"},
                            "annotations": {"osprey.aws/policy": "other"},
                        }
                    }
                }
            },
            "label 'training-policy' and annotation 'other' disagree",
        ),
        (
            {
                "nodeOverrides": {
                    "nodePropertyOverrides": [
                        {"targetNodes": "0", "eksPropertiesOverride": {}},
                        {"targetNodes": "1:", "containerOverrides": {}},
                    ]
                }
            },
            "nodePropertyOverrides[1].containerOverrides: cannot be mixed with eksPropertiesOverride",
        ),
    ],
)
def test_given_a_malformed_request_when_submitting_then_a_clear_error_names_the_path(
    kwargs: dict[str, Any], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: creating a client would fail the test, so validation must come first
    monkeypatch.setattr(boto3, "client", lambda *a, **k: pytest.fail("a client was created"))

    # When
    with pytest.raises(OspreyBlockError) as raised:
        submit_job(osprey=BLOCK, **{**BASE, **kwargs})

    # Then
    assert expected in str(raised.value)


def test_given_an_expected_runtime_when_submitted_then_env_and_tags_carry_it(batch: Any) -> None:
    # Given: a block with the user's runtime estimate
    expected = {
        **BASE,
        "containerOverrides": {
            "environment": [*OSPREY_ENV[:2], {"name": "OSPREY_EXPECTED_RUNTIME", "value": "5400"}]
        },
        "tags": {
            "osprey:enabled": "true",
            "osprey:policy": "training-policy",
            "osprey:expected-runtime": "5400",
        },
    }

    # When / Then: the request the real Batch model accepts carries both forms
    with Stubber(batch) as stubber:
        stubber.add_response("submit_job", RESPONSE, expected)
        submit_job(
            batch, osprey={"priority_derivation_profile": "training-policy", "expected_runtime": 5400}, **BASE
        )
        stubber.assert_no_pending_responses()


def test_given_an_expected_runtime_contradicting_the_environment_when_submitting_then_error_before_aws() -> (
    None
):
    with pytest.raises(OspreyBlockError, match="OSPREY_EXPECTED_RUNTIME"):
        submit_job(
            object(),
            osprey={"priority_derivation_profile": "training-policy", "expected_runtime": 5400},
            containerOverrides={"environment": [{"name": "OSPREY_EXPECTED_RUNTIME", "value": "60"}]},
            **BASE,
        )
