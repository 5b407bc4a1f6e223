"""How the in-job runtime (``osprey.runtime``) names a job and its hosts, as the registry sees them.

The runtime writes every series with the dimensions ``[Backend, JobId, Host]`` from what it finds in the job's
environment; the collector and the plan step query exactly those values, computed from the job's registry
record. Each backend's front sets its :class:`~osprey_control.backends.driver.RuntimeNaming` as ``DRIVER.runtime``;
:class:`RuntimeNames` is the rule most backends follow, a backend whose runtime names differ overrides it in its
own package (SageMaker, the SageMaker queue, Batch).
"""

from __future__ import annotations

from dataclasses import dataclass

from osprey_control.registry import JobRecord, NodeKind, NodeRef

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class RuntimeNames:
    """The runtime's names where the registry's ids are the runtime's own: ``Backend`` is
    ``backend_dimension``, ``JobId`` the native id, ``Host`` a SageMaker host's ``algo-N`` (its registry id is
    ``<training job>/algo-N``) or else the node id, and the lead host the first node's (the registry keeps
    nodes in rank order: the EKS pod whose name sorts first, the first Slurm node)."""

    backend_dimension: str

    def job_id(self, record: JobRecord) -> str:
        """The runtime's ``JobId`` of ``record``."""
        return record.native_id

    def host(self, record: JobRecord, position: int, node: NodeRef) -> str:
        """The runtime's ``Host`` of ``node``, the ``position``-th node of ``record``."""
        if node.kind is NodeKind.HOST:
            return node.node_id.rsplit("/", 1)[-1]
        return node.node_id

    def lead_host(self, record: JobRecord) -> str | None:
        """The ``Host`` where rank 0 usually runs (the lead process reports the job's series); None when it
        cannot be known (a job without nodes yet)."""
        return self.host(record, 0, record.nodes[0]) if record.nodes else None
