"""What a backend provides, as one protocol, and what the deployment gives it to build its parts.

A backend is one package under :mod:`osprey_control.backends` whose front defines ``DRIVER``, an object of
:class:`BackendDriver`; :mod:`osprey_control.backends.table` maps each :class:`~osprey_control.registry.Backend`
to that package. The cycle's apply step, the gang watch, ingest and the CLI reach a backend only through the
table, so adding one touches its own package, one line of the table, its infra construct and its SDK/CLI
annotate module (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from osprey_control.backends.actuation import Applier
from osprey_control.backends.events import JobEvents
from osprey_control.gang import GangBackend, WatchJob
from osprey_control.registry import Backend, JobRecord, NodeRef

__all__ = ["BackendDriver", "Deployment", "EventBackend", "EventDriver", "RuntimeNaming"]


@dataclass(frozen=True)
class Deployment:
    """What the deployment gives the backends: the function's environment (names in
    :mod:`osprey_control.wiring`), boto3 clients by service (created lazily when absent; tests pass moto- or
    Stubber-backed ones), and objects a backend asks for by name (``connectors``: a cluster name → client for
    backends reached over their own API, e.g. ``"eks"``; ``share_ledger``: the registry's Batch share ledger;
    ``active_jobs``: the registry's active jobs of a backend, for an applier that writes per group of jobs
    rather than per changed job, e.g. Batch's team shares)."""

    environment: Mapping[str, str] = field(default_factory=dict)
    clients: Mapping[str, Any] = field(default_factory=dict)
    connectors: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    share_ledger: Any = None
    active_jobs: Callable[[Backend], Sequence[JobRecord]] | None = None

    def client(self, service: str) -> Any:
        """The client passed for ``service``, else None (the backend's adapters create one on first use)."""
        return self.clients.get(service)


class RuntimeNaming(Protocol):
    """How the in-job runtime (``osprey.runtime``) names this backend's jobs in its series' dimensions
    ``[Backend, JobId, Host]`` (:data:`osprey_control.wiring.RUNTIME_DIMENSIONS`): the collector and the plan
    step compute them from the registry record, to query exactly what the runtime wrote
    (:mod:`osprey_control.backends.runtime_naming`)."""

    @property
    def backend_dimension(self) -> str:
        """The runtime's ``Backend`` value for this backend's jobs."""
        ...

    def job_id(self, record: JobRecord) -> str:
        """The runtime's ``JobId`` of ``record``."""
        ...

    def host(self, record: JobRecord, position: int, node: NodeRef) -> str:
        """The runtime's ``Host`` of ``node``, the ``position``-th node of ``record``."""
        ...

    def lead_host(self, record: JobRecord) -> str | None:
        """The ``Host`` of the lead process (rank 0), which reports the job's series; None when unknown."""
        ...


class BackendDriver(Protocol):
    """One backend: how the apply step writes its priorities, how the gang watch reaches its jobs and how the
    collector finds the series the in-job runtime writes for them.

    How its jobs are recognised (EventBridge events for SageMaker and Batch, discovery for EKS and Slurm) is its
    ``recognition``; its own code (discovery, client, settings) stays in its package.
    """

    backend: Backend
    recognition: str  # "events" (EventBridge, through ingest) or "discovery" (polled by its own function)

    @property
    def runtime(self) -> RuntimeNaming:
        """How the in-job runtime names this backend's jobs and hosts (what the collector queries)."""
        ...

    def applier(self, deployment: Deployment) -> Applier | None:
        """The applier for this backend's jobs; None when the deployment cannot reach it (no Slurm bridge)."""
        ...

    def gang(self, job: WatchJob, deployment: Deployment) -> GangBackend:
        """The gang adapter for ``job``; ValueError when the job lacks what this backend needs to reach it."""
        ...


@runtime_checkable
class EventDriver(BackendDriver, Protocol):
    """A backend whose jobs announce themselves through EventBridge (``recognition == "events"``: SageMaker,
    SageMaker through a Batch queue, Batch): ingest parses their events and recognises their jobs through
    ``events``. EKS and Slurm discover their jobs instead and have none."""

    events: JobEvents


@dataclass
class EventBackend:
    """The :class:`EventDriver` of an AWS backend recognised from its EventBridge events (SageMaker, SageMaker
    through a Batch queue, Batch): all it adds to its events and runtime naming is how to build its applier and
    its gang adapter from the deployment, so each front passes those two instead of writing a driver class.

    Not frozen: :class:`BackendDriver` declares ``backend`` and ``recognition`` as plain attributes.
    """

    backend: Backend
    events: JobEvents  # how ingest reads its events
    # How the in-job runtime names its jobs and hosts (the collector queries those names).
    runtime: RuntimeNaming
    build_applier: Callable[[Deployment], Applier]
    build_gang: Callable[[WatchJob, Deployment], GangBackend]
    recognition: str = "events"

    def applier(self, deployment: Deployment) -> Applier:
        return self.build_applier(deployment)

    def gang(self, job: WatchJob, deployment: Deployment) -> GangBackend:
        return self.build_gang(job, deployment)
