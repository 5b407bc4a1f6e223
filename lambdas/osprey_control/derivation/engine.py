"""The derivation engine: docs/design.md §4, to the letter, with a per-rule explanation.

Pure Python. A policy is compiled once into flat tuples (:class:`CompiledPolicy`) so a cycle over thousands of
jobs does not walk pydantic models; :func:`derive` then turns one job's metrics and its applied priority into a
:class:`Decision`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from osprey_control.derivation.custom import (
    CustomRuleCall,
    CustomRuleError,
    CustomRuleInvoker,
    FailureReason,
    build_event,
    parse_answer,
)
from osprey_control.derivation.inputs import JobMetrics
from osprey_control.policy import Aggregation, BuiltinRule, CustomRuleEntry, PriorityDerivationPolicy, Scaling

__all__ = [
    "CompiledPolicy",
    "Decision",
    "PolicyLookup",
    "Reason",
    "RuleExplanation",
    "compile_policy",
    "derive",
]

Reason = Literal["derived", "damped", "deadband", "no-data", "guarded", "held"]

# Small ints instead of enum members on the hot path: enum attribute lookups cost more than the arithmetic.
_LINEAR, _LOG, _INVERSE = 0, 1, 2
_SCALING_CODES = {Scaling.LINEAR: _LINEAR, Scaling.LOGARITHMIC: _LOG, Scaling.INVERSE: _INVERSE}
_MEAN, _MIN, _MAX = 0, 1, 2
_AGGREGATION_CODES = {Aggregation.MEAN: _MEAN, Aggregation.MIN: _MIN, Aggregation.MAX: _MAX}


@dataclass(frozen=True, slots=True)
class _CompiledBuiltin:
    index: int
    metric: str
    job_level: bool
    weight: float
    lo: float
    span: float
    scaling: int
    min_priority: float
    priority_span: float
    aggregation: int


@dataclass(frozen=True, slots=True)
class _CompiledCustom:
    index: int
    arn: str
    weight: float | None
    fallback: float
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    """A policy flattened for evaluation. Build it with :func:`compile_policy`."""

    name: str
    builtins: tuple[_CompiledBuiltin, ...]
    weighted_customs: tuple[_CompiledCustom, ...]
    stages: tuple[_CompiledCustom, ...]
    rule_count: int
    initial_priority: int
    max_priority_change: int
    deadband: float
    # The reservation signal's settings (policy ``spec.reservation``); read by whoever computes the signal.
    reads_reservation: bool = False
    capacity_gpus: int | None = None
    yield_fraction: float = 0.0
    # The guard's settings (policy ``spec.guard``); read by whoever runs the guard (osprey_control.metrics.guard),
    # never by the engine, which only honours the priority a guard pinned (``JobMetrics.pinned_priority``).
    guard_enabled: bool = True
    guard_horizon_s: float = 21600.0
    guard_samples: int = 3
    guard_goodput_tolerance: float = 0.002

    @property
    def lets_jobs_yield(self) -> bool:
        """Its jobs may be marked as yielding to a reservation's head (it reads the signal, yieldFraction > 0)."""
        return self.reads_reservation and self.yield_fraction > 0


class PolicyLookup(Protocol):
    """Compiled policies by name, as the collect and derive steps read them (the deployed ones:
    ``osprey_control.policy_store.PolicySource``); ``get`` raises LookupError for a name not deployed."""

    def get(self, name: str) -> CompiledPolicy: ...


def compile_policy(policy: PriorityDerivationPolicy) -> CompiledPolicy:
    builtins: list[_CompiledBuiltin] = []
    weighted: list[_CompiledCustom] = []
    stages: list[_CompiledCustom] = []
    for index, rule in enumerate(policy.spec.derivation_rules):
        if isinstance(rule, BuiltinRule):
            lo, hi = rule.effective_range
            builtins.append(
                _CompiledBuiltin(
                    index=index,
                    metric=rule.metric.value,
                    job_level=rule.metric.job_level,
                    weight=rule.weight,
                    lo=lo,
                    span=hi - lo,
                    scaling=_SCALING_CODES[rule.scaling],
                    min_priority=rule.min_priority,
                    priority_span=rule.max_priority - rule.min_priority,
                    aggregation=_AGGREGATION_CODES[rule.aggregation],
                )
            )
        elif isinstance(rule, CustomRuleEntry):
            custom = rule.custom
            compiled = _CompiledCustom(
                index, custom.arn, custom.weight, custom.fallback_priority, custom.timeout_ms
            )
            (weighted if custom.weight is not None else stages).append(compiled)
    spec = policy.spec
    return CompiledPolicy(
        name=policy.name,
        builtins=tuple(builtins),
        weighted_customs=tuple(weighted),
        stages=tuple(stages),
        rule_count=len(spec.derivation_rules),
        initial_priority=spec.initial_priority,
        max_priority_change=spec.max_priority_change,
        deadband=spec.deadband,
        reads_reservation=spec.reads_reservation,
        capacity_gpus=spec.reservation.capacity_gpus,
        yield_fraction=spec.reservation.yield_fraction,
        guard_enabled=spec.guard.enabled,
        guard_horizon_s=float(spec.guard.horizon_seconds),
        guard_samples=spec.guard.samples,
        guard_goodput_tolerance=spec.guard.goodput_tolerance,
    )


