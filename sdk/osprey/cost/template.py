"""What a synthesized Osprey template says about cost: the cycle state machine's states, the functions' memory
and architecture, the registry shards, dashboards and alarms. Pure: takes the template as a dict.

State transitions are counted by walking the Amazon States Language definition the way an execution runs on
the happy path: every state entered is one transition (Task, Choice, Pass, Wait, Map and the terminal
Succeed/Fail alike), a ``Map`` state is one transition plus, for each iteration, the states its item processor
enters. Choice rules are evaluated against a small input document (:class:`Facts`); retries and catches are
not taken (a retry is one more transition each).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TemplateError", "TemplateFacts", "read_template"]

CYCLE_STATE_MACHINE_START = "AcquireLease"
_MAX_STEPS = 100_000


class TemplateError(ValueError):
    """The template lacks what the cost model needs (named in the message)."""


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    logical_id: str
    handler: str
    memory_mb: int
    architecture: str  # x86_64 | arm64
    environment: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Facts:
    """The input document the Choice rules see, plus how many iterations each Map state runs."""

    document: Mapping[str, Any]
    map_iterations: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CycleWalk:
    """The states one cycle enters, in order, and the Lambda functions its Tasks invoke (logical ids)."""

    states: tuple[str, ...]
    invocations: tuple[str, ...]

    @property
    def transitions(self) -> int:
        return len(self.states)


def _join(value: Any) -> str:
    """A DefinitionString: a plain string or ``Fn::Join`` of strings and tokens; a token becomes the logical
    id it names (``{"Fn::GetAtt": ["Fn", "Arn"]}`` -> ``Fn``), which keeps the JSON parseable."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_join(part) for part in parts)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    return "token"


def definition_of(resource: Mapping[str, Any]) -> dict[str, Any]:
    """The parsed ASL definition of an ``AWS::StepFunctions::StateMachine`` resource."""
    properties = resource.get("Properties", {})
    if "Definition" in properties:
        return dict(properties["Definition"])
    text = _join(properties.get("DefinitionString"))
    for name, value in (properties.get("DefinitionSubstitutions") or {}).items():
        text = text.replace("${" + name + "}", _join(value))
    try:
        parsed: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as error:
        raise TemplateError(f"state machine definition is not JSON: {error}") from error
    return parsed


