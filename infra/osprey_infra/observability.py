"""The control plane's CloudWatch dashboard and alarms, over the metrics docs/design.md §8 names.

What the Lambdas publish (EMF, namespace ``metrics_namespace``), and so what is graphed here:

- derive (``osprey_control.telemetry.shard_metrics``, one record per shard): ``DerivedPriority`` and
  ``PriorityChange`` by ``[Policy]`` (and by ``[Policy, JobId]`` when per-job metrics are on),
  ``JobsEvaluated`` and ``MetricsMissing`` (no dimensions), ``CustomRuleFailures`` by ``[Reason]``,
  ``DerivationErrors`` by ``[Kind]``; ``osprey_control.steps.cycle``: ``CollectionLatencyMs``.
- apply: ``PrioritiesApplied``, ``ApplyFailures``; finish (``osprey_control.telemetry.cycle_metrics``):
  ``CycleDurationMs``, ``CyclesSucceeded`` (clean cycles) / ``CyclesFailed`` (failed, or with a failed shard),
  ``FailedShards``, ``FailedJobs`` (no dimensions).
- gang watch (``osprey_control.steps.gang_watch.gang_metrics``): ``CoSchedulingSuccessRate`` (100 or 0 per gang,
  so its Average is the rate) and ``GangWaitSeconds``, by ``[Policy]``.

Alarms cannot use SEARCH, so the custom-rule alarm sums every ``Reason`` with a Metrics Insights query, and a
new failure reason is covered without a redeploy. The alarms on failed shards and jobs, Lambda errors and
throttles and stale cycles are ``osprey_infra.alarms.OperationalAlarms``, a child of this construct; every
alarm is on the dashboard's alarm status widget and notifies the topic. Runbook: docs/operations.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from osprey_control.wiring import (
    APPLY_FAILURES_METRIC,
    CO_SCHEDULING_SUCCESS_RATE_METRIC,
    COLLECTION_LATENCY_METRIC,
    CUSTOM_RULE_FAILURES_METRIC,
    CYCLE_DURATION_METRIC,
    CYCLES_FAILED_METRIC,
    CYCLES_SUCCEEDED_METRIC,
    DERIVATION_ERRORS_METRIC,
    DERIVED_PRIORITY_METRIC,
    EVENTS_DROPPED_METRIC,
    FAILED_JOBS_METRIC,
    FAILED_SHARDS_METRIC,
    GANG_WAIT_METRIC,
    JOB_DIMENSION,
    JOBS_EVALUATED_METRIC,
    KIND_DIMENSION,
    METRICS_MISSING_METRIC,
    POLICY_DIMENSION,
    PRIORITIES_APPLIED_METRIC,
    PRIORITY_CHANGE_METRIC,
    REASON_DIMENSION,
)
from osprey_infra.alarms import OperationalAlarms, alarm_name

__all__ = ["DROPPED_EVENTS_THRESHOLD", "PRIORITY_BANDS", "Observability", "search"]

# Heat-map colouring of the DerivedPriority table (Osprey priorities are 0..100).
PRIORITY_BANDS: tuple[tuple[float, float, str], ...] = (
    (0, 25, cw.Color.BLUE),
    (25, 50, cw.Color.GREEN),
    (50, 75, cw.Color.ORANGE),
    (75, 100, cw.Color.RED),
)
_WIDTH = 24
_ALARM_PERIOD = cdk.Duration.minutes(5)
# Ingest drops an event only when no retry can make it valid (osprey_control.ingest.drops). A few a day are
# noise (a hand-made test event); this many in five minutes is a pattern: AWS added a status this version does
# not know, an event rule or input transformer is wrong, or someone writes to the queue. Runbook:
# docs/operations.md, "Dropped events".
DROPPED_EVENTS_THRESHOLD = 10


def _sum_over_reasons(namespace: str, metric: str, label: str) -> cw.MathExpression:
    """``metric`` summed over every value of its ``Reason`` dimension, per alarm period (Metrics Insights: the
    reasons need not be known when the alarm is made)."""
    return cw.MathExpression(
        expression=f'SELECT SUM({metric}) FROM SCHEMA("{namespace}", {REASON_DIMENSION})',
        using_metrics={},
        label=label,
        period=_ALARM_PERIOD,
    )


def search(namespace: str, metric: str, dimensions: tuple[str, ...] | None, stat: str, period: int) -> str:
    """A CloudWatch SEARCH expression. ``dimensions`` is the exact dimension schema, or None for any."""
    if dimensions is None:
        where = f'Namespace="{namespace}" MetricName="{metric}"'
    else:
        where = "{" + ",".join([f'"{namespace}"', *dimensions]) + f'}} MetricName="{metric}"'
    return f"SEARCH('{where}', '{stat}', {period})"


class Observability(Construct):
    """``alarm_email``: when set, the alarms notify an SNS topic (KMS-encrypted, TLS only) with that address
    subscribed. Without it the alarms still exist; embedders add actions through ``self.alarms``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespace: str,
        per_job_metrics: bool,
        state_machine: sfn.IStateMachine,
        dead_letter_queue: sqs.IQueue,
        functions: Mapping[str, lambda_.IFunction],
        cycle_interval_seconds: int,
        stale_after_minutes: int,
        failure_alarm_periods: int,
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.namespace = namespace
        # Metrics are written once per cycle; a period shorter than that only shows gaps.
        self.period = max(60, cycle_interval_seconds)
        stack = cdk.Stack.of(self)
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"Osprey-{stack.stack_name}-{stack.region}",
            default_interval=cdk.Duration.hours(3),
        )
        self.dashboard.add_widgets(*self._priority_widgets(per_job_metrics))
        self.dashboard.add_widgets(*self._cycle_widgets(state_machine))
        self.dashboard.add_widgets(*self._failure_widgets(dead_letter_queue, functions))

        self.cycle_failures = cw.Alarm(
            self,
            "CycleFailures",
            alarm_name=self._alarm_name("CycleFailures"),
            alarm_description="Osprey: a cycle execution failed, timed out or was aborted (its Finish "
            "state's input holds the error).",
            metric=cw.MathExpression(
                expression="FILL(failed, 0) + FILL(timedOut, 0) + FILL(aborted, 0)",
                using_metrics={
                    "failed": state_machine.metric_failed(period=_ALARM_PERIOD, statistic="Sum"),
                    "timedOut": state_machine.metric_timed_out(period=_ALARM_PERIOD, statistic="Sum"),
                    "aborted": state_machine.metric_aborted(period=_ALARM_PERIOD, statistic="Sum"),
                },
                label="Failed cycles",
                period=_ALARM_PERIOD,
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.custom_rule_failures = cw.Alarm(
            self,
            "CustomRuleFailures",
            alarm_name=self._alarm_name("CustomRuleFailures"),
            alarm_description="Osprey: custom rule Lambdas keep failing (their fallback value is used); "
            "see the CustomRuleFailures widget for the reason.",
            metric=_sum_over_reasons(namespace, CUSTOM_RULE_FAILURES_METRIC, "Custom rule failures"),
            threshold=1,
            # Two bad five-minute periods out of three: one transient timeout does not page anyone.
            evaluation_periods=3,
            datapoints_to_alarm=2,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.dropped_events = cw.Alarm(
            self,
            "DroppedEvents",
            alarm_name=self._alarm_name("DroppedEvents"),
            alarm_description=f"Osprey: ingest dropped at least {DROPPED_EVENTS_THRESHOLD} events in five "
            "minutes (malformed, over-limit, unsupported or rejected); their jobs may be missing from the "
            "registry. The ingest log's 'event dropped' lines name each event and its reason.",
            metric=_sum_over_reasons(namespace, EVENTS_DROPPED_METRIC, "Dropped events"),
            threshold=DROPPED_EVENTS_THRESHOLD,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.dead_letters = cw.Alarm(
            self,
            "DeadLetters",
            alarm_name=self._alarm_name("DeadLetters"),
            alarm_description="Osprey: job or instance events could not be ingested and are in the "
            "dead-letter queue (the registry is missing them).",
            metric=dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=_ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=0,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.operational = OperationalAlarms(
            self,
            "Alarms",
            namespace=namespace,
            functions=functions,
            metric_period_seconds=self.period,
            stale_after_minutes=stale_after_minutes,
            failure_alarm_periods=failure_alarm_periods,
        )
        named = [
            (self._alarm_name(alarm.node.id), alarm)
            for alarm in (
                self.cycle_failures,
                self.custom_rule_failures,
                self.dropped_events,
                self.dead_letters,
            )
        ] + self.operational.named
        self.alarms = [alarm for _, alarm in named]
        # The widget names the alarms by ARNs built from their names, not GetAtt: moto's CloudFormation
        # (osprey local) skips AWS::CloudWatch::Alarm and rejects a template that references one.
        by_arn = [
            cw.Alarm.from_alarm_arn(self, f"{alarm.node.id}Ref", self._alarm_arn(name))
            for name, alarm in named
        ]
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(
                alarms=by_arn,
                title="Osprey alarms",
                width=_WIDTH,
                # The widget lays alarms out about four to a row at full width, under a title row.
                height=1 + math.ceil(len(by_arn) / 4),
            )
        )

        self.topic: sns.Topic | None = None
        if alarm_email is not None:
            self.topic = self._topic(alarm_email)
            for alarm in self.alarms:
                alarm.add_alarm_action(cw_actions.SnsAction(self.topic))

    def _alarm_name(self, construct_id: str) -> str:
        return alarm_name(self, construct_id)

    def _alarm_arn(self, name: str) -> str:
        return cdk.Stack.of(self).format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )

    def _metric(self, name: str, statistic: str = "Sum", **dimensions: str) -> cw.Metric:
        return cw.Metric(
            namespace=self.namespace,
            metric_name=name,
            dimensions_map=dimensions or None,
            statistic=statistic,
            period=cdk.Duration.seconds(self.period),
        )

    def _search(self, metric: str, dimensions: tuple[str, ...] | None, stat: str) -> cw.IMetric:
        # A dynamic label names each series found by its dimension values (Policy, Policy/JobId, ...).
        label = "/".join(f"${{PROP('Dim.{name}')}}" for name in dimensions) if dimensions else metric
        return cw.MathExpression(
            expression=search(self.namespace, metric, dimensions, stat, self.period),
            using_metrics={},
            label=label,
            period=cdk.Duration.seconds(self.period),
        )

    def _priority_widgets(self, per_job: bool) -> list[cw.IWidget]:
        # A table of series by time with coloured cells is CloudWatch's nearest thing to a heat map.
        rows = [self._search(DERIVED_PRIORITY_METRIC, (POLICY_DIMENSION,), "Average")]
        if per_job:
            rows.append(self._search(DERIVED_PRIORITY_METRIC, (POLICY_DIMENSION, JOB_DIMENSION), "Average"))
        heat_map = cw.TableWidget(
            title="DerivedPriority (per policy" + (" and per job)" if per_job else ")"),
            metrics=rows,
            layout=cw.TableLayout.HORIZONTAL,
            thresholds=[cw.TableThreshold.between(low, high, color) for low, high, color in PRIORITY_BANDS],
            width=_WIDTH,
            height=8,
        )
        changes = cw.GraphWidget(
            title="PriorityChange by policy",
            left=[self._search(PRIORITY_CHANGE_METRIC, (POLICY_DIMENSION,), "Average")],
            width=12,
            height=6,
        )
        co_scheduling = cw.GraphWidget(
            title="Gang jobs: CoSchedulingSuccessRate and GangWaitSeconds",
            left=[self._search(CO_SCHEDULING_SUCCESS_RATE_METRIC, (POLICY_DIMENSION,), "Average")],
            right=[self._search(GANG_WAIT_METRIC, (POLICY_DIMENSION,), "Maximum")],
            width=12,
            height=6,
        )
        return [heat_map, changes, co_scheduling]

    def _cycle_widgets(self, state_machine: sfn.IStateMachine) -> list[cw.IWidget]:
        duration = cw.GraphWidget(
            title="CycleDurationMs",
            left=[
                self._metric(CYCLE_DURATION_METRIC, "p50").with_(label="p50"),
                self._metric(CYCLE_DURATION_METRIC, "p90").with_(label="p90"),
                self._metric(CYCLE_DURATION_METRIC, "Maximum").with_(label="max"),
            ],
            right=[self._metric(COLLECTION_LATENCY_METRIC, "Maximum").with_(label="collection (max)")],
            width=12,
            height=6,
        )
        cycles = cw.GraphWidget(
            title="Cycles and jobs evaluated",
            left=[
                self._metric(CYCLES_SUCCEEDED_METRIC).with_(label="succeeded"),
                self._metric(CYCLES_FAILED_METRIC).with_(label="failed"),
                state_machine.metric_failed(statistic="Sum").with_(label="executions failed"),
                self._metric(FAILED_SHARDS_METRIC).with_(label="failed shards"),
                self._metric(FAILED_JOBS_METRIC).with_(label="failed jobs"),
            ],
            right=[
                self._metric(JOBS_EVALUATED_METRIC).with_(label="jobs evaluated"),
                self._metric(METRICS_MISSING_METRIC).with_(label="rules without data"),
            ],
            width=12,
            height=6,
        )
        return [duration, cycles]

    def _failure_widgets(
        self, dead_letter_queue: sqs.IQueue, functions: Mapping[str, lambda_.IFunction]
    ) -> list[cw.IWidget]:
        rules = cw.GraphWidget(
            title="CustomRuleFailures by reason",
            left=[self._search(CUSTOM_RULE_FAILURES_METRIC, (REASON_DIMENSION,), "Sum")],
            width=8,
            height=6,
        )
        apply = cw.GraphWidget(
            title="Apply: priorities applied and failures",
            left=[self._metric(APPLY_FAILURES_METRIC).with_(label="apply failures")],
            right=[self._metric(PRIORITIES_APPLIED_METRIC).with_(label="applied")],
            width=8,
            height=6,
        )
        errors = cw.GraphWidget(
            title="DerivationErrors by kind, events dropped by reason, Lambda errors, dead letters",
            left=[
                self._search(DERIVATION_ERRORS_METRIC, (KIND_DIMENSION,), "Sum"),
                # Ingest's permanently bad events: dropped, never redelivered (docs/registry.md, Ingest).
                self._search(EVENTS_DROPPED_METRIC, (REASON_DIMENSION,), "Sum"),
                *(
                    function.metric_errors(statistic="Sum").with_(label=f"{role} errors")
                    for role, function in sorted(functions.items())
                ),
            ],
            right=[
                dead_letter_queue.metric_approximate_number_of_messages_visible(statistic="Maximum").with_(
                    label="dead letters"
                )
            ],
            width=8,
            height=6,
        )
        return [rules, apply, errors]

    def _topic(self, email: str) -> sns.Topic:
        # A customer-managed key: CloudWatch cannot publish to a topic under the AWS-managed aws/sns key,
        # whose policy cannot grant it kms:GenerateDataKey.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Osprey alarm notifications",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        source_account = {"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}}
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy "*" means this key
                conditions=source_account,
            )
        )
        topic = sns.Topic(self, "AlarmTopic", display_name="Osprey alarms", master_key=key, enforce_ssl=True)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=source_account,
            )
        )
        topic.add_subscription(subscriptions.EmailSubscription(email))
        return topic
