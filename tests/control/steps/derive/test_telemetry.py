"""Given a derived shard, when its metrics are built, then they match DESIGN §8 and stay per policy unless
per-job metrics are enabled."""

from __future__ import annotations

from osprey_control.steps.derive import derive_shard
from osprey_control.telemetry import shard_metrics
from tests.control.steps.derive.test_shard import NOW, FlakyRules, MemoryStore, Policies, metrics_for, record


def test_shard_metrics_per_policy_with_failures_by_reason() -> None:
    jobs = [
        record("a"),
        record("b"),
        record("c-slow", policy="spot-aware-policy"),
        record("d", policy="ghost"),
    ]
    store = MemoryStore({job.key: 3 for job in jobs})
    result = derive_shard(jobs, metrics_for(*jobs[:3]), Policies(), store, FlakyRules(), now=NOW)
    points = {(p.name, tuple(sorted(p.dimensions.items()))): p for p in shard_metrics(result)}
    assert points[("DerivedPriority", (("Policy", "training-policy"),))].values == (60.0, 60.0)
    assert points[("PriorityChange", (("Policy", "training-policy"),))].values == (10.0, 10.0)
    assert points[("PriorityChange", (("Policy", "spot-aware-policy"),))].values == (-10.0,)
    assert points[("JobsEvaluated", ())].values == (4.0,)
    assert points[("CustomRuleFailures", (("Reason", "timeout"),))].values == (1.0,)
    assert points[("DerivationErrors", (("Kind", "unknown-policy"),))].values == (1.0,)
    assert not any("JobId" in p.dimensions for p in shard_metrics(result))


def test_per_job_metrics_only_when_enabled() -> None:
    job = record("solo")
    result = derive_shard([job], metrics_for(job), Policies(), MemoryStore({job.key: 3}), None, now=NOW)
    per_job = [p for p in shard_metrics(result, per_job=True) if "JobId" in p.dimensions]
    assert {p.name for p in per_job} == {"DerivedPriority", "PriorityChange"}
    assert per_job[0].dimensions == {"Policy": "training-policy", "JobId": "sagemaker#solo"}
