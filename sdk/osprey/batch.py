"""``osprey.batch.submit_job``: AWS Batch ``SubmitJob`` with the ``osprey`` block.

>>> submit_job(jobName="train", jobQueue="gpu", jobDefinition="trainer:3",
...            osprey={"priority_derivation_profile": "training-policy", "initial_priority": 70,
...                    "share_identifier": team_share("vision", 8)})

What is added to your ``SubmitJob`` keyword arguments (all checked before any AWS call):

- ``tags``: the ``osprey:*`` tags, merged with yours.
- The ``OSPREY_*`` environment, in the form that matches the job:

  - container jobs: ``containerOverrides.environment`` (``[{"name", "value"}]``);
  - multi-node parallel jobs (``nodeOverrides`` given, or ``form="multinode"``): every
    ``nodeOverrides.nodePropertyOverrides[].containerOverrides.environment``; when you give no node
    property overrides, one for ``targetNodes="0:"`` (all nodes). When any of your node property
    overrides uses ``eksPropertiesOverride`` (a multi-node EKS job), every node range is written in the
    EKS form below instead, inside its own ``eksPropertiesOverride``; mixing ``containerOverrides`` into
    such a job is an error.
  - EKS jobs (``eksPropertiesOverride`` given, or ``form="eks"``): every
    ``eksPropertiesOverride.podProperties.containers[].env``, plus the Kubernetes labels and annotations
    of docs/design.md §5 in ``podProperties.metadata.labels`` / ``.annotations``. Without containers, one override
    without a name is added, which Batch applies to a single-container job definition.

- ``tags`` may also be given as a ``[{"Key", "Value"}]`` list (the SageMaker form); it is sent as the
  mapping Batch expects.
- ``shareIdentifier`` from ``share_identifier``; ``schedulingPriorityOverride`` from ``initial_priority``
  mapped linearly 0..100 → 0..9999.

On a fair-share queue, give a job its team's Osprey share, :func:`team_share` (``osprey-<team>-g<class>``,
one per team and size class), so the team keeps its fair share while Osprey orders its jobs
(docs/submitting-jobs.md): ``share_identifier=team_share("vision", 16)``. A job that needs a share of its own takes
:func:`own_share` (``osprey-job-<id>``). Osprey creates and changes only entries of identifiers in its namespace
(``osprey-``) that it created itself; a job under any other identifier (a team's ``vision``) is refused with the
reason ``osprey explain`` shows, since that entry's weight would move every job of the team (issue 28).

A value you already set that contradicts the block is an error, not an override; so is a malformed
override (``containerOverrides=None``, an environment entry without ``name``, a non-string ``OSPREY_*``
value, ``form`` other than ``container``, ``multinode`` or ``eks``), named by its path. ``queue`` in the block
is the ``jobQueue`` when you do not pass one. The boto3 client is created only when ``client`` is None, and
only after validation.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any, Literal

from osprey.eks import label_annotation_conflicts
from osprey_control.backends.batch import own_share_identifier, team_share_identifier
from osprey_control.contract import (
    ENVIRONMENT,
    KUBERNETES,
    TAGS,
    OspreyBlock,
    OspreyBlockError,
    Source,
    batch_scheduling_priority,
    merge_block,
    parse_block,
    to_environment,
    to_kubernetes,
    to_tags,
)

__all__ = ["JobForm", "build_submit_job_request", "own_share", "submit_job", "team_share"]

logger = logging.getLogger(__name__)

JobForm = Literal["container", "multinode", "eks"]


_FORMS: tuple[JobForm, ...] = ("container", "multinode", "eks")
_REQUEST = "SubmitJob request"


def _fail(where: str, message: str) -> OspreyBlockError:
    return OspreyBlockError([(where, message)], source=_REQUEST)


def _form(kwargs: Mapping[str, Any], form: str | None) -> JobForm:
    if form is not None and form not in _FORMS:
        raise _fail("form", f"invalid value {form!r}; allowed: {', '.join(_FORMS)}")
    given = [
        key for key in ("nodeOverrides", "eksPropertiesOverride", "ecsPropertiesOverride") if key in kwargs
    ]
    if "ecsPropertiesOverride" in given:
        raise _fail(
            "ecsPropertiesOverride", "not supported by osprey.batch; use containerOverrides or nodeOverrides"
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
    return form if form is not None else inferred


def _mapping(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``parent[key]``, created when absent; anything but a mapping (None included) is an error."""
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise _fail(where, f"must be a mapping (got {type(value).__name__})")
    return value


