"""Custom rules end to end: a user's Lambda function, deployed from its source, invoked by the deployed cycle.

The synthesized app's resources are created in moto (``tests/infra/e2e/harness.py``); each rule is a deployment
package of one Python file, created as a Lambda function named with the deployment's allowed prefix
(:func:`osprey.local.rules.deploy_rule`, what ``osprey local up`` does with ``examples/rules/spot_risk.py``),
and named by ARN in a policy stored as the derive step reads it. The cycle state machine runs; the derive handler
invokes the function through Lambda ``Invoke`` and the package's own handler answers. What a user checks is the
registry's decision: the rule's outcome and value, the priority, the reason.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from osprey.local.rules import RuleDeployError, apply_policy, deploy_rule, handler_from_zip, rule_zip
from osprey_control.policy import RuleAllowList
from osprey_control.registry.dynamodb import JobRegistry
from tests.infra.e2e.fleet import Fleet
from tests.infra.e2e.harness import CycleHarness, deployed

ACCOUNT, REGION = "123456789012", "us-east-1"
ROOT = Path(__file__).resolve().parents[2]

PLAIN = """
def handler(event, context):
    return {"derived_priority": 60}
"""
API_GATEWAY = """
import json

def handler(event, context):
    # A function also served through API Gateway answers in its proxy form.
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"derived_priority": 70})}
"""
SLOW = """
import time

def handler(event, context):
    time.sleep(3)  # far beyond the rule's timeoutMs
    return {"derived_priority": 10}
"""
CRASH = """
def handler(event, context):
    raise KeyError("checkpoint_age")  # a bug in the rule
"""


def policy_text(name: str, function: str, timeout_ms: int) -> str:
    """GPU utilisation (linear 0..100) and the custom rule weighted equally; one cycle reaches the target."""
    return textwrap.dedent(f"""
        apiVersion: osprey.aws/v1
        kind: PriorityDerivationPolicy
        metadata: {{name: {name}}}
        spec:
          maxPriorityChange: 100
          derivationRules:
          - {{metric: gpu_utilization, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100}}
          - custom:
              arn: arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}
              weight: 1
              fallbackPriority: 90
              timeoutMs: {timeout_ms}
    """)


@pytest.fixture
def cycle(template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[CycleHarness]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with deployed(template) as harness:
        yield harness
        # A rule still running past its timeout answers into a mock that must still exist.
        assert harness.runtime.wait_idle(timeout=10)


@pytest.fixture
def fleet(cycle: CycleHarness) -> Fleet:
    variables = cycle.client("lambda").get_function_configuration(FunctionName=cycle.function("derive"))
    environment = variables["Environment"]["Variables"]
    registry = JobRegistry(
        environment["OSPREY_TABLE_NAME"],
        client=cycle.client("dynamodb"),
        shards=int(environment["OSPREY_REGISTRY_SHARDS"]),
    )
    fleet = Fleet(registry, cycle.client("batch"), cycle.client("cloudwatch"), cycle.service_jobs)
    fleet.create_queues(cycle.client("iam"))
    return fleet


@dataclass(frozen=True)
class Case:
    source: str  # the rule's code
    outcome: str  # what the decision records for the rule
    rule_priority: float  # its answer, or the fallback
    priority: int  # the job's priority after one cycle
    # The rule's timeoutMs: generous where it answers (the derive step's first call also creates its Lambda
    # client, on a busy machine), short where it must time out.
    timeout_ms: int = 5000


CASES = {
    "plain": Case(PLAIN, "answered", 60.0, 40),
    "apigw": Case(API_GATEWAY, "answered", 70.0, 45),
    "slow": Case(SLOW, "fallback:timeout", 90.0, 55, timeout_ms=500),
    "crash": Case(CRASH, "fallback:error", 90.0, 55),
}


def deploy_rule_and_policy(cycle: CycleHarness, tmp_path: Path, function: str, case: Case) -> str:
    """The user's steps: deploy the function from its source, then apply a policy naming its ARN."""
    arn = deploy_rule(
        cycle.client, cycle.runtime, function, rule_zip({"rule.py": case.source}), "rule.handler"
    )
    policy = tmp_path / f"{function}.yaml"
    policy.write_text(policy_text(f"{function}-policy", function, case.timeout_ms))
    allow = RuleAllowList.for_deployment(account=ACCOUNT, region=REGION)
    assert apply_policy(cycle.client, policy, allow) == [f"{function}-policy"]
    return arn


