"""The admission policy Osprey ships (``osprey eks admission``, docs/eks.md) does what docs/eks.md says
(issue 28, item 10): Osprey's apply identity may change only a Workload's ``spec.priority`` (or, without
Kueue, the derived-priority annotation on a job), never ``spec.active`` or anything else; the gang watch only
``spec.active`` / ``suspend``; nothing on an object that was not opted in; other users are never evaluated.

Evaluated with the CEL subset of ``cel_subset`` (the real API server arrives with issue 29), following the
ValidatingAdmissionPolicy algorithm: resource rules, then ``matchConditions``, then every validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends.eks import admission_policy
from tests.control.backends.eks.cel_subset import CelError, evaluate

POLICY, BINDING = yaml.safe_load_all(admission_policy())
APPLY, GANG, KUEUE = ["osprey-apply"], ["osprey-gang-watch"], ["system:serviceaccounts:kueue-system"]
WORKLOADS = ("kueue.x-k8s.io", "workloads")
JOBS, PYTORCHJOBS = ("batch", "jobs"), ("kubeflow.org", "pytorchjobs")
ENABLED = {"osprey.aws/enabled": "true"}


def _review(
    groups: list[str], resource: tuple[str, str], old: dict[str, Any], new: dict[str, Any]
) -> list[str]:
    """What the API server answers an UPDATE: [] when admitted, else the failed validations' messages; None
    when the policy does not apply to the request (not matched)."""
    spec = POLICY["spec"]
    group, plural = resource
    matched = any(
        group in rule["apiGroups"] and plural in rule["resources"] and "UPDATE" in rule["operations"]
        for rule in spec["matchConstraints"]["resourceRules"]
    )
    request = {"userInfo": {"groups": groups}, "resource": {"group": group, "resource": plural}}
    env: dict[str, Any] = {"object": new, "oldObject": old, "request": request}
    if not matched or not all(evaluate(c["expression"], env) for c in spec["matchConditions"]):
        return ["not matched"]
    variables: dict[str, Any] = {}
    for variable in spec["variables"]:
        variables[variable["name"]] = evaluate(variable["expression"], {**env, "variables": dict(variables)})
    env["variables"] = variables
    failed = []
    for validation in spec["validations"]:
        try:
            admitted = evaluate(validation["expression"], env)
        except CelError as error:  # an evaluation error denies under failurePolicy: Fail
            admitted, error_text = False, str(error)
            failed.append(f"error: {error_text}")
            continue
        if not admitted:
            message = validation.get("message") or evaluate(validation["messageExpression"], env)
            failed.append(message)
    return failed


def _workload(**spec: Any) -> dict[str, Any]:
    base = {"queueName": "team-a", "podSets": [{"name": "main", "count": 2}], "priority": 100, "active": True}
    return {"metadata": {"name": "job-train-1a2b3", "labels": dict(ENABLED)}, "spec": {**base, **spec}}


def _changed(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    *parents, last = path.split(".")
    target = new
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value
    return new


def test_the_shipped_manifest_is_a_deny_policy_for_osprey_writes_on_the_four_kinds() -> None:
    assert (POLICY["kind"], BINDING["kind"]) == (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    assert BINDING["spec"] == {"policyName": POLICY["metadata"]["name"], "validationActions": ["Deny"]}
    assert POLICY["spec"]["failurePolicy"] == "Fail"
    rules = POLICY["spec"]["matchConstraints"]["resourceRules"]
    assert sorted((r["apiGroups"][0], r["resources"][0]) for r in rules) == sorted(
        [WORKLOADS, JOBS, PYTORCHJOBS, ("jobset.x-k8s.io", "jobsets")]
    )
    # And `osprey eks admission` prints exactly this manifest
    result = CliRunner().invoke(app, ["eks", "admission"])
    assert result.exit_code == 0
    assert result.stdout == admission_policy()


def test_osprey_apply_may_change_a_workloads_priority_and_nothing_else() -> None:
    old = _workload()
    assert _review(APPLY, WORKLOADS, old, _changed(old, "spec.priority", 730)) == []
    assert _review(APPLY, WORKLOADS, old, _changed(old, "spec.active", False)) == [
        "Osprey may change only spec.priority here"
    ]
    assert _review(APPLY, WORKLOADS, old, _changed(old, "spec.queueName", "team-b")) == [
        "Osprey may change only spec.priority here"
    ]
    removed = copy.deepcopy(old)
    del removed["spec"]["active"]
    assert _review(APPLY, WORKLOADS, old, removed) == ["Osprey may change only spec.priority here"]
    relabelled = _changed(_changed(old, "spec.priority", 730), "metadata.labels", {**ENABLED, "team": "b"})
    assert _review(APPLY, WORKLOADS, old, relabelled) == ["Osprey may not change labels"]


def test_nothing_may_be_changed_on_an_object_that_was_not_opted_in_before_the_request() -> None:
    old = _workload()
    old["metadata"]["labels"] = {}
    opting_in = _changed(_changed(old, "spec.priority", 730), "metadata.labels", dict(ENABLED))
    assert "Osprey may change only objects labelled osprey.aws/enabled=true" in _review(
        APPLY, WORKLOADS, old, opting_in
    )
    unlabelled = {"metadata": {"name": "w"}, "spec": {"priority": 1}}
    assert _review(APPLY, WORKLOADS, unlabelled, _changed(unlabelled, "spec.priority", 2))[0] == (
        "Osprey may change only objects labelled osprey.aws/enabled=true"
    )


def test_osprey_apply_may_set_only_the_derived_priority_annotation_on_a_job() -> None:
    job = {"metadata": {"name": "train", "labels": dict(ENABLED), "annotations": {"team": "a"}},
           "spec": {"suspend": False, "parallelism": 2}}  # fmt: skip
    annotated = _changed(job, "metadata.annotations", {"team": "a", "osprey.aws/derived-priority": "73"})
    assert _review(APPLY, JOBS, job, annotated) == []
    other = _changed(job, "metadata.annotations", {"team": "b"})
    assert _review(APPLY, JOBS, job, other) == [
        "Osprey may change no annotation but osprey.aws/derived-priority (osprey-apply, on a job object)"
    ]
    assert _review(APPLY, JOBS, job, _changed(job, "spec.suspend", True)) == [
        "osprey-apply may not change the spec of a job object (its priority goes on the Workload)"
    ]


def test_the_gang_watch_may_change_only_active_and_suspend() -> None:
    workload = _workload()
    assert _review(GANG, WORKLOADS, workload, _changed(workload, "spec.active", False)) == []
    assert _review(GANG, WORKLOADS, workload, _changed(workload, "spec.priority", 1)) == [
        "Osprey may change only spec.active here"
    ]
    job = {
        "metadata": {"name": "train", "labels": dict(ENABLED)},
        "spec": {"suspend": False, "parallelism": 2},
    }
    assert _review(GANG, JOBS, job, _changed(job, "spec.suspend", True)) == []
    assert _review(GANG, JOBS, job, _changed(job, "spec.parallelism", 8)) == [
        "Osprey may change only spec.suspend here"
    ]
    annotated = _changed(job, "metadata.annotations", {"osprey.aws/derived-priority": "1"})
    assert _review(GANG, JOBS, job, annotated) == [
        "Osprey may change no annotation but osprey.aws/derived-priority (osprey-apply, on a job object)"
    ]
    pytorch = {"metadata": {"name": "ddp", "labels": dict(ENABLED)},
               "spec": {"runPolicy": {"suspend": False, "ttlSecondsAfterFinished": 60}, "pytorchReplicaSpecs": {}}}  # fmt: skip
    assert _review(GANG, PYTORCHJOBS, pytorch, _changed(pytorch, "spec.runPolicy.suspend", True)) == []
    assert _review(
        GANG, PYTORCHJOBS, pytorch, _changed(pytorch, "spec.runPolicy.ttlSecondsAfterFinished", 1)
    ) == ["osprey-gang-watch may change only spec.runPolicy.suspend of a PyTorchJob"]


@pytest.mark.parametrize("resource", [WORKLOADS, JOBS])
def test_other_users_are_never_evaluated(resource: tuple[str, str]) -> None:
    workload = _workload()
    assert _review(KUEUE, resource, workload, _changed(workload, "spec.active", False)) == ["not matched"]
