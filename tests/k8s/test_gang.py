"""Gang readiness and each fallback (requeue, serial, fail) against the real API server and the real Kueue, as
the osprey-gang-watch identity of docs/eks.md's RBAC.

The serial and fail fallbacks run the gang watch's own step (:func:`osprey_control.steps.gang_watch.watch_step`,
what the gang watch Lambda calls) on the gang the EKS driver builds (``driver_for(Backend.EKS).gang``), with its
state in a moto registry table. Only the clock is the test's: each step is "called" ``waitSeconds`` after the
last, so a 60 s timeout passes in a few real seconds, while every read and write goes to the real server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from osprey_control.backends import Deployment, driver_for
from osprey_control.backends.eks.gang import KubernetesGang
from osprey_control.gang import Action, GangPhase, GangSettings, WatchJob
from osprey_control.gang.store import GangStore
from osprey_control.policy import GangFallback
from osprey_control.registry import Backend, JobKey
from osprey_control.registry.table import create_table
from osprey_control.steps.gang_watch import WatchResult, watch_step
from tests.k8s import objects
from tests.k8s.cluster import LocalKubernetes
from tests.k8s.objects import KUEUE


def test_gang_readiness_counts_ready_pods_and_a_requeue_goes_through_kueue(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]]
) -> None:
    # Given a 2-worker Job admitted by the real Kueue in a namespace bound as docs/eks.md says
    namespace = objects.namespace(k8s, "gang")
    objects.bind(k8s, rbac, namespace)
    queue = f"cq-{namespace}"
    objects.resource_flavor(k8s, f"flavor-{namespace}")
    objects.cluster_queue(k8s, queue, cpu=2, flavor=f"flavor-{namespace}")
    objects.local_queue(k8s, namespace, "team-a", queue)
    admin = k8s.client()
    owner = objects.job(k8s, namespace, "train", queue="team-a", parallelism=2)
    job_path = f"/apis/batch/v1/namespaces/{namespace}/jobs/train"
    objects.eventually(lambda: admin.get(job_path)["spec"]["suspend"] is False, "Kueue to admit the Job")
    gang = KubernetesGang(k8s.client("osprey-gang-watch"), "Job", namespace, "train", kueue="v1beta2")
    # When one of its two pods is Ready
    first, second = objects.pod(k8s, owner, 0), objects.pod(k8s, owner, 1)
    objects.ready(k8s, namespace, first)
    # Then the gang is 1 of 2
    readiness = gang.readiness()
    assert (readiness.ready_workers, readiness.requested_workers, readiness.finished) == (1, 2, False)
    # When the second is Ready too, it is complete
    objects.ready(k8s, namespace, second)
    assert (gang.readiness().ready_workers, gang.readiness().requested_workers) == (2, 2)
    # When the watch requeues the gang (its fallback after a timeout)
    gang.suspend()
    # Then its Workload is deactivated, Kueue evicts it and suspends the Job again
    [workload] = admin.list(f"/apis/{KUEUE}/namespaces/{namespace}/workloads")
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{workload['metadata']['name']}"
    assert admin.get(path)["spec"]["active"] is False
    objects.eventually(lambda: admin.get(job_path)["spec"]["suspend"] is True, "Kueue to suspend the Job")
    # When the watch resumes it, Kueue admits it again
    gang.resume()
    objects.eventually(lambda: admin.get(job_path)["spec"]["suspend"] is False, "Kueue to re-admit the Job")
    assert admin.get(path)["spec"]["active"] is True


TABLE = "osprey-registry"
T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[GangStore]:
    """The registry table the watch keeps a gang's state in, under moto (the Kubernetes calls are not AWS
    calls: moto does not intercept them)."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield GangStore(TABLE, client=client)


def _admitted_gang(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]], prefix: str
) -> tuple[str, dict[str, Any]]:
    """A namespace bound as docs/eks.md says with 2 CPUs of Kueue quota, a 2-worker Job admitted on all of it,
    and only one of its two pods Ready (the gang never forms)."""
    namespace = objects.namespace(k8s, prefix)
    objects.bind(k8s, rbac, namespace)
    queue = objects.queues(k8s, namespace, cpu=2)
    owner = objects.job(k8s, namespace, "train", queue=queue, parallelism=2)
    admin = k8s.client()
    objects.eventually(lambda: admin.get(_job_path(namespace, "train"))["spec"]["suspend"] is False,
                       "Kueue to admit the Job")  # fmt: skip
    objects.ready(k8s, namespace, objects.pod(k8s, owner, 0))
    objects.pod(k8s, owner, 1)
    return namespace, owner