def _path(document: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    node: Any = document
    for part in path.removeprefix("$").strip(".").split("."):
        if not part:
            continue
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _matches(rule: Mapping[str, Any], document: Mapping[str, Any]) -> bool:
    if "And" in rule:
        return all(_matches(part, document) for part in rule["And"])
    if "Or" in rule:
        return any(_matches(part, document) for part in rule["Or"])
    if "Not" in rule:
        return not _matches(rule["Not"], document)
    present, value = _path(document, str(rule.get("Variable", "$")))
    if "IsPresent" in rule:
        return present is bool(rule["IsPresent"])
    if not present:
        return False
    for operator, expected in rule.items():
        if operator in ("Variable", "Next"):
            continue
        if operator in ("BooleanEquals", "StringEquals", "NumericEquals"):
            return bool(value == expected)
        if operator == "NumericGreaterThan":
            return isinstance(value, int | float) and value > expected
        if operator == "NumericLessThan":
            return isinstance(value, int | float) and value < expected
        if operator == "NumericGreaterThanEquals":
            return isinstance(value, int | float) and value >= expected
        if operator == "NumericLessThanEquals":
            return isinstance(value, int | float) and value <= expected
        raise TemplateError(f"Choice operator {operator} is not supported by the cost walk")
    return False


def _function_of(state: Mapping[str, Any]) -> str | None:
    """A Task's target: ``FunctionName`` of a ``lambda:invoke`` integration, else its ``Resource`` (the function
    ARN token, i.e. the function's logical id once :func:`definition_of` has resolved it)."""
    if state.get("Type") != "Task":
        return None
    resource = str(state.get("Resource", ""))
    if "lambda:invoke" in resource:
        name = (state.get("Parameters") or {}).get("FunctionName")
        return str(name) if name is not None else None
    return resource


def walk(definition: Mapping[str, Any], facts: Facts, *, stop_on_return: bool = False) -> CycleWalk:
    """The states entered from ``StartAt`` until a terminal state (or, with ``stop_on_return``, until the
    walk comes back to ``StartAt``: one turn of a loop)."""
    states: list[str] = []
    invocations: list[str] = []
    _walk(definition, facts, states, invocations, stop_on_return=stop_on_return)
    return CycleWalk(tuple(states), tuple(invocations))


def _walk(
    definition: Mapping[str, Any],
    facts: Facts,
    states: list[str],
    invocations: list[str],
    *,
    stop_on_return: bool,
) -> None:
    all_states: Mapping[str, Any] = definition["States"]
    start = str(definition["StartAt"])
    name: str | None = start
    while name is not None:
        if len(states) > _MAX_STEPS:
            raise TemplateError(f"the walk from {start} does not end (a loop the facts never leave)")
        if stop_on_return and name == start and states:
            return
        state = all_states[name]
        states.append(name)
        function = _function_of(state)
        if function is not None:
            invocations.append(function)
        kind = state.get("Type")
        if kind == "Map":
            processor = state.get("ItemProcessor") or state.get("Iterator")
            for _ in range(facts.map_iterations.get(name, 0)):
                _walk(processor, facts, states, invocations, stop_on_return=False)
        if kind == "Choice":
            name = next(
                (str(rule["Next"]) for rule in state.get("Choices", ()) if _matches(rule, facts.document)),
                state.get("Default"),
            )
            if name is None:
                raise TemplateError(f"Choice state {states[-1]} has no matching rule and no Default")
        elif state.get("End") or kind in ("Succeed", "Fail"):
            name = None
        else:
            name = str(state["Next"])


@dataclass(frozen=True, slots=True)
class TemplateFacts:
    """Everything the cost model reads from one template."""

    cycle_definition: dict[str, Any]
    functions: dict[str, FunctionInfo]
    dashboards: int
    alarm_metrics: int
    alarms: int
    queues: int
    sqs_event_sources: int
    cycle_log_level: str  # ALL | ERROR | FATAL | OFF: what the cycle's execution log records
    cycle_type: str = "STANDARD"  # STANDARD (billed per transition) | EXPRESS (per request and duration)

    def map_concurrency(self, state: str) -> int | None:
        """The ``MaxConcurrency`` of the cycle's Map state ``state`` (None: unbounded or no such state)."""
        found = _find_state(self.cycle_definition, state)
        value = (found or {}).get("MaxConcurrency")
        return int(value) if value else None

    def function_by_handler(self, module: str) -> FunctionInfo:
        for info in self.functions.values():
            if info.handler.startswith(f"osprey_handlers.{module}."):
                return info
        raise TemplateError(f"no AWS::Lambda::Function with handler osprey_handlers.{module}.*")

    def setting(self, module: str, variable: str) -> str:
        value = self.function_by_handler(module).environment.get(variable)
        if value is None:
            raise TemplateError(f"the {module} function has no environment variable {variable}")
        return value


def read_template(template: Mapping[str, Any]) -> TemplateFacts:
    """The cycle state machine (the one starting at ``AcquireLease``), functions, dashboards and alarms."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    functions: dict[str, FunctionInfo] = {}
    cycle: dict[str, Any] | None = None
    dashboards = alarms = alarm_metrics = queues = sqs_event_sources = 0
    log_level = "OFF"
    cycle_type = "STANDARD"
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        properties = resource.get("Properties") or {}
        if kind == "AWS::Lambda::Function":
            variables = (properties.get("Environment") or {}).get("Variables") or {}
            functions[logical_id] = FunctionInfo(
                logical_id,
                str(properties.get("Handler", "")),
                int(properties.get("MemorySize", 128)),
                str((properties.get("Architectures") or ["x86_64"])[0]),
                {key: value for key, value in variables.items() if isinstance(value, str)},
            )
        elif kind == "AWS::StepFunctions::StateMachine":
            definition = definition_of(resource)
            if definition.get("StartAt") == CYCLE_STATE_MACHINE_START:
                cycle = definition
                log_level = str((properties.get("LoggingConfiguration") or {}).get("Level", "OFF"))
                cycle_type = str(properties.get("StateMachineType", "STANDARD"))
        elif kind == "AWS::CloudWatch::Dashboard":
            dashboards += 1
        elif kind == "AWS::CloudWatch::Alarm":
            alarms += 1
            metrics = properties.get("Metrics")
            # A metric-math or Metrics Insights alarm without MetricStat is counted as one metric.
            alarm_metrics += max(1, sum(1 for item in metrics if "MetricStat" in item)) if metrics else 1
        elif kind == "AWS::SQS::Queue":
            queues += 1
        elif kind == "AWS::Lambda::EventSourceMapping":
            source = _join(properties.get("EventSourceArn", ""))
            if (resources.get(source) or {}).get("Type") == "AWS::SQS::Queue" or ":sqs:" in source:
                sqs_event_sources += 1
    if cycle is None:
        raise TemplateError(
            f"no AWS::StepFunctions::StateMachine whose definition starts at {CYCLE_STATE_MACHINE_START}"
        )
    return TemplateFacts(
        cycle, functions, dashboards, alarm_metrics, alarms, queues, sqs_event_sources, log_level, cycle_type
    )


def _find_state(definition: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for state_name, state in (definition.get("States") or {}).items():
        if state_name == name:
            return dict(state)
        for nested in ("ItemProcessor", "Iterator"):
            if nested in state and (found := _find_state(state[nested], name)) is not None:
                return found
    return None
