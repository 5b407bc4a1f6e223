"""``osprey.eks.annotate`` and ``osprey eks annotate``: golden files for Job, PyTorchJob and JobSet.

Regenerate the golden files with ``OSPREY_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from osprey.cli.eks import eks_app
from osprey.eks import annotate
from osprey_control.contract import OspreyBlockError, from_environment, from_kubernetes, parse_block

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("OSPREY_UPDATE_GOLDEN") == "1"

CASES = {
    "job": ["--co-schedule", "--gang-timeout", "120", "--min-workers", "75", "--queue", "user-queue"],
    "pytorchjob": ["--co-schedule", "--gang-timeout", "300", "--min-workers", "100", "--initial-priority", "60",
                   "--queue", "team-a", "--priority-class", "high"],
    "jobset": ["--no-co-schedule", "--min-workers", "50"],
}  # fmt: skip


def run(args: list[str], stdin: str | None = None) -> Any:
    return CliRunner().invoke(eks_app, ["annotate", *args], input=stdin)


@pytest.mark.parametrize("name", sorted(CASES))
def test_given_a_manifest_when_annotated_by_the_cli_then_the_output_matches_the_golden_file(
    name: str,
) -> None:
    # Given
    source = GOLDEN / f"{name}.input.yaml"
    golden = GOLDEN / f"{name}.golden.yaml"

    # When
    result = run([str(source), "--policy", "training-policy", *CASES[name]])

    # Then
    assert result.exit_code == 0, result.output
    if UPDATE:
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text()


def test_given_an_annotated_job_when_read_back_then_labels_and_pod_env_give_the_block() -> None:
    # Given
    manifest = yaml.safe_load((GOLDEN / "job.input.yaml").read_text())
    block: dict[str, Any] = {
        "co_schedule": True,
        "gang_timeout": 120,
        "priority_derivation_profile": "training-policy",
    }

    # When
    annotated = annotate(manifest, **block)

    # Then: the control plane's parser reads the same block from the object and from the pods
    metadata = annotated["metadata"]
    assert from_kubernetes(metadata["labels"], metadata["annotations"]) == parse_block(block)
    container = annotated["spec"]["template"]["spec"]["containers"][0]
    literal = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    assert from_environment(literal) == parse_block(block)
    assert "osprey.aws/enabled" not in manifest["metadata"]["labels"], "the input must not be modified"


def test_given_min_workers_when_annotating_a_job_then_kueue_min_parallelism_is_within_its_bounds() -> None:
    manifest = yaml.safe_load((GOLDEN / "job.input.yaml").read_text())
    annotations = annotate(manifest, priority_derivation_profile="p", required_min_workers=75)["metadata"][
        "annotations"
    ]
    assert annotations["kueue.x-k8s.io/job-min-parallelism"] == "6"
    # 100 % is all-or-nothing: Kueue rejects a minimum equal to parallelism, so nothing is written
    full = annotate(manifest, priority_derivation_profile="p", required_min_workers=100)["metadata"][
        "annotations"
    ]
    assert "kueue.x-k8s.io/job-min-parallelism" not in full


@pytest.mark.parametrize(
    ("change", "block", "expected"),
    [
        ({"kind": "Deployment", "apiVersion": "apps/v1"}, {}, "unsupported apps/v1 Deployment"),
        ({}, {"queue": "other-queue"}, "'user-queue' contradicts 'other-queue'"),
        ({}, {"share_identifier": "vision"}, "applies to AWS Batch only"),
        ({}, {"gang_timeout": -1}, "osprey.gang_timeout"),
        ({"metadata": {"labels": {"osprey.aws/policy": "other"}}}, {}, "'other' contradicts"),
    ],
)
def test_given_bad_input_when_annotating_then_the_error_names_the_problem(
    change: dict[str, Any], block: dict[str, Any], expected: str
) -> None:
    manifest: dict[str, Any] = {**yaml.safe_load((GOLDEN / "job.input.yaml").read_text()), **change}
    if "metadata" in change:
        manifest["metadata"]["name"] = "resnet"
    with pytest.raises(OspreyBlockError) as raised:
        annotate(manifest, priority_derivation_profile="training-policy", **block)
    assert expected in str(raised.value)


def test_given_stdin_when_annotating_then_it_is_read_like_a_file() -> None:
    source = (GOLDEN / "job.input.yaml").read_text()
    result = run(["-", "--policy", "training-policy"], stdin=source)
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["metadata"]["labels"]["osprey.aws/policy"] == "training-policy"


@pytest.mark.parametrize(
    ("stdin", "args", "expected"),
    [
        ("kind: [unclosed", [], "invalid YAML"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", [], "no supported job found"),
    ],
)
def test_given_bad_input_when_running_the_cli_then_a_clear_error_and_exit_1(
    stdin: str | None, args: list[str], expected: str
) -> None:
    source = stdin if stdin is not None else (GOLDEN / "job.input.yaml").read_text()
    result = run(["-", "--policy", "training-policy", *args], stdin=source)
    assert result.exit_code == 1
    assert expected in result.stderr
    assert result.stdout == ""


def test_given_a_missing_file_or_an_out_of_range_flag_when_running_the_cli_then_a_usage_error_exit_2() -> (
    None
):
    # (docs/cli.md, Exit codes: the command line is wrong)
    result = run(["/nonexistent/job.yaml", "--policy", "p"])
    assert result.exit_code == 2
    assert "cannot read" in result.stderr
    source = (GOLDEN / "job.input.yaml").read_text()
    result = run(["-", "--policy", "training-policy", "--gang-timeout", "0"], stdin=source)
    assert result.exit_code == 2
    assert "--gang-timeout" in result.stderr
    assert result.stdout == ""


def job_with_env(env: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((GOLDEN / "job.input.yaml").read_text())
    manifest["spec"]["template"]["spec"]["containers"][0]["env"] = env
    return manifest


ENV_PATH = "spec.template.spec.containers[0].env"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ([{"value": 3}], f"{ENV_PATH}[0].name: required"),
        ({"X": 1}, f"{ENV_PATH}: must be a list of {{'name', 'value'}} (got dict)"),
        (
            [{"name": "OSPREY_GANG_TIMEOUT", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
            f"{ENV_PATH}[0] OSPREY_GANG_TIMEOUT: set with valueFrom",
        ),
        ([{"name": "OSPREY_MIN_WORKERS", "value": 50}], "OSPREY_MIN_WORKERS: must be a string (got int 50)"),
    ],
)
def test_given_a_malformed_or_unverifiable_container_env_when_annotating_then_a_clear_error(
    env: Any, expected: str
) -> None:
    # Given
    manifest = job_with_env(env)

    # When
    with pytest.raises(OspreyBlockError) as raised:
        annotate(manifest, priority_derivation_profile="training-policy", gang_timeout=120)

    # Then
    assert expected in str(raised.value)


def test_given_a_runtime_variable_from_the_downward_api_when_annotating_then_it_is_kept() -> None:
    # Given: valueFrom is only refused for contract keys, not for the runtime's own variables
    pod_name = {"name": "OSPREY_K8S_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}

    # When
    result = annotate(job_with_env([pod_name]), priority_derivation_profile="training-policy")

    # Then
    env = result["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [item for item in env if item["name"] == "OSPREY_K8S_POD_NAME"] == [pod_name]


def test_given_a_key_as_label_and_annotation_with_different_values_when_annotating_then_an_error() -> None:
    # Given
    manifest: dict[str, Any] = yaml.safe_load((GOLDEN / "job.input.yaml").read_text())
    manifest["metadata"]["labels"] = {"osprey.aws/gang-timeout": "60"}
    manifest["metadata"]["annotations"] = {"osprey.aws/gang-timeout": "90"}

    # When
    with pytest.raises(OspreyBlockError) as raised:
        annotate(manifest, priority_derivation_profile="training-policy")

    # Then
    assert "metadata osprey.aws/gang-timeout: label '60' and annotation '90' disagree" in str(raised.value)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--queue", "User_Q"], "osprey.queue: invalid LocalQueue name 'User_Q'"),
        (
            ["--priority-class", "Not Valid!"],
            "priority_class: invalid WorkloadPriorityClass name 'Not Valid!'",
        ),
        (["--priority-class", "a" * 64], "at most 63 characters"),
        (
            ["--queue", "arn:aws:batch:us-east-1:123456789012:job-queue/q"],
            "is an AWS Batch job queue ARN, not a Kueue LocalQueue name",
        ),
    ],
)
def test_given_an_invalid_kueue_name_when_running_the_cli_then_error_on_stderr_and_exit_1(
    args: list[str], expected: str
) -> None:
    # Given
    source = (GOLDEN / "jobset.input.yaml").read_text()

    # When
    result = run(["-", "--policy", "training-policy", *args], stdin=source)

    # Then
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert expected in result.stderr
    assert result.stdout == ""


def test_given_a_dotted_kueue_queue_name_when_annotating_then_it_is_written() -> None:
    manifest = yaml.safe_load((GOLDEN / "job.input.yaml").read_text())
    result = annotate(manifest, priority_derivation_profile="p", priority_class="team.high")
    assert result["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "team.high"


def test_given_an_expected_runtime_when_annotating_by_the_cli_then_annotation_and_env_carry_it() -> None:
    # Given: a Job and the CLI's --expected-runtime
    source = (GOLDEN / "job.input.yaml").read_text()

    # When
    result = run(["-", "--policy", "training-policy", "--expected-runtime", "7200"], stdin=source)

    # Then: an annotation on the object, the variable in every container, and the block reads it back
    assert result.exit_code == 0, result.output
    annotated = yaml.safe_load(result.stdout)
    metadata = annotated["metadata"]
    assert metadata["annotations"]["osprey.aws/expected-runtime"] == "7200"
    container = annotated["spec"]["template"]["spec"]["containers"][0]
    literal = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    assert literal["OSPREY_EXPECTED_RUNTIME"] == "7200"
    block = from_kubernetes(metadata["labels"], metadata["annotations"])
    assert block is not None
    assert block.expected_runtime == 7200


def test_given_an_out_of_range_expected_runtime_when_running_the_cli_then_the_key_and_range_are_named() -> (
    None
):
    source = (GOLDEN / "job.input.yaml").read_text()
    result = run(["-", "--policy", "training-policy", "--expected-runtime", "0"], stdin=source)
    assert result.exit_code == 2
    assert "--expected-runtime" in result.stderr
