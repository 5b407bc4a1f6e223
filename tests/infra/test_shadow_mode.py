"""Shadow mode in the template: the context keys validated at synth, the mode published in ``/osprey/config``
with the reads of it, and a backend pinned to shadow deployed without any write permission."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import pytest

from app import build_app
from osprey_infra.config import ConfigError, ControlPlaneConfig
from tests.infra.iam import actions, function_statements, resources
from tests.infra.test_slurm_bridge import SLURM

# Every backend write the control plane's roles may hold, by backend.
WRITES = {
    "sagemaker": {
        "sagemaker:AddTags",
        "sagemaker:StopTrainingJob",
        "batch:UpdateServiceJob",
        "batch:TerminateServiceJob",
    },
    "batch": {"batch:UpdateSchedulingPolicy", "batch:TerminateJob"},
}
ALL_BACKENDS = {
    "osprey:eksClusters": "gpu-a",
    "osprey:slurm": json.dumps(SLURM),
    "osprey:sagemakerQueue": "true",
}


def _template(context: Mapping[str, str]) -> dict[str, Any]:
    app = build_app(cdk.App(context={**ALL_BACKENDS, **context}), nag=False)
    stack = app.node.find_child("Osprey")
    assert isinstance(stack, cdk.Stack)
    return dict(app.synth().get_stack_by_name(stack.stack_name).template)


def _granted(statements: dict[str, list[dict[str, Any]]], module: str) -> set[str]:
    return {action for statement in statements[module] for action in actions(statement)}


def _published(template: dict[str, Any]) -> dict[str, Any]:
    (parameter,) = [
        resource["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::SSM::Parameter" and resource["Properties"]["Name"] == "/osprey/config"
    ]
    value = parameter["Value"]
    # to_json_string of a dict with tokens synthesizes to Fn::Join; the mode part is plain text inside it.
    text = value if isinstance(value, str) else "".join(p for p in value["Fn::Join"][1] if isinstance(p, str))
    start = text.index('"mode":')
    depth, end = 0, start + len('"mode":')
    for end in range(start + len('"mode":'), len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    return dict(json.loads(text[start + len('"mode":') : end + 1]))


@pytest.fixture(scope="module")
def shadow_template() -> dict[str, Any]:
    return _template(
        {
            "osprey:mode": "shadow",
            "osprey:backendModes": "eks=enforce",
            "osprey:policyModes": "training-policy=shadow",
            "osprey:shadowOnlyBackends": "batch,sagemaker,slurm",
        }
    )


def test_an_existing_deployment_enforces_and_says_so_in_its_config() -> None:
    # Given no mode context at all (a deployment made before shadow mode)
    published = _published(_template({}))
    # Then every job is enforced, as before
    assert published == {"default": "enforce", "backends": {}, "policies": {}, "shadowOnly": []}


def test_the_mode_settings_are_published_for_the_steps_to_read(shadow_template: dict[str, Any]) -> None:
    assert _published(shadow_template) == {
        "default": "shadow",
        "backends": {"eks": "enforce"},
        "policies": {"training-policy": "shadow"},
        "shadowOnly": ["batch", "sagemaker", "slurm"],
    }


def test_apply_and_the_gang_watch_read_the_config_parameter_and_nothing_else_new(
    shadow_template: dict[str, Any],
) -> None:
    statements = function_statements(shadow_template)
    functions = {
        resource["Properties"]["Handler"].split(".")[1]: resource["Properties"]
        for resource in shadow_template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and str(resource["Properties"].get("Handler", "")).startswith("osprey_handlers.")
    }
    for module in ("apply", "gang_watch"):
        assert functions[module]["Environment"]["Variables"]["OSPREY_CONFIG_PARAMETER"] == "/osprey/config"
        (read,) = [s for s in statements[module] if actions(s) == {"ssm:GetParameter"}]
        assert json.dumps(resources(read)).endswith(':parameter/osprey/config"]]}]')
    # The other steps never decide a write, so they do not read the mode
    assert "OSPREY_CONFIG_PARAMETER" not in functions["derive"]["Environment"]["Variables"]


def test_a_shadow_only_backend_has_no_write_permission_anywhere(shadow_template: dict[str, Any]) -> None:
    statements = function_statements(shadow_template)
    granted = set().union(*(_granted(statements, module) for module in statements))
    # Then no role may write to SageMaker, its training queue or Batch ...
    assert not granted & (WRITES["sagemaker"] | WRITES["batch"])
    # ... apply may neither reach the Slurm bridge (its priority writes) nor the EKS clusters ...
    apply = _granted(statements, "apply")
    assert "lambda:InvokeFunction" not in apply
    # ... while EKS, set to enforce, keeps the apply role's cluster access, and the gang watch still reads
    assert "eks:DescribeCluster" in apply
    assert {"lambda:InvokeFunction", "eks:DescribeCluster"} <= _granted(statements, "gang_watch")
    # and the reads the shadow cycle needs stay
    assert {"batch:DescribeSchedulingPolicies", "sagemaker:DescribeTrainingJob"} <= apply


def test_an_enforcing_deployment_keeps_every_write() -> None:
    statements = function_statements(_template({"osprey:mode": "shadow"}))
    granted = set().union(*(_granted(statements, module) for module in statements))
    # Shadow by default but switchable per backend with no redeploy: the writes must be there already
    assert WRITES["sagemaker"] | WRITES["batch"] <= granted
    assert {"lambda:InvokeFunction", "eks:DescribeCluster"} <= _granted(statements, "apply")


def test_eks_pinned_to_shadow_takes_the_clusters_from_apply_only() -> None:
    statements = function_statements(_template({"osprey:shadowOnlyBackends": "eks"}))
    assert "eks:DescribeCluster" not in _granted(statements, "apply")
    assert "eks:DescribeCluster" in _granted(statements, "gang_watch")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"osprey:mode": "watch"}, "mode (context osprey:mode): Input should be 'shadow' or 'enforce'"),
        (
            {"osprey:backendModes": "kueue=shadow"},
            "unknown backend 'kueue': one of sagemaker, batch, eks, slurm",
        ),
        ({"osprey:backendModes": "batch=on"}, "backend_modes.batch (context osprey:backendModes)"),
        ({"osprey:policyModes": "Team_A=shadow"}, "'Team_A' is not a policy name"),
        ({"osprey:shadowOnlyBackends": "kueue"}, "shadow_only_backends (context osprey:shadowOnlyBackends)"),
        (
            {"osprey:shadowOnlyBackends": "batch", "osprey:backendModes": '{"batch": "enforce"}'},
            "backend_modes sets batch to enforce, but shadow_only_backends",
        ),
    ],
)
def test_a_bad_mode_setting_fails_the_synth_naming_the_key(context: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ControlPlaneConfig.from_context(context.get)
    assert message in str(raised.value)
