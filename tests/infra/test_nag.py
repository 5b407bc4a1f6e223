"""Given the Osprey CDK app with cdk-nag's AwsSolutions checks (``build_app()``), when it is synthesized with
``app.synth()``, then no finding of any severity is left unacknowledged and CDK itself annotates nothing; and
when a non-compliant resource is added to the control plane, then the same check reports it (so it can fail).

cdk-nag 3 is a CDK policy-validation plugin: it runs during ``app.synth()``, writes every finding (violations
and acknowledged ones) to ``validation-report.json`` in the assembly directory, and raises when an error is
unacknowledged. Warnings do not raise, so the report is read rather than relying on the exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs

from app import build_app
from osprey_infra.stack import OspreyStack

_REPORT = "validation-report.json"


@dataclass(frozen=True)
class Synthesized:
    violations: list[dict[str, Any]]
    acknowledged: list[dict[str, Any]]
    annotations: list[str]  # CDK warnings/errors attached to constructs (stack artifact messages)
    failed: str | None  # the synth exception's message, when validation failed


def _synth(app: cdk.App, outdir: Path) -> Synthesized:
    failed: str | None = None
    annotations: list[str] = []
    try:
        assembly = app.synth()
    except RuntimeError as error:  # jsii surfaces ValidationFailed as RuntimeError
        failed = str(error)
    else:
        for stack in assembly.stacks:
            annotations += [
                f"{message.level} {message.id}: {message.entry.data}"
                for message in stack.messages
                if str(message.level) != "info"
            ]
    report = json.loads((outdir / _REPORT).read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    return Synthesized(nag["violations"], nag.get("suppressedViolations", []), annotations, failed)


def _where(violations: list[dict[str, Any]]) -> list[str]:
    return [
        f"{v['severity']} {v['ruleName']} at {c['constructPath']}"
        for v in violations
        for c in v["violatingConstructs"]
    ]


# Every optional feature on, so the resources only they create are checked too.
FULL_CONTEXT = {
    "osprey:cycleIntervalSeconds": "20",
    "osprey:eksClusters": "gpu-a",
    "osprey:perJobMetrics": "true",
    "osprey:alarmEmail": "oncall@example.com",
    "osprey:sagemakerQueue": "true",
}


@pytest.fixture(scope="module", params=["shipped", "full"])
def shipped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    outdir = tmp_path_factory.mktemp(f"nag-{request.param}")
    context = FULL_CONTEXT if request.param == "full" else {}
    return _synth(build_app(cdk.App(outdir=str(outdir), context=context)), outdir)


def test_shipped_app_has_no_unacknowledged_nag_finding_or_cdk_annotation(shipped: Synthesized) -> None:
    assert shipped.failed is None, shipped.failed
    assert _where(shipped.violations) == []
    assert shipped.annotations == []


def test_every_acknowledgement_gives_a_reason(shipped: Synthesized) -> None:
    # The checks did run (IAM5 wildcards exist and are acknowledged) and each says why it does not apply.
    assert shipped.acknowledged
    for finding in shipped.acknowledged:
        assert len(finding.get("reason", "").strip()) >= 20, finding["ruleName"]


def test_unacknowledged_finding_is_reported_and_fails_synth(tmp_path: Path) -> None:
    # Given the shipped app plus a queue without a DLQ and without enforced TLS inside the control plane
    app = build_app(cdk.App(outdir=str(tmp_path)))
    stack = app.node.find_child("Osprey")
    assert isinstance(stack, OspreyStack)
    sqs.Queue(stack.control_plane, "NonCompliant")
    # When it is synthesized
    result = _synth(app, tmp_path)
    # Then synth fails, naming the rules and the construct: the control plane's acknowledgements are targeted
    assert result.failed is not None
    assert "ValidationFailed" in result.failed
    assert set(_where(result.violations)) == {
        "error AwsSolutions-SQS3 at Osprey/ControlPlane/NonCompliant/Resource",
        "error AwsSolutions-SQS4 at Osprey/ControlPlane/NonCompliant/Resource",
    }
