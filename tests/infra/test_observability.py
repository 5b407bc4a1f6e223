"""Given the control plane, when it is synthesized, then its dashboard graphs the metrics the Lambdas publish
(names and dimension schemas as ``osprey_control.telemetry`` and the handlers write them, DESIGN §8), the
DerivedPriority widget is a colour-banded table (heat-map style), and the alarms watch failed cycle executions,
custom rule failures and dead letters, notifying an encrypted SNS topic only when an address is configured.
The alarms of ``osprey_infra.alarms`` (failed shards and jobs, Lambda errors, staleness): test_alarms.py."""

from __future__ import annotations

import json
import re
from collections import Counter
from types import SimpleNamespace
from typing import Any, cast

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from osprey_control import wiring
from osprey_control.gang.decision import GangPhase
from osprey_control.ingest.drops import DropReason, drop_metrics
from osprey_control.steps.derive import ShardResult
from osprey_control.steps.gang_watch import gang_metrics
from osprey_control.telemetry import shard_metrics
from osprey_infra.config import ControlPlaneConfig
from osprey_infra.observability import PRIORITY_BANDS, search
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT


def _template(**config: Any) -> Template:
    stack = OspreyStack(
        cdk.App(), "Test", policy_paths=[REPO_ROOT / "policies"], config=ControlPlaneConfig.build(config)
    )
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def full() -> Template:
    return _template(alarm_email="oncall@example.com", per_job_metrics=True, cycle_interval_seconds=20)


def _dashboard_body(template: Template) -> dict[str, Any]:
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    return cast(dict[str, Any], json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts)))


def _widget(body: dict[str, Any], title_prefix: str) -> dict[str, Any]:
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith(title_prefix)]
    return cast(dict[str, Any], widget["properties"])


def _published() -> dict[str, set[tuple[str, ...]]]:
    """Metric name → dimension schemas the Lambdas write: shard_metrics run on a shard with every kind of
    point, plus the names the handlers build inline (a static scan of MetricPoint("Name", ...))."""
    rule = SimpleNamespace(outcome="no-data")
    job = SimpleNamespace(
        record=SimpleNamespace(policy="training-policy", key="sagemaker#job-1"),
        decision=SimpleNamespace(priority=60, previous=50, rules=[rule]),
        error_kind=None,
    )
    failed = SimpleNamespace(record=job.record, decision=None, error_kind="conflict")
    result = ShardResult(outcomes=cast(Any, [job, failed]), custom_rule_failures=Counter({"timeout": 1}))
    found: dict[str, set[tuple[str, ...]]] = {}
    gang = SimpleNamespace(
        decided=True, state=SimpleNamespace(ready_in_time=True, phase=GangPhase.READY, wait_seconds=42.0)
    )
    points = [
        *shard_metrics(result, per_job=True),
        *gang_metrics(cast(Any, gang), "training-policy"),
        *drop_metrics(dict.fromkeys(DropReason, 1)),
    ]
    for point in points:
        found.setdefault(point.name, set()).add(tuple(point.dimensions))
    name_token = r'("\w+"|[A-Z][A-Z0-9_]*)'  # a literal name or a constant of osprey_control.wiring
    for source in (REPO_ROOT / "lambdas").rglob("*.py"):
        # MetricPoint("Name", ...), MetricPoint(NAME_METRIC, ...) or MetricPoint(A if cond else B, ...)
        for tokens in re.findall(
            rf"MetricPoint\(\s*{name_token}(?:\s+if\s+\w+\s+else\s+{name_token})?", source.read_text()
        ):
            for token in filter(None, tokens):
                name = token.strip('"') if token.startswith('"') else getattr(wiring, token, None)
                if isinstance(name, str):
                    found.setdefault(name, set()).add(())
    return found


def test_every_dashboard_metric_is_one_the_lambdas_publish_with_its_dimensions(full: Template) -> None:
    published = _published()
    body = json.dumps(_dashboard_body(full))
    searches = re.findall(r"SEARCH\('\{\\\"/aws/osprey\\\",([\w,]+)\} MetricName=\\\"(\w+)\\\"", body)
    assert searches
    for dimensions, name in searches:
        assert tuple(dimensions.split(",")) in published[name], (name, dimensions)
    assert {name for _, name in searches} >= {"DerivedPriority", "CoSchedulingSuccessRate", "GangWaitSeconds"}
    plain = {
        m[1]
        for w in _dashboard_body(full)["widgets"]
        for m in w["properties"].get("metrics", [])
        if isinstance(m, list) and len(m) > 1 and m[0] == "/aws/osprey"
    }
    assert plain == {
        "CycleDurationMs", "CollectionLatencyMs", "CyclesSucceeded", "CyclesFailed", "JobsEvaluated",
        "MetricsMissing", "ApplyFailures", "PrioritiesApplied", "FailedShards", "FailedJobs",
    }  # fmt: skip
    for name in plain:
        assert () in published[name], name


