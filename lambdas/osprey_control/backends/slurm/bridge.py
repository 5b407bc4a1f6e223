"""The Slurm bridge: the one function that reaches slurmrestd, inside the cluster's VPC (docs/slurm.md).

slurmrestd listens on the head node's private address, so only a function in the cluster's VPC, with the JWT
from Secrets Manager, can call it. The rest of the control plane stays outside the VPC, and the bridge does
three things for it:

- ``{"action": "discover"}`` (its own schedule, once a minute): :func:`~osprey_control.backends.slurm.discovery.discover`
  with the ParallelCluster node → instance mapping, each observation merged into the registry as ingested events
  are; the answer holds counts only.
- ``{"action": "apply", "changes": [...]}`` (invoked by the cycle's apply step through
  :class:`SlurmBridgeApplier`): the :class:`~osprey_control.backends.slurm.applier.SlurmApplier` on those jobs, one
  result per job. The apply step keeps recording the outcomes (and its fencing): the bridge never writes
  priorities to the registry.
- ``{"action": "gang", "op": "readiness" | "stop", "nativeId": ...}`` (the gang watch, through
  :class:`SlurmBridgeGang`): :class:`~osprey_control.backends.slurm.gang.SlurmGang` on that job.

Settings come from the environment the CDK construct sets (names in :mod:`osprey_control.wiring`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from osprey_control.aws import client_for
from osprey_control.backends.actuation import ApplyReport, ApplyResult, Outcome, PriorityChange, prefilter
from osprey_control.backends.reconcile import ReconcileStore
from osprey_control.backends.slurm.applier import SlurmApplier, SlurmPriorityRange
from osprey_control.backends.slurm.client import MAX_RESPONSE_BYTES, SlurmClient
from osprey_control.backends.slurm.discovery import discover, parse_native_id
from osprey_control.backends.slurm.discovery_run import record_discovery
from osprey_control.backends.slurm.gang import SlurmGang
from osprey_control.backends.slurm.instances import Ec2InstanceMap, InstanceMap
from osprey_control.backends.slurm.token import SecretCredentials
from osprey_control.errors import ERROR_CHARS, FAILURE_SAMPLE, PermanentError, TransientError, classify
from osprey_control.gang import NOT_OPTED_IN, NoRequeue, NotOptedInError, Readiness
from osprey_control.registry import Backend, JobKey, JobRecord
from osprey_control.wiring import (
    SLURM_ALLOW_SIGNING_KEY_VARIABLE,
    SLURM_CA_PEM_VARIABLE,
    SLURM_CLUSTER_VARIABLE,
    SLURM_INSECURE_HTTP_VARIABLE,
    SLURM_INSTANCE_TAG_VARIABLE,
    SLURM_MAX_RESPONSE_VARIABLE,
    SLURM_PRIORITY_RANGE_VARIABLE,
    SLURM_TOKEN_SECRET_VARIABLE,
    SLURM_URL_VARIABLE,
    SLURM_USER_VARIABLE,
)

__all__ = [
    "BridgeSettings",
    "SlurmBridgeApplier",
    "SlurmBridgeGang",
    "run_apply",
    "run_discovery",
    "run_gang",
]


class BridgeSettings(BaseModel):
    """The bridge's environment; a bad value fails at cold start naming its variable."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    url: str = Field(alias=SLURM_URL_VARIABLE, pattern=r"^https?://[^/\s]+/?$")
    cluster: str = Field(alias=SLURM_CLUSTER_VARIABLE, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$")
    token_secret: str = Field(alias=SLURM_TOKEN_SECRET_VARIABLE, min_length=1)
    user: str = Field(default="slurm", alias=SLURM_USER_VARIABLE, min_length=1)
    priority_range: str = Field(default="1..10001", alias=SLURM_PRIORITY_RANGE_VARIABLE)
    instance_cluster_tag: str | None = Field(default=None, alias=SLURM_INSTANCE_TAG_VARIABLE)
    insecure_http: bool = Field(default=False, alias=SLURM_INSECURE_HTTP_VARIABLE)
    ca_pem: str | None = Field(default=None, alias=SLURM_CA_PEM_VARIABLE)
    allow_signing_key: bool = Field(default=False, alias=SLURM_ALLOW_SIGNING_KEY_VARIABLE)
    max_response_bytes: int = Field(default=MAX_RESPONSE_BYTES, alias=SLURM_MAX_RESPONSE_VARIABLE, ge=1024)

    @model_validator(mode="after")
    def _tls(self) -> BridgeSettings:
        if self.url.startswith("http://") and not self.insecure_http:
            raise ValueError(
                f"{SLURM_URL_VARIABLE} is plain http://, which sends the JWT in clear; use https://, or set "
                f"{SLURM_INSECURE_HTTP_VARIABLE}=true"
            )
        return self

    @field_validator("priority_range")
    @classmethod
    def _range(cls, value: str) -> str:
        SlurmPriorityRange.parse(value)
        return value

    @property
    def range(self) -> SlurmPriorityRange:
        return SlurmPriorityRange.parse(self.priority_range)


def _connector(settings: BridgeSettings, secrets_client: Any = None) -> Callable[[str], SlurmClient]:
    source = SecretCredentials(
        settings.token_secret,
        default_user=settings.user,
        allow_signing_key=settings.allow_signing_key,
        client=secrets_client,
    )
    client = SlurmClient(
        settings.url,
        source,
        on_unauthorized=source.invalidate,
        allow_insecure_http=settings.insecure_http,
        ca_pem=settings.ca_pem or None,
        max_response_bytes=settings.max_response_bytes,
    )

    def connect(cluster: str) -> SlurmClient:
        if cluster != settings.cluster:
            raise PermanentError(
                f"this bridge serves Slurm cluster {settings.cluster!r}, not {cluster!r}",
                reason="wrong-cluster",
            )
        return client

    return connect


def run_discovery(
    settings: BridgeSettings,
    registry: ReconcileStore | None,
    *,
    connect: Callable[[str], SlurmClient] | None = None,
    instances: InstanceMap | None = None,
    on_change: Callable[[Any], object] | None = None,
) -> dict[str, Any]:
    """One discovery pass into ``registry``; counts and a few failures (the answer does not grow).
    ``on_change`` gets every record a write changed (the gang watch starter, as in EKS discovery)."""
    client = (connect or _connector(settings))(settings.cluster)
    mapping = instances or Ec2InstanceMap(cluster_name=settings.instance_cluster_tag)
    found = discover(client, settings.cluster, instances=mapping)
    # Each job under its identity, then the cluster reconciled (osprey_control.backends.slurm.discovery_run).
    written: dict[str, Any] = {"recorded": 0, "unrecorded": 0, "unrecorded_sample": [], "reconciled": None}
    if registry is not None:
        written = record_discovery(found, registry, on_change=on_change)
    return {
        "cluster": settings.cluster,
        "jobs": len(found.observations),
        **written,
        "problems": len(found.problems),
        "problems_sample": [problem.to_dict() for problem in found.problems[:FAILURE_SAMPLE]],
        "unmanaged": found.unmanaged,
    }


def apply_payload(changes: Sequence[PriorityChange]) -> dict[str, Any]:
    """What the apply step sends the bridge: each job's record (as JSON) and the priority to apply."""
    return {
        "action": "apply",
        "changes": [
            {"record": change.record.model_dump(mode="json"), "priority": change.priority}
            for change in changes
        ],
    }


def run_apply(
    settings: BridgeSettings, event: Mapping[str, Any], *, connect: Callable[[str], SlurmClient] | None = None
) -> dict[str, Any]:
    """Apply the changes of an ``apply`` event; one result per job."""
    changes = [
        PriorityChange(JobRecord.model_validate(item["record"]), int(item["priority"]))
        for item in event.get("changes") or []
    ]
    report = SlurmApplier(connect or _connector(settings), priority_range=settings.range).apply(changes)
    return {
        "writes": report.writes,
        "results": [
            {
                "job": str(result.job),
                "outcome": result.outcome.value,
                "priority": result.priority,
                "reason": result.reason[:ERROR_CHARS],
                "transient": result.transient,
                "native_value": result.native_value,
            }
            for result in report.results
        ],
    }


class SlurmBridgeApplier:
    """The apply step's :class:`~osprey_control.backends.Applier` for ``slurm`` jobs: one synchronous Invoke of the
    bridge per chunk. A failed Invoke (throttled, the bridge timed out or raised) fails the chunk's jobs,
    transient when the failure is."""

    backends = frozenset({Backend.SLURM})
    chunk_size = 50  # one Invoke; the bridge makes at most two REST calls per job

    def __init__(self, function_name: str, *, client: Any = None) -> None:
        self.function_name = function_name
        self._client = client

    def apply(self, changes: Sequence[PriorityChange]) -> ApplyReport:
        todo, results = prefilter(changes, self.backends)
        report = ApplyReport(results)
        if not todo:
            return report
        try:
            answer = self._invoke(apply_payload(todo))
        except (TransientError, PermanentError) as error:
            transient = isinstance(error, TransientError)
            report.results.extend(
                ApplyResult(
                    c.record.key, Outcome.FAILED, c.priority, f"slurm bridge: {error}", transient=transient
                )
                for c in todo
            )
            return report
        report.writes += int(answer.get("writes") or 0)
        for item in answer.get("results") or []:
            report.results.append(
                ApplyResult(
                    JobKey.parse(str(item["job"])),
                    Outcome(str(item["outcome"])),
                    int(item["priority"]),
                    str(item.get("reason") or ""),
                    transient=bool(item.get("transient")),
                    native_value=item.get("native_value"),
                )
            )
        return report

    def _invoke(self, payload: dict[str, Any]) -> dict[str, Any]:
        self._client = client_for("lambda", self._client)
        return invoke_bridge(self._client, self.function_name, payload)


def invoke_bridge(client: Any, function_name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """One synchronous Invoke of the bridge; its answer. Classified errors only (errors.classify)."""
    try:
        response = client.invoke(FunctionName=function_name, Payload=json.dumps(payload).encode())
    except Exception as error:
        classified = classify(error)
        if classified is None:
            raise
        raise classified from error
    body = response["Payload"].read()
    if response.get("FunctionError"):
        # The bridge's own failure (a timeout, an unclassified exception): worth another try.
        raise TransientError(f"slurm bridge {response['FunctionError']}: {body[:ERROR_CHARS]!r}")
    answer = json.loads(body or b"{}")
    if not isinstance(answer, dict):
        raise PermanentError(f"the bridge answered a {type(answer).__name__}, not an object")
    return answer


def run_gang(
    settings: BridgeSettings, event: Mapping[str, Any], *, connect: Callable[[str], SlurmClient] | None = None
) -> dict[str, Any]:
    """A gang watch step's call: ``op`` ``readiness`` or ``stop`` of job ``nativeId``. A classified failure is
    an ``error`` in the answer (``transient``, ``reason``), so the caller raises the same class of error."""
    native = str(event.get("nativeId") or "")
    op = event.get("op")
    if op not in ("readiness", "stop"):
        raise ValueError(f"unknown gang op {op!r}; allowed: readiness, stop")
    try:
        cluster, _ = parse_native_id(native)
        gang = SlurmGang((connect or _connector(settings))(cluster), native)
        if op == "stop":
            gang.stop()
            return {"stopped": True}
        ready = gang.readiness()
    except (TransientError, PermanentError) as error:
        return {
            "error": {
                "transient": isinstance(error, TransientError),
                "reason": getattr(error, "reason", ""),
                "message": str(error)[:ERROR_CHARS],
            }
        }
    return {
        "ready": ready.ready_workers,
        "requested": ready.requested_workers,
        "finished": ready.finished,
        "detail": ready.detail,
    }


class SlurmBridgeGang(NoRequeue):
    """The gang watch's :class:`~osprey_control.gang.GangBackend` for a ``slurm`` job, through the
    bridge (readiness and the ``fail`` fallback; requeue is applied as serial: osprey_control.backends.slurm.gang)."""

    def __init__(self, function_name: str, native_id: str, *, client: Any = None) -> None:
        parse_native_id(native_id)
        self.function_name = function_name
        self.native_id = native_id
        self._client = client

    def readiness(self) -> Readiness:
        answer = self._call("readiness")
        return Readiness(
            int(answer["ready"]),
            int(answer["requested"]),
            bool(answer["finished"]),
            str(answer.get("detail", "")),
        )

    def stop(self) -> None:
        self._call("stop")

    def _call(self, op: str) -> dict[str, Any]:
        self._client = client_for("lambda", self._client)
        payload = {"action": "gang", "op": op, "nativeId": self.native_id}
        answer = invoke_bridge(self._client, self.function_name, payload)
        error = answer.get("error")
        if isinstance(error, Mapping):
            message = f"slurm bridge: {error.get('message', '')}"
            if error.get("transient"):
                raise TransientError(message)
            if error.get("reason") == NOT_OPTED_IN:
                raise NotOptedInError(message)
            raise PermanentError(message, reason=str(error.get("reason") or "rejected"))
        return answer
