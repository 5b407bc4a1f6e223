"""Gangs on Slurm (docs/design.md §7): readiness, and the fallbacks Slurm allows.

A Slurm allocation is all-or-nothing: slurmctld starts a job only once every node it needs is allocated, so
the gang is ready when the job is RUNNING (``node_count`` of ``node_count`` workers). Before that, and while
its nodes boot (``CONFIGURING``: a ParallelCluster dynamic node being launched), no worker is up. slurmrestd
v0.0.38 exposes no job steps without slurmdbd, so "the first step started on every node" is read as the
batch step running (the job RUNNING and no longer CONFIGURING).

Fallbacks: ``serial`` changes nothing; ``fail`` cancels the job (``DELETE /job/{id}``), only when its comment
carries the Osprey marker; ``requeue`` is not offered (the v0.0.38 API has no requeue or hold-and-release
call), so it is applied as ``serial``, as on SageMaker and Batch, and the reason is recorded.
"""

from __future__ import annotations

from osprey_control.backends.slurm.client import SlurmClient
from osprey_control.backends.slurm.discovery import job_state, parse_native_id
from osprey_control.backends.slurm.marker import block_from_comment
from osprey_control.gang import NoRequeue, NotOptedInError, Readiness

__all__ = ["SlurmGang", "slurm_readiness"]

_OVER = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE",
     "PREEMPTED", "REVOKED", "COMPLETING"}
)  # fmt: skip


def _nodes(job: dict[str, object]) -> int:
    count = job.get("node_count")
    if isinstance(count, dict):
        count = count.get("number")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def slurm_readiness(client: SlurmClient, job_id: int) -> Readiness:
    """Workers up out of requested (the job's node count) for one Slurm job."""
    job = client.job(job_id)
    if job is None:
        return Readiness(0, 0, finished=True, detail="slurmctld no longer knows the job")
    state, nodes = job_state(job), _nodes(job)
    if state in _OVER:
        return Readiness(0, nodes, finished=True, detail=f"job {state}")
    ready = nodes if state == "RUNNING" else 0
    return Readiness(ready, nodes, detail=f"job {state} on {nodes} node(s)")


class SlurmGang(NoRequeue):
    """The :class:`~osprey_control.gang.GangBackend` for a ``slurm`` job (``<cluster>/<job id>``)."""

    def __init__(self, client: SlurmClient, native_id: str) -> None:
        self._client = client
        self.cluster, self.job_id = parse_native_id(native_id)

    def readiness(self) -> Readiness:
        return slurm_readiness(self._client, self.job_id)

    def stop(self) -> None:
        job = self._client.job(self.job_id)
        if job is None:
            return
        if block_from_comment(str(job.get("comment") or "")) is None:
            raise NotOptedInError(f"Slurm job {self.cluster}/{self.job_id} does not carry the Osprey marker")
        self._client.cancel(self.job_id)
