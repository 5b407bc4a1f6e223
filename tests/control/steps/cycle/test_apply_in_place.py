"""Issue 28 item 5 through the apply step and the registry: a Workload PATCH that landed but whose answer
was lost, retried into a 409, must be recorded applied; otherwise ``applied_priority`` stays at the old value
and a later return of the derived priority to it is never written (derived == applied: "nothing pending")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from osprey_control.backends import Outcome
from osprey_control.backends.eks import EksApplier, KubernetesClient
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobKey, JobStatus
from osprey_control.registry.dynamodb import JobRegistry
from osprey_control.registry.observation import JobObservation
from osprey_control.steps.apply import apply_cycle
from tests.control.backends.eks.fake_k8s import FakeKubernetes
from tests.control.backends.eks.objects import KUEUE, add_job, add_workload
from tests.control.steps.cycle.conftest import NOW

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads"


def _derive(registry: JobRegistry, key: JobKey, priority: int, minutes: int) -> None:
    """What the derive step records: a new derived priority, not yet applied."""
    record = registry.get(key)
    assert record is not None
    registry.record_decision(
        key, {"reason": "derived"}, priority, record.version, NOW + timedelta(minutes=minutes)
    )


def test_a_lost_answer_is_recorded_applied_and_a_return_to_the_earlier_priority_is_written(
    aws: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    registry: JobRegistry = aws["registry"]
    applier = EksApplier(lambda cluster: k8s_client)
    # Given a Kueue-managed EKS job whose Workload Osprey set to 400, recorded applied at 40
    job = add_job(fake_k8s, "train")
    name = add_workload(fake_k8s, job, priority=100)["metadata"]["name"]
    key = JobKey(Backend.EKS, "ml/train")
    registry.apply_observation(
        JobObservation(
            backend=Backend.EKS,
            native_id="ml/train",
            name="train",
            block=parse_block({"priority_derivation_profile": "training-policy"}),
            status=JobStatus.RUNNING,
            event_time=NOW - timedelta(minutes=5),
            cluster="gpu",
        )
    )
    _derive(registry, key, 40, 0)
    apply_cycle([{"shard": None}], registry, [applier], now=NOW)
    assert fake_k8s.stored(KUEUE, "workloads", "ml", name)["spec"]["priority"] == 400
    assert registry.get(key).applied_priority == 40  # type: ignore[union-attr]

    # When the derived priority moves to 50 and the Workload PATCH lands but its answer is lost (the client
    # retries it with the same resourceVersion: 409; the applier re-reads and finds 500)
    _derive(registry, key, 50, 1)
    fake_k8s.lose_answer("PATCH", f"{WORKLOADS}/{name}")
    report = apply_cycle([{"shard": None}], registry, [applier], now=NOW + timedelta(minutes=1))

    # Then the registry records 50 applied, with no failure, and nothing is left pending
    assert [(r.outcome, r.priority) for r in report.results] == [(Outcome.APPLIED, 50)]
    stored = registry.get(key)
    assert stored is not None
    assert (stored.derived_priority, stored.applied_priority, stored.apply_failure) == (50, 50, None)
    assert registry.pending_keys() == []

    # And when the derived priority returns to 40, the next cycle writes it: the Workload holds 400 again
    _derive(registry, key, 40, 2)
    again = apply_cycle([{"shard": None}], registry, [applier], now=NOW + timedelta(minutes=2))
    assert [(r.outcome, r.reason.startswith("patched")) for r in again.results] == [(Outcome.APPLIED, True)]
    assert fake_k8s.stored(KUEUE, "workloads", "ml", name)["spec"]["priority"] == 400
    assert registry.get(key).applied_priority == 40  # type: ignore[union-attr]


def test_a_job_the_old_apply_step_left_skipped_unchanged_gets_its_return_written(
    aws: dict[str, Any], fake_k8s: FakeKubernetes, k8s_client: KubernetesClient
) -> None:
    registry: JobRegistry = aws["registry"]
    applier = EksApplier(lambda cluster: k8s_client)
    # Given a job as the apply step before the fix left it: 40 applied, 50 derived and found in place on the
    # Workload (500), recorded as a permanent "skipped: unchanged" failure
    job = add_job(fake_k8s, "train")
    name = add_workload(fake_k8s, job, priority=100)["metadata"]["name"]
    key = JobKey(Backend.EKS, "ml/train")
    registry.apply_observation(
        JobObservation(
            backend=Backend.EKS,
            native_id="ml/train",
            name="train",
            block=parse_block({"priority_derivation_profile": "training-policy"}),
            status=JobStatus.RUNNING,
            event_time=NOW - timedelta(minutes=5),
            cluster="gpu",
        )
    )
    _derive(registry, key, 40, 0)
    apply_cycle([{"shard": None}], registry, [applier], now=NOW)
    _derive(registry, key, 50, 1)
    k8s_client.merge_patch(f"{WORKLOADS}/{name}", {"spec": {"priority": 500}})
    reason = f"skipped: unchanged (set by a concurrent writer): workload ml/{name}"
    registry.record_apply_failure(key, 50, reason, permanent=True, now=NOW + timedelta(minutes=1))

    # When the job is read, Then it reads as 50 applied (what the backend holds), with no failure
    stored = registry.get(key)
    assert stored is not None
    assert (stored.applied_priority, stored.applied_at, stored.apply_failure) == (
        50, NOW + timedelta(minutes=1), None)  # fmt: skip

    # And when the derived priority returns to 40, the apply step writes it
    _derive(registry, key, 40, 2)
    assert registry.pending_keys() == [key]
    apply_cycle([{"shard": None}], registry, [applier], now=NOW + timedelta(minutes=2))
    assert fake_k8s.stored(KUEUE, "workloads", "ml", name)["spec"]["priority"] == 400
    assert registry.get(key).applied_priority == 40  # type: ignore[union-attr]
