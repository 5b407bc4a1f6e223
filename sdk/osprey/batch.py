"""``osprey.batch.submit_job``: AWS Batch ``SubmitJob`` with the ``osprey`` block.

>>> submit_job(jobName="train", jobQueue="gpu", jobDefinition="trainer:3",
...            osprey={"priority_derivation_profile": "training-policy", "initial_priority": 70,
...                    "share_identifier": "vision"})

What is added to your ``SubmitJob`` keyword arguments (all checked before any AWS call):

- ``tags``: the ``osprey:*`` tags, merged with yours.
- The ``OSPREY_*`` environment, in the form that matches the job:

  - container jobs: ``containerOverrides.environment`` (``[{"name", "value"}]``);
  - multi-node parallel jobs (``nodeOverrides`` given, or ``form="multinode"``): every
    ``nodeOverrides.nodePropertyOverrides[].containerOverrides.environment``; when you give no node
    property overrides, one for ``targetNodes="0:"`` (all nodes);
  - EKS jobs (``eksPropertiesOverride`` given, or ``form="eks"``): every
    ``eksPropertiesOverride.podProperties.containers[].env``, plus the Kubernetes labels of DESIGN §5 in
    ``podProperties.metadata.labels``. Without containers, one override without a name is added, which
    Batch applies to a single-container job definition.

- ``shareIdentifier`` from ``share_identifier``; ``schedulingPriorityOverride`` from ``initial_priority``
  mapped linearly 0..100 → 0..9999.

A value you already set that contradicts the block is an error, not an override. ``queue`` in the block
is the ``jobQueue`` when you do not pass one. The boto3 client is created only when ``client`` is None, and
only after validation.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any, Literal

from osprey_control.contract import (
    ENVIRONMENT,
    KUBERNETES,
    TAGS,
    OspreyBlock,
    OspreyBlockError,
    batch_scheduling_priority,
    merge_block,
    parse_block,
    to_environment,
    to_kubernetes,
    to_tags,
)

__all__ = ["JobForm", "build_submit_job_request", "submit_job"]

logger = logging.getLogger(__name__)

JobForm = Literal["container", "multinode", "eks"]


def _form(kwargs: Mapping[str, Any], form: JobForm | None) -> JobForm:
    given = [
        key for key in ("nodeOverrides", "eksPropertiesOverride", "ecsPropertiesOverride") if key in kwargs
    ]
    if "ecsPropertiesOverride" in given:
        raise OspreyBlockError(
            [
                (
                    "ecsPropertiesOverride",
                    "not supported by osprey.batch; use containerOverrides or nodeOverrides",
                )
            ],
            source="SubmitJob request",
        )
    inferred: JobForm = (
        "multinode"
        if "nodeOverrides" in given
        else "eks"
        if "eksPropertiesOverride" in given
        else "container"
    )
    if form is not None and given and form != inferred:
        raise OspreyBlockError([("form", f"{form!r} does not match the {given[0]} you passed")])
    return form or inferred


def _pairs(entries: Any, where: str, name_key: str) -> dict[str, str]:
    if entries is None:
        return {}
    if not isinstance(entries, list) or not all(isinstance(entry, Mapping) for entry in entries):
        raise OspreyBlockError([(where, f"must be a list of {{'{name_key}', 'value'}}")])
    return {str(entry.get(name_key)): str(entry.get("value", "")) for entry in entries}


def _with_env(entries: list[dict[str, Any]] | None, env: Mapping[str, str]) -> list[dict[str, Any]]:
    result = [dict(entry) for entry in entries or []]
    present = {entry.get("name") for entry in result}
    result.extend({"name": name, "value": value} for name, value in env.items() if name not in present)
    return result


def _environment_targets(request: dict[str, Any], form: JobForm) -> list[tuple[dict[str, Any], str, str]]:
    """(container override dict, key of its environment list, its path) for every container to touch."""
    if form == "container":
        overrides = request.setdefault("containerOverrides", {})
        return [(overrides, "environment", "containerOverrides.environment")]
    if form == "multinode":
        nodes = request.setdefault("nodeOverrides", {})
        properties = nodes.setdefault("nodePropertyOverrides", [])
        if not properties:
            properties.append({"targetNodes": "0:"})
        return [
            (prop.setdefault("containerOverrides", {}), "environment", f"nodePropertyOverrides[{index}]")
            for index, prop in enumerate(properties)
        ]
    pod = request.setdefault("eksPropertiesOverride", {}).setdefault("podProperties", {})
    containers = pod.setdefault("containers", [])
    if not containers:
        containers.append({})
    return [
        (container, "env", f"podProperties.containers[{index}].env")
        for index, container in enumerate(containers)
    ]


def build_submit_job_request(
    osprey: Mapping[str, Any] | OspreyBlock, *, form: JobForm | None = None, **submit_job_kwargs: Any
) -> dict[str, Any]:
    """The ``SubmitJob`` parameters with the block applied; raises :class:`OspreyBlockError` when invalid."""
    block = parse_block(osprey, path="osprey")
    request = copy.deepcopy(submit_job_kwargs)
    job_form = _form(request, form)
    targets = _environment_targets(request, job_form)

    sources = [(TAGS, dict(request.get("tags") or {}), "tags")]
    sources += [(ENVIRONMENT, _pairs(target.get(key), path, "name"), path) for target, key, path in targets]
    pod_labels: dict[str, str] = {}
    if job_form == "eks":
        pod = request["eksPropertiesOverride"]["podProperties"]
        pod_labels = dict((pod.get("metadata") or {}).get("labels") or {})
        sources.append((KUBERNETES, pod_labels, "podProperties.metadata.labels"))
    effective = merge_block(block, *sources, path="osprey")

    problems: list[tuple[str, str]] = []
    if effective.share_identifier is not None:
        given = request.setdefault("shareIdentifier", effective.share_identifier)
        if given != effective.share_identifier:
            problems.append(("shareIdentifier", f"{given!r} contradicts osprey.share_identifier"))
    if effective.initial_priority is not None:
        mapped = batch_scheduling_priority(effective.initial_priority)
        given = request.setdefault("schedulingPriorityOverride", mapped)
        if given != mapped:
            problems.append(
                (
                    "schedulingPriorityOverride",
                    f"{given!r} contradicts osprey.initial_priority (maps to {mapped})",
                )
            )
    if effective.queue is not None:
        given = request.setdefault("jobQueue", effective.queue)
        if given != effective.queue:
            problems.append(("jobQueue", f"{given!r} contradicts osprey.queue={effective.queue!r}"))
    if problems:
        raise OspreyBlockError(problems, source="SubmitJob request")

    request["tags"] = {**(request.get("tags") or {}), **to_tags(effective)}
    environment = to_environment(effective)
    for target, key, _ in targets:
        target[key] = _with_env(target.get(key), environment)
    if job_form == "eks":
        labels, _annotations = to_kubernetes(effective)
        pod.setdefault("metadata", {})["labels"] = {**pod_labels, **labels}
    return request


def submit_job(
    client: Any = None,
    osprey: Mapping[str, Any] | OspreyBlock | None = None,
    *,
    form: JobForm | None = None,
    **submit_job_kwargs: Any,
) -> dict[str, Any]:
    """``batch.submit_job(**submit_job_kwargs)`` with the block applied (see the module docstring).

    Returns the ``SubmitJob`` response. ``client`` is a boto3 Batch client; when None one is created with
    the default session, after validation succeeded.
    """
    if osprey is None:
        raise OspreyBlockError(
            [("osprey", "required: the osprey block, e.g. {'priority_derivation_profile': ...}")]
        )
    request = build_submit_job_request(osprey, form=form, **submit_job_kwargs)
    if client is None:
        import boto3  # noqa: PLC0415  # boto3 is the optional 'aws' extra; only needed here

        client = boto3.client("batch")
    response: dict[str, Any] = client.submit_job(**request)
    logger.info(
        "submitted batch job", extra={"job_id": response.get("jobId"), "job_queue": request.get("jobQueue")}
    )
    return response