@dataclass(slots=True)
class RuleExplanation:
    """How one rule contributed. ``outcome``: ``used`` / ``no-data`` (built-in), ``answered`` /
    ``fallback:<reason>`` (custom). ``value`` is the aggregated raw metric, or the custom rule's answer."""

    index: int
    kind: Literal["builtin", "custom"]
    metric: str | None
    arn: str | None
    value: float | None
    normalized: float | None
    score: float | None
    priority: float | None
    weight: float | None
    used: bool
    outcome: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"index": self.index, "kind": self.kind}
        if self.kind == "builtin":
            entry["metric"] = self.metric
        else:
            entry["arn"] = self.arn
        entry.update(
            value=self.value,
            normalized=self.normalized,
            score=self.score,
            priority=self.priority,
            weight=self.weight,
            used=self.used,
            outcome=self.outcome,
        )
        return entry


# Decision and RuleExplanation are plain slotted dataclasses, not frozen ones: a cycle builds one per job and
# one per rule per job, and a frozen dataclass's __init__ costs ten times more (docs/performance.md). Treat
# them as read-only.
@dataclass(slots=True)
class Decision:
    """The result for one job. ``target`` is clamped but undamped (None on no-data); ``base`` is the
    weighted mean of the components (None without any)."""

    policy: str
    job_id: str
    priority: int
    previous: int
    target: float | None
    base: float | None
    reason: Reason
    rules: tuple[RuleExplanation, ...]

    @property
    def changed(self) -> bool:
        return self.priority != self.previous

    def to_dict(self) -> dict[str, Any]:
        return {
            "priority": self.priority,
            "previous": self.previous,
            "target": self.target,
            "base": self.base,
            "reason": self.reason,
            "rules": [rule.to_dict() for rule in self.rules],
        }


def _clamp(value: float, low: float, high: float) -> float:
    return low if value < low else high if value > high else value


def _mean(values: list[float]) -> float:
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # finite values whose sum exceeds float range: scale first
        count = len(values)
        return math.fsum(value / count for value in values)


def _skipped(rule: _CompiledBuiltin, outcome: str, detail: str = "") -> RuleExplanation:
    return RuleExplanation(
        rule.index, "builtin", rule.metric, None, None, None, None, None, rule.weight, False, outcome, detail
    )


def _evaluate_builtin(rule: _CompiledBuiltin, job: JobMetrics) -> RuleExplanation:
    metric = rule.metric
    isfinite = math.isfinite
    try:
        # A NaN or infinite sample is a gap in the data, never a value (docs/design.md §3: missing is never zero).
        if rule.job_level:
            single = job.job_values.get(metric)
            values = [] if single is None or not isfinite(single) else [single]
        else:
            values = [
                node.values[metric]
                for node in job.nodes
                if metric in node.values and isfinite(node.values[metric])
            ]
    except TypeError as error:  # a collector handed over something that is not a number
        return _skipped(rule, "invalid-data", str(error))
    if not values:
        return _skipped(rule, "no-data")
    aggregation = rule.aggregation
    value = _mean(values) if aggregation == _MEAN else min(values) if aggregation == _MIN else max(values)
    x = (value - rule.lo) / rule.span
    x = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
    scaling = rule.scaling
    if scaling == _LINEAR:
        score = x
    elif scaling == _LOG:
        score = math.log10(1.0 + 9.0 * x)
    else:
        score = 1.0 - x
    priority = rule.min_priority + rule.priority_span * score
    return RuleExplanation(
        rule.index, "builtin", metric, None, value, x, score, priority, rule.weight, True, "used"
    )


