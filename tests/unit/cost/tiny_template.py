"""A hand-written template shaped like the synthesized one (tokens and all), small enough to edit in a test."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["FUNCTIONS", "evaluate_arithmetic", "tiny_template"]

FUNCTIONS = {
    "lease": 512,
    "shards": 512,
    "collect": 512,
    "derive": 512,
    "apply": 512,
    "plan": 1024,
    "finish": 512,
}


def _task(name: str, function: str, next_state: str | None) -> dict[str, Any]:
    state: dict[str, Any] = {"Type": "Task", "Resource": f"@@{function}@@"}
    state.update({"Next": next_state} if next_state else {"End": True})
    return state


def _states(extra_pass: bool) -> dict[str, Any]:
    after_plan = "Extra" if extra_pass else "CollectMetrics"
    states: dict[str, Any] = {
        "AcquireLease": _task("AcquireLease", "lease", "LeaseAcquired"),
        "LeaseAcquired": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.lease.acquired", "BooleanEquals": True, "Next": "PlanShards"}],
            "Default": "SkippedLeaseHeld",
        },
        "SkippedLeaseHeld": {"Type": "Succeed"},
        "PlanShards": _task("PlanShards", "shards", after_plan),
        "CollectMetrics": _task("CollectMetrics", "collect", "DeriveShards"),
        "DeriveShards": {
            "Type": "Map",
            "MaxConcurrency": 16,
            "Next": "ApplyPriorities",
            "ItemProcessor": {
                "StartAt": "DeriveShardsShard",
                "States": {"DeriveShardsShard": _task("DeriveShardsShard", "derive", None)},
            },
        },
        "ApplyPriorities": _task("ApplyPriorities", "apply", "PlanParallelism"),
        "PlanParallelism": _task("PlanParallelism", "plan", "Finish"),
        "Finish": _task("Finish", "finish", "CycleOutcome"),
        "CycleOutcome": {
            "Type": "Choice",
            "Choices": [
                {
                    "And": [
                        {"Variable": "$.cycles", "IsPresent": True},
                        {"Variable": "$.cycles", "NumericGreaterThan": 1},
                    ],
                    "Next": "WaitForNextCycle",
                }
            ],
            "Default": "CycleSucceeded",
        },
        "WaitForNextCycle": {"Type": "Wait", "SecondsPath": "$.intervalSeconds", "Next": "NextCycle"},
        "NextCycle": {"Type": "Pass", "Next": "AcquireLease"},
        "CycleSucceeded": {"Type": "Succeed"},
    }
    if extra_pass:
        states["Extra"] = {"Type": "Pass", "Next": "CollectMetrics"}
    return states


def tiny_template(
    *,
    extra_pass: bool = False,
    shards: int = 16,
    architecture: str = "x86_64",
    per_job: bool = False,
    kind: str = "EXPRESS",
) -> dict[str, Any]:
    """Seven functions, the cycle state machine (``kind``) as an ``Fn::Join`` with ``Fn::GetAtt`` tokens, one
    dashboard, one alarm, the ingest queue and its event source mapping."""
    text = json.dumps({"StartAt": "AcquireLease", "States": _states(extra_pass)})
    parts: list[Any] = []
    for index, piece in enumerate(re.split(r"@@(\w+)@@", text)):
        parts.append({"Fn::GetAtt": [f"Fn{piece}", "Arn"]} if index % 2 else piece)
    environment = {
        "OSPREY_REGISTRY_SHARDS": str(shards),
        "OSPREY_PER_JOB_METRICS": "true" if per_job else "false",
        "OSPREY_TABLE_NAME": {"Ref": "Table"},
    }
    resources: dict[str, Any] = {
        f"Fn{name}": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": f"osprey_handlers.{name}.handler",
                "MemorySize": memory,
                "Architectures": [architecture],
                "Environment": {"Variables": environment},
            },
        }
        for name, memory in FUNCTIONS.items()
    }
    resources["Cycle"] = {
        "Type": "AWS::StepFunctions::StateMachine",
        "Properties": {
            "DefinitionString": {"Fn::Join": ["", parts]},
            "StateMachineType": kind,
            "LoggingConfiguration": {"Level": "ALL", "IncludeExecutionData": False},
        },
    }
    resources["Dashboard"] = {"Type": "AWS::CloudWatch::Dashboard", "Properties": {}}
    resources["Alarm"] = {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "X"}}
    resources["Queue"] = {"Type": "AWS::SQS::Queue", "Properties": {}}
    resources["Mapping"] = {
        "Type": "AWS::Lambda::EventSourceMapping",
        "Properties": {
            "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]},
            "FunctionName": {"Ref": "Fningest"},
        },
    }
    return {"Resources": resources}


_TOKEN = re.compile(r"\$?\d[\d,]*(?:\.\d+)?|[\u00d7/+()]")


def evaluate_arithmetic(arithmetic: str) -> tuple[float, float]:
    """(the formula left of ``= $``, evaluated with its labels stripped; the dollars right of it)."""
    formula, _, result = arithmetic.rpartition(" = $")
    tokens = _TOKEN.findall(formula)
    expression = " ".join(
        "*" if token == "\u00d7" else token.replace("$", "").replace(",", "") for token in tokens
    )
    value = eval(expression, {"__builtins__": {}}, {})  # only digits and + * / ( ) reach it
    return float(value), float(result.replace(",", ""))