def _list(parent: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    value = parent.setdefault(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _fail(where, f"must be a list of mappings (got {type(value).__name__})")
    return value


def _pairs(entries: Any, where: str) -> dict[str, Any]:
    """``[{"name", "value"}]`` as a mapping; values are kept as given so the contract reader can reject
    a non-string one by name instead of a stringified copy slipping through."""
    if entries is None:
        return {}
    if not isinstance(entries, list) or not all(isinstance(entry, Mapping) for entry in entries):
        raise _fail(where, "must be a list of {'name', 'value'}")
    result: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"{where}[{index}].name", "required: a non-empty string")
        result[name] = entry.get("value", "")
    return result


def _tags(tags: Any) -> dict[str, Any]:
    """Batch takes tags as a mapping; the SageMaker-style ``[{"Key", "Value"}]`` list is converted."""
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        return dict(tags)
    if isinstance(tags, list) and all(isinstance(tag, Mapping) for tag in tags):
        result: dict[str, Any] = {}
        for index, tag in enumerate(tags):
            if not isinstance(tag.get("Key"), str) or "Value" not in tag:
                raise _fail(f"tags[{index}]", f"each tag needs a 'Key' and a 'Value' (got {dict(tag)!r})")
            result[tag["Key"]] = tag["Value"]
        return result
    raise _fail("tags", f"must be a mapping of tag values (got {type(tags).__name__})")


def _with_env(entries: list[dict[str, Any]] | None, env: Mapping[str, str]) -> list[dict[str, Any]]:
    result = [dict(entry) for entry in entries or []]
    present = {entry.get("name") for entry in result}
    result.extend({"name": name, "value": value} for name, value in env.items() if name not in present)
    return result


# (dict holding the environment list, key of that list, its path for messages)
_Target = tuple[dict[str, Any], str, str]
# (podProperties dict, its path): where the Kubernetes labels and annotations go
_Pod = tuple[dict[str, Any], str]


def _eks_targets(parent: dict[str, Any], where: str) -> tuple[list[_Target], _Pod]:
    override = _mapping(parent, "eksPropertiesOverride", f"{where}eksPropertiesOverride")
    pod_where = f"{where}eksPropertiesOverride.podProperties"
    pod = _mapping(override, "podProperties", pod_where)
    containers = _list(pod, "containers", f"{pod_where}.containers")
    if not containers:
        # Batch applies an unnamed override to a single-container job definition.
        containers.append({})
    targets = [(c, "env", f"{pod_where}.containers[{i}].env") for i, c in enumerate(containers)]
    return targets, (pod, pod_where)


def _targets(request: dict[str, Any], form: JobForm) -> tuple[list[_Target], list[_Pod]]:
    """Every container to give the environment to, and every pod to give the labels to."""
    if form == "container":
        _mapping(request, "containerOverrides", "containerOverrides")
        return [(request["containerOverrides"], "environment", "containerOverrides.environment")], []
    if form == "eks":
        eks_targets, pod = _eks_targets(request, "")
        return eks_targets, [pod]
    nodes = _mapping(request, "nodeOverrides", "nodeOverrides")
    properties = _list(nodes, "nodePropertyOverrides", "nodeOverrides.nodePropertyOverrides")
    # A multi-node job definition is either ECS or EKS for all its node ranges: one range written with
    # eksPropertiesOverride makes the job an EKS one, so every range is written that way.
    eks = any("eksPropertiesOverride" in prop for prop in properties)
    if not properties:
        properties.append({"targetNodes": "0:"})
    targets: list[_Target] = []
    pods: list[_Pod] = []
    for index, prop in enumerate(properties):
        where = f"nodeOverrides.nodePropertyOverrides[{index}]."
        if eks:
            if "containerOverrides" in prop:
                raise _fail(f"{where}containerOverrides", "cannot be mixed with eksPropertiesOverride")
            node_targets, pod = _eks_targets(prop, where)
            targets += node_targets
            pods.append(pod)
        else:
            overrides = _mapping(prop, "containerOverrides", f"{where}containerOverrides")
            targets.append((overrides, "environment", f"{where}containerOverrides.environment"))
    return targets, pods


def _pod_sources(pods: list[_Pod]) -> list[Source]:
    sources: list[Source] = []
    for pod, where in pods:
        metadata = _mapping(pod, "metadata", f"{where}.metadata")
        labels = _mapping(metadata, "labels", f"{where}.metadata.labels")
        annotations = _mapping(metadata, "annotations", f"{where}.metadata.annotations")
        conflicts = label_annotation_conflicts(labels, annotations, f"{where}.metadata")
        if conflicts:
            raise OspreyBlockError(conflicts, source=_REQUEST)
        sources.append((KUBERNETES, dict(labels), f"{where}.metadata.labels"))
        sources.append((KUBERNETES, dict(annotations), f"{where}.metadata.annotations"))
    return sources


def _check_parameters(request: dict[str, Any], effective: OspreyBlock) -> None:
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
        raise OspreyBlockError(problems, source=_REQUEST)


def build_submit_job_request(
    osprey: Mapping[str, Any] | OspreyBlock, *, form: JobForm | None = None, **submit_job_kwargs: Any
) -> dict[str, Any]:
    """The ``SubmitJob`` parameters with the block applied; raises :class:`OspreyBlockError` when invalid."""
    block = parse_block(osprey, path="osprey")
    request = copy.deepcopy(submit_job_kwargs)
    job_form = _form(request, form)
    targets, pods = _targets(request, job_form)
    user_tags = _tags(request.get("tags"))

    sources: list[Source] = [(TAGS, user_tags, "tags")]
    sources += [(ENVIRONMENT, _pairs(target.get(key), path), path) for target, key, path in targets]
    sources += _pod_sources(pods)
    effective = merge_block(block, *sources, path="osprey")
    _check_parameters(request, effective)

    request["tags"] = {**user_tags, **to_tags(effective)}
    environment = to_environment(effective)
    for target, key, _ in targets:
        target[key] = _with_env(target.get(key), environment)
    labels, annotations = to_kubernetes(effective)
    for pod, _ in pods:
        metadata = pod["metadata"]
        metadata["labels"] = {**metadata["labels"], **labels}
        metadata["annotations"] = {**metadata["annotations"], **annotations}
        # A block with only the two label fields has no annotations: send no empty map for them.
        for key in ("labels", "annotations"):
            if not metadata[key]:
                del metadata[key]
    return request


def team_share(team: str, gpus: int) -> str:
    """The share identifier of ``team``'s jobs of ``gpus`` GPUs on a fair-share queue Osprey weights:
    ``osprey-<team>-g<class>`` (classes: up to 4 GPUs, 16, 128, more). ``ValueError`` names what is wrong."""
    return team_share_identifier(team, gpus)


def own_share() -> str:
    """A share identifier of the job's own on a fair-share queue Osprey weights (``osprey-job-<16 hex>``, random:
    no other job has it), whose weight follows the job's priority. Prefer :func:`team_share`, which keeps the
    team's usage in the weights; a job alone in its share is ordered only once it has usage."""
    return own_share_identifier()


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