def _evaluate_custom(
    rule: _CompiledCustom,
    *,
    policy: CompiledPolicy,
    job: JobMetrics,
    previous: int,
    base_priority: float | None,
    invoker: CustomRuleInvoker | None,
) -> RuleExplanation:
    answer: float | None = None
    outcome = "answered"
    detail = ""
    if invoker is None:
        outcome = f"fallback:{FailureReason.NOT_INVOKED.value}"
    else:
        try:
            event = build_event(policy.name, job, previous, base_priority)
            call = CustomRuleCall(policy.name, rule.index, rule.arn, rule.timeout_ms, event)
            answer = parse_answer(invoker.invoke(call))
        except CustomRuleError as failure:
            outcome, detail = f"fallback:{failure.reason.value}", failure.detail
        except Exception as error:  # a broken rule must never stop a cycle (docs/design.md §4.5)
            outcome, detail = f"fallback:{FailureReason.ERROR.value}", f"{type(error).__name__}: {error}"
    priority = rule.fallback if answer is None else _clamp(answer, 0.0, 100.0)
    return RuleExplanation(
        rule.index, "custom", None, rule.arn, answer, None, None, priority, rule.weight, True, outcome, detail
    )


def _weighted_mean(explanations: Sequence[RuleExplanation]) -> float | None:
    total_weight = 0.0
    total = 0.0
    for explanation in explanations:
        if explanation.used and explanation.weight is not None and explanation.priority is not None:
            total_weight += explanation.weight
            total += explanation.weight * explanation.priority
    return total / total_weight if total_weight > 0 else None


def _damp(policy: CompiledPolicy, previous: int, target: float) -> tuple[int, Reason]:
    delta = target - previous
    if abs(delta) < policy.deadband:
        return previous, "deadband"
    limit = policy.max_priority_change
    step = _clamp(delta, -limit, limit)
    # maxPriorityChange is an integer (docs/design.md §3) and so is previous: previous ± limit is exact and rounding
    # half up can never carry the applied value past it, so |applied - previous| <= limit needs no cap.
    applied = math.floor(previous + step + 0.5)
    return applied, ("damped" if step != delta else "derived")


def derive(
    policy: CompiledPolicy | PriorityDerivationPolicy,
    job: JobMetrics,
    previous: int | None = None,
    invoker: CustomRuleInvoker | None = None,
) -> Decision:
    """Derive the next applied priority for ``job``.

    ``previous`` is the applied priority (an integer 0..100); None means never derived, so the policy's
    ``initialPriority``. Custom rules go through ``invoker``; without one they use their fallback.
    """
    compiled = policy if isinstance(policy, CompiledPolicy) else compile_policy(policy)
    prev = compiled.initial_priority if previous is None else previous
    if isinstance(prev, bool) or not isinstance(prev, int) or not 0 <= prev <= 100:
        raise ValueError(f"previous priority must be an integer 0..100, got {prev!r}")

    explanations: list[RuleExplanation] = [_evaluate_builtin(rule, job) for rule in compiled.builtins]
    builtin_base = _weighted_mean(explanations)
    if job.pinned_priority is not None:
        # The pool's guard stood down to the backend's native order (osprey_control.guard): the job's native
        # priority, undamped and past the deadband, and no custom rule invoked for a value that is not used.
        pinned = int(_clamp(job.pinned_priority, 0, 100))
        return Decision(
            compiled.name,
            job.job_id,
            pinned,
            prev,
            float(pinned),
            builtin_base,
            "guarded",
            tuple(explanations),
        )
    if compiled.weighted_customs:
        for custom in compiled.weighted_customs:
            explanations.append(
                _evaluate_custom(
                    custom,
                    policy=compiled,
                    job=job,
                    previous=prev,
                    base_priority=builtin_base,
                    invoker=invoker,
                )
            )
        # Sum the components in policy order: floating-point sums depend on their order, and a last-bit
        # difference in the target decides whether a step exactly at maxPriorityChange reads "damped".
        explanations.sort(key=lambda explanation: explanation.index)
        base = _weighted_mean(explanations)
    else:
        base = builtin_base

    running = prev if base is None else base
    for stage in compiled.stages:
        explanation = _evaluate_custom(
            stage, policy=compiled, job=job, previous=prev, base_priority=running, invoker=invoker
        )
        explanations.append(explanation)
        running = explanation.priority if explanation.priority is not None else running

    explanations.sort(key=lambda explanation: explanation.index)
    if base is None and not compiled.stages:
        applied, reason = _floored(job, prev, "no-data")
        return Decision(compiled.name, job.job_id, applied, prev, None, None, reason, tuple(explanations))
    target = _clamp(running, 0.0, 100.0)
    applied, reason = _floored(job, *_damp(compiled, prev, target))
    return Decision(compiled.name, job.job_id, applied, prev, target, base, reason, tuple(explanations))


def _floored(job: JobMetrics, applied: int, reason: Reason) -> tuple[int, Reason]:
    # The guard's floor (JobMetrics.priority_floor) is reached at once: damping it would leave the job below
    # queued work for a few cycles, which on Kueue is exactly the preemption the floor is there to prevent.
    if job.priority_floor is None:
        return applied, reason
    floor = int(_clamp(job.priority_floor, 0, 100))
    return (floor, "held") if applied < floor else (applied, reason)
