"""Given the context osprey:eksNamespaces, when the app is synthesized, then the EKS discovery function lists only
those namespaces (docs/eks.md, Access: bind osprey-discovery there only), and a bad name is refused naming it."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from osprey_infra.config import ConfigError, ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT


def _discovery_variables(context: dict[str, object]) -> dict[str, str]:
    stack = OspreyStack(
        cdk.App(), "Test", policy_paths=[REPO_ROOT / "policies"], config=ControlPlaneConfig.build(context)
    )
    functions = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    [variables] = [
        f["Properties"]["Environment"]["Variables"]
        for f in functions.values()
        if "OSPREY_EKS_CLUSTERS" in f["Properties"]["Environment"]["Variables"]
    ]
    return dict(variables)


def test_discovery_lists_only_the_configured_namespaces() -> None:
    scoped = _discovery_variables({"eks_clusters": ["gpu-a"], "eks_namespaces": ["team-a", "team-b"]})
    assert scoped["OSPREY_EKS_NAMESPACES"] == "team-a,team-b"
    assert "OSPREY_EKS_NAMESPACES" not in _discovery_variables({"eks_clusters": ["gpu-a"]})


def test_the_context_is_read_comma_separated_and_a_bad_namespace_is_refused_naming_it() -> None:
    context = {"osprey:eksClusters": "gpu-a", "osprey:eksNamespaces": "team-a, team-b"}
    assert ControlPlaneConfig.from_context(context.get).eks_namespaces == ("team-a", "team-b")
    with pytest.raises(ConfigError, match="Team_A"):
        ControlPlaneConfig.build({"eks_clusters": ["gpu-a"], "eks_namespaces": ["Team_A"]})
