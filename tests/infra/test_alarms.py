"""Given the control plane, when it is synthesized, then failures that used to pass silently raise alarms
(issue 14): failed shards and jobs per cycle, errors and throttles of every Lambda function, no clean cycle in
N minutes, dead letters; each is on the dashboard and notifies the topic exactly when one is configured."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from osprey_infra.config import ConfigError, ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT


def _template(**config: Any) -> Template:
    stack = OspreyStack(
        cdk.App(), "Test", policy_paths=[REPO_ROOT / "policies"], config=ControlPlaneConfig.build(config)
    )
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def configured() -> Template:
    # Every function there is (EKS discovery included), an address, and non-default alarm settings.
    return _template(
        alarm_email="oncall@example.com",
        eks_clusters=["gpu"],
        cycle_interval_seconds=120,
        stale_cycle_minutes=30,
        failure_alarm_periods=5,
        metrics_namespace="Team/Osprey",
    )


@pytest.fixture(scope="module")
def bare() -> Template:
    return _template()


def _alarms(template: Template) -> dict[str, dict[str, Any]]:
    return {
        alarm["Properties"]["AlarmName"].removeprefix("Test-osprey-"): alarm["Properties"]
        for alarm in template.find_resources("AWS::CloudWatch::Alarm").values()
    }


@pytest.mark.parametrize("metric", ["FailedShards", "FailedJobs"])
def test_failed_shards_and_jobs_alarm_on_any_in_consecutive_cycle_periods(
    bare: Template, configured: Template, metric: str
) -> None:
    # Given the defaults, and a 120 s cycle with 5 evaluation periods in namespace Team/Osprey
    for template, namespace, period, periods in (
        (bare, "/aws/osprey", 60, 3),
        (configured, "Team/Osprey", 120, 5),
    ):
        # When the alarm on the metric Finish publishes is read from the template
        alarm = _alarms(template)[metric]

        # Then it fires on a sum above 0 per cycle period in every one of the configured periods
        assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (namespace, metric, "Sum")
        assert "Dimensions" not in alarm
        assert alarm["Period"] == period
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == periods
        # ... and no data (no cycle finished) is the staleness alarm's business, not this one's
        assert alarm["TreatMissingData"] == "notBreaching"


def test_staleness_alarm_fires_without_a_clean_cycle_for_n_minutes_missing_data_breaching(
    bare: Template, configured: Template
) -> None:
    for template, namespace, minutes in ((bare, "/aws/osprey", 10), (configured, "Team/Osprey", 30)):
        # Given the default (10 min) and a configured 30 min
        # When the staleness alarm is read from the template
        alarm = _alarms(template)["CycleStale"]

        # Then it counts clean cycles per minute and fires when every one of the last N minutes had none
        assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
            namespace,
            "CyclesSucceeded",
            "Sum",
        )
        assert alarm["Period"] == 60
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "LessThanThreshold")
        assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == minutes
        # ... and a cycle that publishes nothing at all (schedule stopped, lease stuck) is stale
        assert alarm["TreatMissingData"] == "breaching"


def test_dead_letter_alarm_watches_the_ingest_queues_dlq(bare: Template) -> None:
    alarm = _alarms(bare)["DeadLetters"]
    (dimension,) = alarm["Dimensions"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert dimension["Value"]["Fn::GetAtt"][0].startswith("ControlPlaneEventsDeadLetters")
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["TreatMissingData"] == "notBreaching"


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_lambda_function_in_the_template_has_an_errors_and_a_throttles_alarm(
    bare: Template, configured: Template, metric: str
) -> None:
    for template in (bare, configured):
        # Given every Lambda function the template deploys (counted from the template, so a new function
        # without alarms fails here)
        functions = set(template.find_resources("AWS::Lambda::Function"))
        assert len(functions) >= 8

        # When the alarms on AWS/Lambda's metric are collected by the function they watch
        watched = [
            alarm["Dimensions"][0]["Value"]["Ref"]
            for alarm in _alarms(template).values()
            if alarm.get("Namespace") == "AWS/Lambda" and alarm["MetricName"] == metric
        ]

        # Then each function has exactly one, firing on any in 2 of 3 five-minute periods
        assert sorted(watched) == sorted(functions)
        for alarm in _alarms(template).values():
            if alarm.get("Namespace") == "AWS/Lambda" and alarm["MetricName"] == metric:
                assert alarm["Dimensions"][0]["Name"] == "FunctionName"
                assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 300)
                assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
                assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 2)
                assert alarm["TreatMissingData"] == "notBreaching"
    # ... named after the function's role
    assert {"DeriveErrors", "GangWatchThrottles", "EksDiscoveryErrors", "PlanErrors"} <= set(
        _alarms(configured)
    )


def test_every_alarm_notifies_the_topic_when_an_address_is_configured(configured: Template) -> None:
    (topic,) = configured.find_resources("AWS::SNS::Topic")
    alarms = _alarms(configured)
    # 4 operational (FailedShards, FailedJobs, CycleStale, InvalidPolicies), 3 of Observability, 2 per function
    assert len(alarms) == 4 + 3 + 2 * len(configured.find_resources("AWS::Lambda::Function"))
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == [{"Ref": topic}], name


def test_without_an_address_no_alarm_has_an_action(bare: Template) -> None:
    bare.resource_count_is("AWS::SNS::Topic", 0)
    for name, alarm in _alarms(bare).items():
        assert "AlarmActions" not in alarm, name
        assert "OKActions" not in alarm, name


def test_every_alarm_is_on_the_dashboards_alarm_status_widget(configured: Template) -> None:
    (dashboard,) = configured.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))
    (widget,) = [w["properties"] for w in body["widgets"] if w["properties"].get("title") == "Osprey alarms"]
    # ARNs: arn:TOKEN:cloudwatch:TOKEN:TOKEN:alarm:<name>
    on_widget = sorted(arn.rsplit(":alarm:", 1)[1] for arn in widget["alarms"])
    assert on_widget == sorted(alarm["AlarmName"] for alarm in _alarms(configured).values())
    # ... and the failure metrics are graphed next to the cycle counts
    cycles = next(
        w["properties"]
        for w in body["widgets"]
        if w["properties"].get("title") == "Cycles and jobs evaluated"
    )
    assert {m[1] for m in cycles["metrics"] if m[0] == "Team/Osprey"} >= {"FailedShards", "FailedJobs"}


def test_finish_gets_the_cycle_state_it_counts_failed_shards_and_jobs_from(bare: Template) -> None:
    # "$.shards" would be a runtime error on the paths that fail before the Map; "$" always exists.
    (machine,) = [
        m
        for m in bare.find_resources("AWS::StepFunctions::StateMachine").values()
        if "Osprey priority cycle" in json.dumps(m)
    ]
    definition = "".join(
        p if isinstance(p, str) else "TOKEN" for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    )
    finish = json.loads(definition)["States"]["Finish"]
    assert finish["Parameters"]["cycle.$"] == "$"


def test_staleness_defaults_to_ten_minutes_or_twice_a_long_interval() -> None:
    assert ControlPlaneConfig().stale_after_minutes == 10
    assert ControlPlaneConfig.build({"cycle_interval_seconds": 3600}).stale_after_minutes == 120
    assert ControlPlaneConfig.build({"stale_cycle_minutes": "25"}).stale_after_minutes == 25


def test_alarm_settings_are_validated_at_synth() -> None:
    # A window shorter than two cycles would call a healthy hourly schedule stale
    with pytest.raises(ConfigError, match=r"stale_cycle_minutes must be at least twice .* >= 120"):
        ControlPlaneConfig.build({"cycle_interval_seconds": 3600, "stale_cycle_minutes": 60})
    with pytest.raises(ConfigError, match=r"stale_cycle_minutes \(context osprey:staleCycleMinutes\)"):
        ControlPlaneConfig.build({"stale_cycle_minutes": 1})
    # CloudWatch refuses an alarm looking back more than a day over sub-hour periods
    with pytest.raises(ConfigError, match="at most 24"):
        ControlPlaneConfig.build({"cycle_interval_seconds": 3540, "failure_alarm_periods": 25})
    with pytest.raises(ConfigError, match=r"failure_alarm_periods \(context osprey:failureAlarmPeriods\)"):
        ControlPlaneConfig.build({"failure_alarm_periods": 0})
    assert ControlPlaneConfig.from_context({"osprey:failureAlarmPeriods": "4"}.get).failure_alarm_periods == 4


def test_an_invalid_stored_policy_alarms_within_one_cycle_period(
    bare: Template, configured: Template
) -> None:
    for template, namespace, period in ((bare, "/aws/osprey", 60), (configured, "Team/Osprey", 120)):
        # When the alarm on the InvalidPolicies total (collect and derive publish it, 0 included) is read
        alarm = _alarms(template)["InvalidPolicies"]
        # Then one invalid policy in one cycle period fires it: a stored value does not fix itself
        assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
            namespace,
            "InvalidPolicies",
            "Maximum",
        )
        assert "Dimensions" not in alarm
        assert alarm["Period"] == period
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == 1
        assert alarm["TreatMissingData"] == "notBreaching"


def test_policy_readers_may_read_the_policies_history_and_nothing_else_in_ssm(bare: Template) -> None:
    # The last good version of an invalid policy comes from its parameter history.
    statements = [
        statement
        for policy in bare.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ssm:GetParameterHistory" in statement["Action"]
    ]
    assert len(statements) == 3  # collect, derive and ingest
    for statement in statements:
        assert all(":parameter/osprey/policies" in json.dumps(resource) for resource in statement["Resource"])
