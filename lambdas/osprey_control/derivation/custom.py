"""Custom rules: the invoker interface, the event sent to the user's Lambda, and reading its answer.

The engine never talks to AWS. It hands a :class:`CustomRuleCall` to an injected :class:`CustomRuleInvoker`;
the control plane's Lambda invoker lives with the adapters. The invoker returns the function's decoded JSON
answer or raises :class:`CustomRuleError` (or anything else, counted as ``error``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from osprey_control.derivation.inputs import JobMetrics

__all__ = [
    "EVENT_VERSION",
    "CustomRuleCall",
    "CustomRuleError",
    "CustomRuleInvoker",
    "FailureReason",
    "build_event",
    "parse_answer",
]

EVENT_VERSION = "1"

# Event key → (metric, divisor): utilizations travel as fractions 0..1 (docs/design.md §4 custom rule contract).
_EVENT_NODE_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("gpu_util", "gpu_utilization", 100.0),
    ("memory_bw", "memory_bandwidth_utilization", 100.0),
    ("gpu_mem", "gpu_memory_utilization", 100.0),
    ("interconnect_latency_us", "node_interconnect_latency", 1.0),
    ("spot_interruption_risk", "spot_interruption_risk", 1.0),
)


class FailureReason(StrEnum):
    """Why a custom rule fell back. Published as the ``reason`` dimension of CustomRuleErrors."""

    ERROR = "error"  # the function raised, or the invocation failed
    TIMEOUT = "timeout"
    THROTTLED = "throttled"
    UNPARSABLE = "unparsable"  # not JSON, not a mapping, wrong status code, or not a number
    NON_FINITE = "non-finite"
    MISSING = "missing"  # a mapping without derived_priority
    NOT_INVOKED = "not-invoked"  # no invoker was given (e.g. `osprey derive` without --custom)
    NOT_ALLOWED = "not-allowed"  # the deployment does not allow this function


class CustomRuleError(Exception):
    """Raised by an invoker to say why a rule has no answer."""

    def __init__(self, reason: FailureReason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)


@dataclass(frozen=True, slots=True)
class CustomRuleCall:
    """One invocation: which rule, which function, how long it may take, and the event to send."""

    policy: str
    rule_index: int
    arn: str
    timeout_ms: int
    event: Mapping[str, Any]


class CustomRuleInvoker(Protocol):
    """Invokes a custom rule and returns its decoded answer, or raises :class:`CustomRuleError`."""

    def invoke(self, call: CustomRuleCall) -> Any: ...


def build_event(
    policy: str, job: JobMetrics, current_priority: int, base_priority: float | None
) -> dict[str, Any]:
    """The custom-rule event. Metrics a node has no data for are ``null``, never zero."""
    node_metrics = []
    for node in job.nodes:
        entry: dict[str, Any] = {"node_id": node.node_id}
        for key, metric, divisor in _EVENT_NODE_FIELDS:
            value = node.values.get(metric)
            entry[key] = None if value is None else value / divisor
        node_metrics.append(entry)
    return {
        "version": EVENT_VERSION,
        "policy": policy,
        "job": {"id": job.job_id, "backend": job.backend, "name": job.name},
        "current_priority": current_priority,
        "base_priority": base_priority,
        "node_metrics": node_metrics,
    }


def _decode_json(text: Any) -> Any:
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise CustomRuleError(FailureReason.UNPARSABLE, "answer is not JSON") from None


def parse_answer(answer: Any) -> float:
    """``{"derived_priority": N}`` or ``{"statusCode": 200, "body": "{\\"derived_priority\\": N}"}`` → N.

    Raises :class:`CustomRuleError` with the reason; the engine then uses the rule's fallback. The value is
    returned as answered (not yet clamped).
    """
    answer = _decode_json(answer)
    if isinstance(answer, Mapping) and "statusCode" in answer:
        if answer.get("statusCode") != 200:
            raise CustomRuleError(FailureReason.UNPARSABLE, f"statusCode {answer.get('statusCode')!r}")
        answer = _decode_json(answer.get("body"))
    if not isinstance(answer, Mapping):
        raise CustomRuleError(FailureReason.UNPARSABLE, "answer is not a JSON object")
    value = answer.get("derived_priority")
    if value is None:
        raise CustomRuleError(FailureReason.MISSING, "no derived_priority in the answer")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CustomRuleError(FailureReason.UNPARSABLE, f"derived_priority is {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        raise CustomRuleError(FailureReason.NON_FINITE, "derived_priority is out of range") from None
    if not math.isfinite(number):
        raise CustomRuleError(FailureReason.NON_FINITE, f"derived_priority is {number}")
    return number
