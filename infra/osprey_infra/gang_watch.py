"""The gang watch state machine (Standard, JSONPath): one execution per co-scheduled job, named after it.

WatchStep (the gang watch Lambda) → WatchDone? → Wait ``$.step.waitSeconds`` → WatchStep ... The Lambda
decides everything (readiness, timeout, fallback, metrics, DESIGN §7); the state machine only loops and
waits, so waiting costs no Lambda time. Backend faults are retried with back-off; a step that still fails
ends the execution as ``Osprey.GangWatchFailed`` (the job itself is left as it is).

History: each loop adds about 7 events; a Standard execution holds 25,000, so one execution covers about
3,500 polls, i.e. a gang timeout of roughly 9.7 hours at the 10 s poll (docs/gangs.md).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

__all__ = ["GANG_WATCH_TIMEOUT", "GangWatchStateMachine"]

_LAMBDA_TRANSIENT = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
]
# Longest gang timeout (86,400 s) plus every requeue back-off (60 * (2^5 - 1) s) with slack.
GANG_WATCH_TIMEOUT = cdk.Duration.days(2)


class GangWatchStateMachine(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, watch: lambda_.IFunction) -> None:
        super().__init__(scope, construct_id)
        step = tasks.LambdaInvoke(
            self,
            "WatchStep",
            lambda_function=watch,
            payload=sfn.TaskInput.from_object(
                {"job.$": "$.job", "policy.$": "$.policy", "settings.$": "$.settings"}
            ),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.step",
        )
        step.add_retry(
            errors=_LAMBDA_TRANSIENT, interval=cdk.Duration.seconds(2), max_attempts=4, backoff_rate=2.0
        )
        # Throttling or a 5xx from SageMaker/Batch/EKS, or a concurrent state write: the step is safe to repeat
        # (the state is saved only after the fallback action succeeded).
        step.add_retry(
            errors=["ClientError", "StaleGangStateError", "KubernetesApiError"],
            interval=cdk.Duration.seconds(5),
            max_attempts=5,
            backoff_rate=2.0,
        )
        step.add_catch(
            sfn.Fail(self, "GangWatchFailed", error="Osprey.GangWatchFailed", cause="see WatchStep's error"),
            errors=["States.ALL"],
            result_path="$.error",
        )
        wait = sfn.Wait(self, "WaitForWorkers", time=sfn.WaitTime.seconds_path("$.step.waitSeconds"))
        wait.next(step)
        step.next(
            sfn.Choice(self, "WatchDone")
            .when(sfn.Condition.boolean_equals("$.step.done", True), sfn.Succeed(self, "GangDecided"))
            .otherwise(wait)
        )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(step),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=GANG_WATCH_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
            ),
            comment="Osprey gang watch: one execution per co-scheduled job",
        )
