"""What Osprey's state machines share: Lambda tasks that retry Lambda's transient errors, and a state machine
(Standard or Express) with X-Ray tracing and its own log group (execution data left out of the logs: it holds
job names and metrics). An Express workflow has no execution history to query, so its log group, at level ALL,
is where its states' events are.

The wildcards CDK puts in a state machine's role (X-Ray and log delivery, each invoked function's versions) are
acknowledged to cdk-nag here, where every state machine is made."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from osprey_infra.nag import acknowledge_wildcard, logical_id

__all__ = ["EXPRESS_MAX_SECONDS", "LAMBDA_TRANSIENT_ERRORS", "invoke", "state_machine"]

# An Express execution runs for at most five minutes (Step Functions quotas).
EXPRESS_MAX_SECONDS = 300

LAMBDA_TRANSIENT_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
]


def invoke(
    scope: Construct, state_id: str, function: lambda_.IFunction, **kwargs: object
) -> tasks.LambdaInvoke:
    """A task that invokes ``function`` and keeps only its payload, retrying Lambda's own transient errors."""
    task = tasks.LambdaInvoke(
        scope,
        state_id,
        lambda_function=function,
        payload_response_only=True,
        retry_on_service_exceptions=False,
        **kwargs,  # type: ignore[arg-type]
    )
    task.add_retry(
        errors=LAMBDA_TRANSIENT_ERRORS, interval=cdk.Duration.seconds(2), max_attempts=4, backoff_rate=2.0
    )
    return task


def state_machine(
    scope: Construct,
    start: sfn.IChainable,
    *,
    timeout: cdk.Duration,
    comment: str,
    invokes: Sequence[lambda_.IFunction],
    kind: sfn.StateMachineType = sfn.StateMachineType.STANDARD,
) -> tuple[logs.LogGroup, sfn.StateMachine]:
    """``scope``'s ``Logs`` log group and ``StateMachine`` (``kind``, JSONPath) starting at ``start``;
    ``invokes``: the functions its :func:`invoke` tasks call (their grants are acknowledged to cdk-nag)."""
    if kind is sfn.StateMachineType.EXPRESS and timeout.to_seconds() > EXPRESS_MAX_SECONDS:
        raise ValueError(
            f"an Express workflow runs at most {EXPRESS_MAX_SECONDS} s, got a {timeout.to_seconds()} s timeout"
        )
    log_group = logs.LogGroup(
        scope, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
    )
    machine = sfn.StateMachine(
        scope,
        "StateMachine",
        definition_body=sfn.DefinitionBody.from_chainable(start),
        state_machine_type=kind,
        timeout=timeout,
        tracing_enabled=True,
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        comment=comment,
    )
    acknowledge_wildcard(
        machine, "*", "X-Ray tracing and CloudWatch Logs delivery actions have no resource-level permissions."
    )
    for function in invokes:
        acknowledge_wildcard(
            machine,
            f"<{logical_id(function)}.Arn>:*",
            "CDK's LambdaInvoke grant covers the invoked function and its versions.",
        )
    return log_group, machine
