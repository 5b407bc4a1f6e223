"""The gang watch state machine (Standard, JSONPath): one execution per co-scheduled job, named after it.

WatchStep (the gang watch Lambda) → WatchDone? → Wait ``$.step.waitSeconds`` → WatchStep ... The Lambda
decides everything (readiness, timeout, fallback, metrics, docs/design.md §7); the state machine only loops and
waits, so waiting costs no Lambda time. Backend faults are retried with back-off; a step that still fails
ends the execution as ``Osprey.GangWatchFailed`` (the job itself is left as it is).

History: each loop adds about 7 events; a Standard execution holds 25,000, so one execution covers about
3,500 polls, i.e. a gang timeout of roughly 9.7 hours at the 10 s poll (docs/gangs.md).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from osprey_infra.state_machines import invoke, state_machine

__all__ = ["GANG_WATCH_TIMEOUT", "GangWatchStateMachine"]

# Longest gang timeout (86,400 s) plus every requeue back-off (60 * (2^5 - 1) s) with slack.
GANG_WATCH_TIMEOUT = cdk.Duration.days(2)


class GangWatchStateMachine(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, watch: lambda_.IFunction) -> None:
        super().__init__(scope, construct_id)
        step = invoke(
            self,
            "WatchStep",
            watch,
            payload=sfn.TaskInput.from_object(
                {"job.$": "$.job", "policy.$": "$.policy", "settings.$": "$.settings"}
            ),
            result_path="$.step",
        )
        # Throttling or a 5xx from SageMaker/Batch/EKS, or a concurrent state write: the step is safe to repeat
        # (the state is saved only after the fallback action succeeded).
        step.add_retry(
            errors=["TransientError"],  # osprey_control.errors: the watch step raises only typed errors
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
        self.log_group, self.state_machine = state_machine(
            self,
            step,
            timeout=GANG_WATCH_TIMEOUT,
            comment="Osprey gang watch: one execution per co-scheduled job",
            invokes=[watch],
        )
