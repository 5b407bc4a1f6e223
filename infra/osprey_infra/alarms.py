"""Alarms for failures that otherwise pass silently (issue 14): failed shards and jobs, Lambda errors and
throttles of every Osprey function, cycles that stop, on top of ``Observability``'s execution, custom-rule and
dead-letter alarms. The runbook for each is docs/operations.md.

Evaluation choices:

- ``FailedShards`` / ``FailedJobs`` (published by Finish once per cycle, 0 included): Sum > 0 in
  ``failure_alarm_periods`` consecutive cycle periods. One failed cycle is often a throttle or a conflict the
  next cycle retries; the same failure cycle after cycle is a shard or a job left behind. Missing data is not
  breaching: no data means no cycle finished, which is the staleness alarm's case.
- Lambda ``Errors`` / ``Throttles`` per function: Sum > 0 in 2 of 3 five-minute periods, as the custom-rule
  alarm: Step Functions retries a transient error, so one is not worth a page; repeated ones are.
- ``InvalidPolicies`` (the collect step and every derive shard publish the number of deployed policies whose
  stored value is refused, 0 included): Maximum > 0 in one cycle period. A stored value does not fix itself, so
  one period is enough, and the Maximum counts each policy once however many steps reported it.
- Staleness: ``CyclesSucceeded`` (clean cycles only) Sum < 1 in every one of the last N one-minute periods,
  missing data breaching: a stopped schedule, a stuck lease or a failing cycle publishes nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from osprey_control.wiring import (
    CYCLES_SUCCEEDED_METRIC,
    FAILED_JOBS_METRIC,
    FAILED_SHARDS_METRIC,
    INVALID_POLICIES_METRIC,
)

__all__ = ["FUNCTION_ALARM_PERIOD", "OperationalAlarms", "alarm_name"]

FUNCTION_ALARM_PERIOD = cdk.Duration.minutes(5)


def alarm_name(scope: Construct, suffix: str) -> str:
    """Alarm names are fixed, so the dashboard can name an alarm by ARN (see ``Observability``)."""
    return f"{cdk.Stack.of(scope).stack_name}-osprey-{suffix}"


class OperationalAlarms(Construct):
    """``functions``: role → function, every Lambda function the control plane deploys (each gets an errors
    and a throttles alarm). ``named`` lists every alarm with its name, for the dashboard and the topic."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespace: str,
        functions: Mapping[str, lambda_.IFunction],
        metric_period_seconds: int,
        stale_after_minutes: int,
        failure_alarm_periods: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.named: list[tuple[str, cw.Alarm]] = []
        cycle_period = cdk.Duration.seconds(metric_period_seconds)

        def cycle_metric(name: str, period: cdk.Duration) -> cw.Metric:
            return cw.Metric(namespace=namespace, metric_name=name, statistic="Sum", period=period)

        self.failed_shards = self._alarm(
            "FailedShards",
            "Osprey: a registry shard's derive step failed in consecutive cycles; its jobs keep their old "
            "priorities. The finish log's 'cycle had failed shards' line names the shards and errors.",
            cycle_metric(FAILED_SHARDS_METRIC, cycle_period),
            evaluation_periods=failure_alarm_periods,
        )
        self.failed_jobs = self._alarm(
            "FailedJobs",
            "Osprey: jobs failed derivation or apply in consecutive cycles; `osprey jobs` shows their apply "
            "state and error, the finish log's 'cycle had failed jobs' line their keys.",
            cycle_metric(FAILED_JOBS_METRIC, cycle_period),
            evaluation_periods=failure_alarm_periods,
        )
        self.invalid_policies = self._alarm(
            "InvalidPolicies",
            "Osprey: a deployed policy's stored value is invalid (malformed, oversized or against the schema); its "
            "jobs run under its last good version or keep their last applied priority. The collect and derive "
            "logs' 'invalid policy' lines and `osprey jobs` name it and the error (docs/operations.md).",
            cw.Metric(
                namespace=namespace,
                metric_name=INVALID_POLICIES_METRIC,
                statistic="Maximum",
                period=cycle_period,
            ),
            evaluation_periods=1,
        )
        self.stale_cycles = self._alarm(
            "CycleStale",
            f"Osprey: no clean cycle in {stale_after_minutes} minutes (schedule stopped, lease held, cycles "
            "failing or a shard failing every cycle): priorities are not being updated.",
            cycle_metric(CYCLES_SUCCEEDED_METRIC, cdk.Duration.minutes(1)),
            evaluation_periods=stale_after_minutes,
            threshold=1,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cw.TreatMissingData.BREACHING,
        )
        self.function_errors: dict[str, cw.Alarm] = {}
        self.function_throttles: dict[str, cw.Alarm] = {}
        for role, function in sorted(functions.items()):
            label = role[0].upper() + role[1:]
            self.function_errors[role] = self._alarm(
                f"{label}Errors",
                f"Osprey: the {role} Lambda function keeps failing (errors in 2 of 3 five-minute periods); "
                "its log group has the stack traces.",
                function.metric_errors(period=FUNCTION_ALARM_PERIOD, statistic="Sum"),
                evaluation_periods=3,
                datapoints_to_alarm=2,
            )
            self.function_throttles[role] = self._alarm(
                f"{label}Throttles",
                f"Osprey: the {role} Lambda function is throttled (2 of 3 five-minute periods): the "
                "account's or the function's concurrency limit is reached.",
                function.metric_throttles(period=FUNCTION_ALARM_PERIOD, statistic="Sum"),
                evaluation_periods=3,
                datapoints_to_alarm=2,
            )

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cw.IMetric,
        *,
        evaluation_periods: int,
        datapoints_to_alarm: int | None = None,
        threshold: float = 0,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING,
    ) -> cw.Alarm:
        name = alarm_name(self, construct_id)
        alarm = cw.Alarm(
            self,
            construct_id,
            alarm_name=name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm or evaluation_periods,
            comparison_operator=comparison,
            treat_missing_data=missing,
        )
        self.named.append((name, alarm))
        return alarm