def test_derived_priority_is_a_colour_banded_table_per_policy_and_per_job(full: Template) -> None:
    widget = _widget(_dashboard_body(full), "DerivedPriority")
    assert widget["view"] == "table"
    assert widget["table"]["layout"] == "horizontal"
    expressions = [m[0]["expression"] for m in widget["metrics"]]
    # Sub-minute cycles still publish at most once per 60 s period.
    assert expressions == [
        search("/aws/osprey", "DerivedPriority", ("Policy",), "Average", 60),
        search("/aws/osprey", "DerivedPriority", ("Policy", "JobId"), "Average", 60),
    ]
    assert widget["metrics"][1][0]["label"] == "${PROP('Dim.Policy')}/${PROP('Dim.JobId')}"
    bands = [(low["value"], high["value"]) for low, high in widget["annotations"]["horizontal"]]
    assert bands == [(low, high) for low, high, _ in PRIORITY_BANDS]


def test_without_per_job_metrics_the_dashboard_queries_no_job_dimension() -> None:
    body = json.dumps(_dashboard_body(_template(metrics_namespace="Team/Osprey")))
    assert "JobId" not in body
    assert search("Team/Osprey", "DerivedPriority", ("Policy",), "Average", 60).replace('"', '\\"') in body


def test_failed_cycle_alarm_counts_failed_timed_out_and_aborted_executions(full: Template) -> None:
    (alarm,) = full.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"AlarmName": "Test-osprey-CycleFailures"}}
    ).values()
    props = alarm["Properties"]
    assert props["Threshold"] == 1
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert props["TreatMissingData"] == "notBreaching"
    stats = {m["Id"]: m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m}
    assert {s["Metric"]["MetricName"] for s in stats.values()} == {
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "ExecutionsAborted",
    }
    for stat in stats.values():
        assert stat["Metric"]["Namespace"] == "AWS/States"
        assert stat["Metric"]["Dimensions"][0]["Name"] == "StateMachineArn"
        assert stat["Stat"] == "Sum"


def test_custom_rule_alarm_sums_every_reason_with_metrics_insights(full: Template) -> None:
    full.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Metrics": [
                Match.object_like(
                    {
                        "Expression": 'SELECT SUM(CustomRuleFailures) FROM SCHEMA("/aws/osprey", Reason)',
                        "Period": 300,
                        "ReturnData": True,
                    }
                )
            ],
            "Threshold": 1,
            "EvaluationPeriods": 3,
            "DatapointsToAlarm": 2,
        },
    )


def test_dead_letter_alarm_fires_on_any_message(full: Template) -> None:
    full.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SQS",
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Dimensions": [
                {
                    "Name": "QueueName",
                    "Value": {"Fn::GetAtt": [Match.string_like_regexp("DeadLetters"), "QueueName"]},
                }
            ],
            "Statistic": "Maximum",
            "Threshold": 0,
            "ComparisonOperator": "GreaterThanThreshold",
        },
    )


def test_alarms_notify_an_encrypted_tls_only_topic_when_an_address_is_given(full: Template) -> None:
    alarms = full.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) > 3  # with OperationalAlarms' (test_alarms.py)
    (topic_id,) = full.find_resources("AWS::SNS::Topic")
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    full.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )
    full.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [Match.string_like_regexp("Key"), "Arn"]}}
    )
    full.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    key_policy = json.dumps(full.find_resources("AWS::KMS::Key"))
    assert '"Service": "cloudwatch.amazonaws.com"' in key_policy
    full.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                ),
                "Version": "2012-10-17",
            }
        },
    )


def test_without_an_address_there_is_no_topic_but_the_alarms_exist() -> None:
    template = _template()
    template.resource_count_is("AWS::SNS::Topic", 0)
    template.resource_count_is("AWS::KMS::Key", 0)
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert "AlarmActions" not in alarm["Properties"]


def test_nothing_references_an_alarm_resource(full: Template) -> None:
    # moto's CloudFormation (osprey local) skips AWS::CloudWatch::Alarm and rejects a template with a Ref or
    # GetAtt to one, so the dashboard's alarm widget names the alarms by ARN built from their fixed names.
    alarms = full.find_resources("AWS::CloudWatch::Alarm")
    others = json.dumps({k: v for k, v in full.to_json()["Resources"].items() if k not in alarms})
    for logical_id in alarms:
        assert f'"{logical_id}"' not in others
    names = {alarm["Properties"]["AlarmName"] for alarm in alarms.values()}
    assert names >= {"Test-osprey-CustomRuleFailures", "Test-osprey-CycleFailures", "Test-osprey-DeadLetters"}
    assert len(names) == len(alarms)  # unique: a name is what the widget's ARN is built from
    widget = _widget(_dashboard_body(full), "Osprey alarms")
    assert len(widget["alarms"]) == len(alarms)