def test_each_rule_s_answer_or_fallback_and_its_reason_are_in_the_registry_s_decision(
    cycle: CycleHarness, fleet: Fleet, tmp_path: Path
) -> None:
    # Given four rule functions deployed from their source (one answers plainly, one in API Gateway's form, one
    # times out, one crashes), a policy naming each, and a job at 20 % GPU under each policy
    arns = {
        label: deploy_rule_and_policy(cycle, tmp_path, f"osprey-rule-{label}", case)
        for label, case in CASES.items()
    }
    for label in CASES:
        fleet.batch_job(label, gpu=20, memory_bandwidth=10, policy=f"osprey-rule-{label}-policy")

    # When the deployed cycle runs once
    execution = cycle.run("cycle-1")

    # Then the cycle succeeded, and each function was really invoked, once, with its job's event
    assert execution.status == "SUCCEEDED", execution
    for label, case in CASES.items():
        events = [event for name, event in cycle.runtime.invocations if name == f"osprey-rule-{label}"]
        assert [event["job"]["name"] for event in events] == [label]
        assert events[0]["node_metrics"][0]["gpu_util"] == pytest.approx(0.2)
        # ... and the decision holds the rule's answer, or its fallback with the reason, averaged with the GPU
        # rule's 20, applied in one step (maxPriorityChange 100)
        decision = fleet.decision(label)
        [custom] = [rule for rule in decision["rules"] if rule["kind"] == "custom"]
        assert (custom["arn"], custom["outcome"], custom["priority"]) == (
            arns[label],
            case.outcome,
            case.rule_priority,
        ), label
        assert decision["base"] == pytest.approx((20 + case.rule_priority) / 2), label
        assert (decision["previous"], decision["priority"], decision["reason"]) == (
            50,
            case.priority,
            "derived",
        )
        assert fleet.record(label).applied_priority == case.priority, label


def spot_rule() -> Any:
    """The example's handler, loaded from its deployment package as osprey local loads it."""
    source = ROOT / "examples/rules/spot_risk.py"
    return handler_from_zip(rule_zip({source.name: source.read_text()}), "spot_risk.handler", label="spot")


@pytest.mark.parametrize(
    ("event", "answer"),
    [
        pytest.param(
            {
                "current_priority": 50,
                "base_priority": 67.935,
                "node_metrics": [{"spot_interruption_risk": 0.5}],
            },
            47.94,
            id="rebalance-takes-20",
        ),
        pytest.param(
            {"current_priority": 50, "base_priority": 80, "node_metrics": [{"spot_interruption_risk": 1}]},
            40.0,
            id="interruption-takes-40",
        ),
        pytest.param(
            {
                "current_priority": 50,
                "base_priority": 80,
                "node_metrics": [{"spot_interruption_risk": None}, {}],
            },
            80.0,
            id="unknown-risk-is-no-warning",
        ),
        pytest.param(
            {
                "current_priority": 30,
                "base_priority": None,
                "node_metrics": [{"spot_interruption_risk": 0.5}],
            },
            10.0,
            id="no-base-starts-from-current",
        ),
        pytest.param(
            {"current_priority": 50, "base_priority": 20, "node_metrics": [{"spot_interruption_risk": 1.0}]},
            5.0,
            id="never-below-the-floor",
        ),
        pytest.param({"current_priority": 50, "base_priority": 3, "node_metrics": []}, 3.0, id="queued-job"),
    ],
)
def test_the_spot_rule_answers_the_contract(event: dict[str, Any], answer: float) -> None:
    # Given the example rule as deployed; when it gets an event of the contract; then it answers the plain form
    assert spot_rule()(event, None) == {"derived_priority": answer}


def test_a_package_without_the_handler_is_refused_with_what_is_missing() -> None:
    # Given a package whose module has no `handler`; when it is loaded by a wrong or a missing name, then the
    # error names the handler setting and what the package lacks
    code = rule_zip({"rule.py": "def other(event, context):\n    return {}\n"})
    with pytest.raises(RuleDeployError, match=r"'handler.handler': the deployment package has no handler.py"):
        handler_from_zip(code, "handler.handler", label="x")
    with pytest.raises(RuleDeployError, match=r"rule.py has no callable 'handler'"):
        handler_from_zip(code, "rule.handler", label="x")
