"""Which policy metrics a job's policy reads, so the collector asks CloudWatch for those series only.

Every series costs one GetMetricData metric on every read, so a series no rule reads is money for nothing:
a policy without ``memory_bandwidth_utilization`` needs no ``nvidia_smi_utilization_memory``, one without
``remaining_time`` needs no progress series. A policy with a custom rule needs every CloudWatch node metric:
its Lambda receives them all in ``node_metrics`` (``osprey_control.derivation.custom.build_event``).

    >>> needs = needs_from_policies(policies)  # doctest: +SKIP
    >>> collect(records, client=cloudwatch, needs=needs)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

from osprey_control.derivation import CompiledPolicy, PolicyLookup, compile_policy
from osprey_control.metrics.queries import CLOUDWATCH_NODE_METRICS
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.registry import JobRecord

__all__ = ["metrics_needed", "needs_from_policies"]


def metrics_needed(policy: CompiledPolicy | PriorityDerivationPolicy) -> frozenset[str]:
    """The metric names ``policy``'s rules read: its built-in rules' metrics, plus every CloudWatch node metric
    when it has a custom rule (weighted or stage)."""
    compiled = policy if isinstance(policy, CompiledPolicy) else compile_policy(policy)
    metrics = {rule.metric for rule in compiled.builtins}
    if compiled.weighted_customs or compiled.stages:
        metrics |= CLOUDWATCH_NODE_METRICS
    if compiled.reads_reservation:
        metrics.add("remaining_time")  # the reservation predicts ends from the runtime's progress reports
    return frozenset(metrics)


def needs_from_policies(policies: PolicyLookup) -> Callable[[JobRecord], frozenset[str]]:
    """``needs`` for :func:`osprey_control.metrics.collect`: each job's policy's metrics (looked up once per
    policy name per call site). A job whose policy is unknown needs nothing: the derive step does not derive it
    (``unknown-policy``), so its series would be read for nothing."""
    cache: dict[str, frozenset[str]] = {}

    def needs(record: JobRecord) -> frozenset[str]:
        name = record.policy
        if name not in cache:
            try:
                cache[name] = metrics_needed(policies.get(name))
            except LookupError:
                cache[name] = frozenset()
        return cache[name]

    return needs
