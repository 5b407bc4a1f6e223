"""How the in-job runtime names a Batch job: ``JobId`` the (parent) job id, ``Host`` the node index
(``AWS_BATCH_JOB_NODE_INDEX``, ``0`` for a single-node job)."""

from __future__ import annotations

from osprey_control.backends.runtime_naming import RuntimeNames
from osprey_control.registry import JobRecord, NodeKind, NodeRef

__all__: list[str] = []

# The node index of a single-node job and of a multi-node job's main node, where rank 0 runs.
MAIN_NODE = "0"


class BatchRuntimeNames(RuntimeNames):
    """:class:`RuntimeNames` with node indices for hosts: the registry keeps a Batch job's nodes (EC2
    instances) in index order, so a node's position is the index the runtime reports."""

    __slots__ = ()

    def host(self, record: JobRecord, position: int, node: NodeRef) -> str:
        if node.kind is not NodeKind.HOST and not node.node_id.isdigit():
            return str(position)
        return super().host(record, position, node)

    def lead_host(self, record: JobRecord) -> str | None:
        return MAIN_NODE


BATCH_RUNTIME = BatchRuntimeNames("batch")