def _job_path(namespace: str, name: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"


def _watch(
    k8s: LocalKubernetes,
    owner: dict[str, Any],
    fallback: GangFallback,
    store: GangStore,
    *,
    between: Callable[[int], object] = lambda step: None,
) -> list[WatchResult]:
    """The gang watch of ``owner`` as its state machine runs it (step, wait ``waitSeconds``, step ... until
    done), on the gang the EKS driver builds for the osprey-gang-watch identity; ``between(n)`` runs after the
    n-th step (what happens on the cluster during the wait)."""
    meta = owner["metadata"]
    job = WatchJob.model_validate({
        "backend": "eks", "nativeId": f"local/{meta['namespace']}/{meta['name']}/{meta['uid']}",
        "cluster": "local", "kind": owner["kind"],
    })  # fmt: skip
    deployment = Deployment(connectors={"eks": lambda cluster: k8s.client("osprey-gang-watch")})
    gang = driver_for(Backend.EKS).gang(job, deployment)
    settings = GangSettings(timeout_seconds=60, required_min_workers=100, fallback=fallback)
    now, results = T0, []
    for step in range(1, 21):
        result = watch_step(job.key, settings, gang, store, now=now, policy="training-policy")
        results.append(result)
        if result.done:
            return results
        between(step)
        now += timedelta(seconds=result.wait_seconds or 0)
    raise AssertionError("the watch did not end")


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition["type"] == kind:
            return str(condition["status"])
    return None


def test_serial_fallback_leaves_a_gang_past_its_timeout_admitted_and_running(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]], store: GangStore
) -> None:
    # Given an admitted 2-worker Job with only one worker Ready
    namespace, owner = _admitted_gang(k8s, rbac, "serial")
    # When its watch (fallback serial) passes the 60 s timeout
    results = _watch(k8s, owner, GangFallback.SERIAL, store)
    # Then the watch ends in serial without acting, timed out at 1 of 2 workers, and its state is in the registry
    final = results[-1]
    assert (final.state.phase, final.action) == (GangPhase.SERIAL, Action.NONE)
    assert {r.action for r in results} == {Action.NONE}
    assert "1/2" in final.state.reason
    assert (
        store.load(JobKey(Backend.EKS, f"local/{namespace}/train/{owner['metadata']['uid']}"))[0]
        == final.state
    )
    # And Kueue still holds the Job as it was: running (not suspended), its Workload active and admitted
    admin = k8s.client()
    time.sleep(1)  # (what Kueue would do it does within a second here, as the requeue test shows)
    assert admin.get(_job_path(namespace, "train"))["spec"]["suspend"] is False
    workload = objects.workload_of(k8s, owner)
    assert workload["spec"].get("active", True) is True
    assert (_condition(workload, "Admitted"), _condition(workload, "Evicted")) == ("True", None)


def test_fail_fallback_suspends_the_job_for_good_and_kueue_gives_its_quota_to_the_next(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]], store: GangStore
) -> None:
    # Given an admitted 2-worker Job holding all of its queue's 2 CPUs with only one worker Ready, and a second
    # Job of the same priority waiting for that quota
    namespace, owner = _admitted_gang(k8s, rbac, "fail")
    waiting = objects.job(k8s, namespace, "next", queue="team-a", parallelism=2)
    admin = k8s.client()
    waiting_workload = objects.workload_of(k8s, waiting)
    assert _condition(waiting_workload, "Admitted") != "True"
    # When its watch (fallback fail) passes the 60 s timeout
    results = _watch(k8s, owner, GangFallback.FAIL, store)
    # Then the watch ends failed, having stopped the gang once
    final = results[-1]
    assert (final.state.phase, final.action) == (GangPhase.FAILED, Action.STOP)
    assert [r.action for r in results].count(Action.STOP) == 1
    # And the Job's Workload is inactive; Kueue evicts it and suspends the Job (the Job and its pods' records
    # stay: nothing is deleted)
    workload_path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{objects.workload_of(k8s, owner)['metadata']['name']}"
    assert admin.get(workload_path)["spec"]["active"] is False
    objects.eventually(lambda: admin.get(_job_path(namespace, "train"))["spec"]["suspend"] is True,
                       "Kueue to suspend the failed gang")  # fmt: skip
    # And its quota is released: Kueue admits the waiting Job on the freed CPUs
    objects.eventually(lambda: admin.get(_job_path(namespace, "next"))["spec"]["suspend"] is False,
                       "Kueue to admit the waiting Job on the freed quota")  # fmt: skip
    assert _condition(admin.get(workload_path), "Admitted") == "False"
    # And it is for good: the watch is over, a later step does nothing, and Kueue leaves the Job suspended
    again = _watch(k8s, owner, GangFallback.FAIL, store)
    assert [(r.done, r.action) for r in again] == [(True, Action.NONE)]
    time.sleep(1)
    assert admin.get(_job_path(namespace, "train"))["spec"]["suspend"] is True
    assert admin.get(workload_path)["spec"]["active"] is False


def test_a_training_job_that_finishes_while_its_gang_waits_ends_the_watch_without_a_fallback(
    k8s: LocalKubernetes, rbac: list[dict[str, Any]], store: GangStore
) -> None:
    # Given an admitted 2-pod PyTorchJob (Master + Worker) whose pods are not Ready
    namespace = objects.namespace(k8s, "ended")
    objects.bind(k8s, rbac, namespace)
    queue = objects.queues(k8s, namespace, cpu=2)
    owner = objects.pytorchjob(k8s, namespace, "train", queue=queue)
    admin = k8s.client()
    job_path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/train"
    objects.eventually(lambda: admin.get(job_path)["spec"]["runPolicy"]["suspend"] is False,
                       "Kueue to admit the PyTorchJob")  # fmt: skip

    def succeed(step: int) -> None:
        if step == 2:  # what the training operator writes when the job succeeds
            admin.request("PATCH", f"{job_path}/status", body={"status": {"conditions": [
                {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}]}},
                content_type="application/merge-patch+json")  # fmt: skip

    # When its watch (fallback fail) runs and the job succeeds before the timeout
    results = _watch(k8s, owner, GangFallback.FAIL, store, between=succeed)
    # Then the watch ends on the job's own end, at the third step, having done nothing to it
    final = results[-1]
    assert (len(results), final.state.phase, final.action) == (3, GangPhase.ENDED, Action.NONE)
    assert final.state.reason == "job Succeeded"
    assert {r.action for r in results} == {Action.NONE}
    # And the real Kueue finishes its Workload (it stays active: Osprey never deactivated it)
    path = f"/apis/{KUEUE}/namespaces/{namespace}/workloads/{objects.workload_of(k8s, owner)['metadata']['name']}"
    objects.eventually(
        lambda: _condition(admin.get(path), "Finished") == "True", "Kueue to finish the Workload"
    )
    assert admin.get(path)["spec"].get("active", True) is True
