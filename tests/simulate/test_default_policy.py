"""The shipped default policy orders a queue the way docs/scheduling.md says it does: short and small jobs
first, aging so nothing starves, running jobs lifted above the queue, and noise that moves nothing."""

from __future__ import annotations

from osprey.simulate.runner import load_default_policy
from osprey_control.derivation import JobMetrics, NodeMetrics, compile_policy, derive
from osprey_control.derivation.job_signals import job_level_values
from osprey_control.policy import Metric
from osprey_control.policy.model import BuiltinRule

POLICY = load_default_policy()
COMPILED = compile_policy(POLICY)


def _target(
    *,
    remaining_s: float,
    gpus: int,
    waited_s: float = 0.0,
    held_gpu_h: float = 0.0,
    util: float | None = None,
) -> float:
    nodes = () if util is None else (NodeMetrics("i-1", {"gpu_utilization": util}),)
    values = job_level_values(
        queue_wait_s=waited_s, attained_gpu_hours=held_gpu_h, remaining_s=remaining_s, requested_gpus=gpus
    )
    decision = derive(COMPILED, JobMetrics("j", nodes, values), COMPILED.initial_priority)
    assert decision.target is not None  # every job has job-level data
    return decision.target


def test_it_reads_the_job_level_signals_a_queued_job_has() -> None:
    metrics = {rule.metric for rule in POLICY.spec.derivation_rules if isinstance(rule, BuiltinRule)}
    assert {
        Metric.REMAINING_TIME,
        Metric.REQUESTED_GPUS,
        Metric.QUEUE_WAIT,
        Metric.ATTAINED_SERVICE,
        Metric.RESERVATION,
    } <= metrics
    assert POLICY.spec.deadband >= 3  # +-3 points of metric noise change nothing
    assert abs(POLICY.spec.weight_sum - 1.0) < 1e-9


def test_a_short_small_job_is_ahead_of_a_long_large_one_in_the_queue() -> None:
    short_small = _target(remaining_s=3600, gpus=8)
    long_large = _target(remaining_s=20 * 3600, gpus=512)
    assert short_small > long_large + 5


def test_aging_lets_a_long_job_catch_up_with_fresh_short_ones() -> None:
    fresh_short = _target(remaining_s=3600, gpus=8)
    aged_long = _target(remaining_s=20 * 3600, gpus=8, waited_s=4 * 3600)
    assert aged_long >= fresh_short


def test_a_running_job_is_lifted_above_a_queued_job_with_the_same_signals() -> None:
    queued = _target(remaining_s=3600, gpus=64)
    running = _target(remaining_s=3600, gpus=64, held_gpu_h=2.0, util=60)
    assert running >= queued + 25
