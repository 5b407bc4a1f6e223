"""Job identity of the discovered backends: native ids that name the cluster and the scheduler's own unique id.

Pure Python. A name is not an identity: two EKS clusters both run ``ml/train``; a Job deleted and re-created
under its name is another job; a Slurm cluster re-created under its name starts its job ids again at 1. So:

===========  ===============================================  ==============================================
backend      native id                                        what makes it unique
===========  ===============================================  ==============================================
eks          ``<cluster>/<namespace>/<name>/<uid>``           the object's ``metadata.uid`` (a re-created Job,
                                                              or any Job on a re-created cluster, has another)
slurm        ``<cluster>/<job id>@<incarnation>``             the job's first seen ``submit_time`` (epoch
                                                              seconds): a re-created cluster's job 1 was
                                                              submitted later than the old job 1
===========  ===============================================  ==============================================

None of the parts can contain ``/`` (EKS cluster names, namespaces, names and uids; Slurm cluster names are
``[A-Za-z0-9_-]``), so a native id splits back exactly. Ids written before these formats (``<namespace>/<name>``,
``<cluster>/<job id>``) still parse, with the missing parts None: they are *legacy* ids, closed by the next
complete discovery of their cluster (docs/decisions.md, "Job identity").

:func:`aliases` is what a person may type for a job (``osprey explain train``): its name, its native id, and
the id without the parts nobody remembers (``ml/train``, ``gpu-a/ml/train``; ``gpu-a/42``, ``42``).
"""

from __future__ import annotations

from dataclasses import dataclass

from osprey_control.registry.model import Backend

__all__ = [
    "EksJobId",
    "SlurmJobId",
    "aliases",
    "eks_job_id",
    "slurm_job_id",
]


@dataclass(frozen=True, slots=True)
class EksJobId:
    """An EKS job's identity; ``cluster`` and ``uid`` are None for a legacy ``<namespace>/<name>`` id."""

    cluster: str | None
    namespace: str
    name: str
    uid: str | None

    @property
    def legacy(self) -> bool:
        return self.cluster is None or self.uid is None

    @property
    def object_name(self) -> str:
        """``<namespace>/<name>``: where the object lives on its cluster (and the in-job runtime's JobId)."""
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        if self.legacy:
            return self.object_name
        return f"{self.cluster}/{self.namespace}/{self.name}/{self.uid}"


def eks_job_id(native_id: str) -> EksJobId:
    """Parse an EKS native id (module docstring); ValueError names the forms allowed."""
    parts = native_id.split("/")
    if len(parts) == 4 and all(parts):
        return EksJobId(parts[0], parts[1], parts[2], parts[3])
    if len(parts) == 2 and all(parts):
        return EksJobId(None, parts[0], parts[1], None)
    raise ValueError(
        f"an EKS native id is '<cluster>/<namespace>/<name>/<uid>' (or the legacy '<namespace>/<name>'), "
        f"got {native_id!r}"
    )


@dataclass(frozen=True, slots=True)
class SlurmJobId:
    """A Slurm job's identity; ``incarnation`` is None for a legacy ``<cluster>/<job id>`` id."""

    cluster: str
    job_id: int
    incarnation: int | None

    @property
    def legacy(self) -> bool:
        return self.incarnation is None

    @property
    def scheduler_id(self) -> str:
        """``<cluster>/<job id>``: the job on its cluster now (and the in-job runtime's JobId)."""
        return f"{self.cluster}/{self.job_id}"

    def __str__(self) -> str:
        return self.scheduler_id if self.incarnation is None else f"{self.scheduler_id}@{self.incarnation}"


def slurm_job_id(native_id: str) -> SlurmJobId:
    """Parse a Slurm native id (module docstring); ValueError names the forms allowed."""
    cluster, separator, rest = native_id.rpartition("/")
    job_id, at, incarnation = rest.partition("@")
    valid = bool(separator and cluster and job_id.isdigit()) and (not at or incarnation.isdigit())
    if not valid:
        raise ValueError(
            f"a Slurm native id is '<cluster>/<job id>@<submit time>' (or the legacy '<cluster>/<job id>'), "
            f"got {native_id!r}"
        )
    return SlurmJobId(cluster, int(job_id), int(incarnation) if at else None)


def aliases(backend: Backend, native_id: str, name: str) -> frozenset[str]:
    """What a person may type to name the job (module docstring); the name and native id always."""
    found = {name, native_id}
    try:
        if backend is Backend.EKS:
            eks = eks_job_id(native_id)
            found.add(eks.object_name)
            if eks.cluster is not None:
                found.add(f"{eks.cluster}/{eks.object_name}")
        elif backend is Backend.SLURM:
            slurm = slurm_job_id(native_id)
            found.update({slurm.scheduler_id, str(slurm.job_id)})
    except ValueError:
        pass  # an id of another form: its name and native id still find it
    return frozenset(found)
