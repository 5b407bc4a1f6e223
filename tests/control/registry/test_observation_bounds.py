"""Given an observation from any source (ingest, EKS or Slurm discovery), when it carries what no valid job does
(an empty id, which forms no key; more tags, nodes or characters than any source allows), then it is refused
before it reaches the registry, naming the field (issue 28 item 7: every field that reaches the registry is
bounded, not only those ingest checks)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from osprey_control.contract import OspreyBlock
from osprey_control.registry import Backend, JobStatus, NodeKind, NodeRef
from osprey_control.registry.observation import (
    MAX_ID,
    MAX_OBSERVED_NODES,
    MAX_OBSERVED_TAG_KEY,
    MAX_OBSERVED_TAGS,
    JobObservation,
)

AT = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _observation(**fields: Any) -> JobObservation:
    values: dict[str, Any] = {
        "backend": Backend.EKS,
        "native_id": "gpu/team-a/train",
        "name": "train",
        "block": OspreyBlock(priority_derivation_profile="training-policy"),
        "status": JobStatus.RUNNING,
        "event_time": AT,
    }
    return JobObservation(**{**values, **fields})


def _nodes(count: int) -> tuple[NodeRef, ...]:
    return tuple(NodeRef(node_id=f"pod-{index}", kind=NodeKind.POD) for index in range(count))


def test_an_observation_at_every_bound_is_accepted() -> None:
    # Kubernetes label keys reach 317 characters (a 253-character prefix and a 63-character name)
    labels = {f"{index:03d}".ljust(MAX_OBSERVED_TAG_KEY, "k"): "v" * 63 for index in range(MAX_OBSERVED_TAGS)}
    observation = _observation(native_id="n" * MAX_ID, tags=labels, nodes=_nodes(MAX_OBSERVED_NODES))
    assert len(observation.tags) == MAX_OBSERVED_TAGS


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"native_id": ""}, "native_id"),
        ({"native_id": "n" * (MAX_ID + 1)}, "native_id"),
        ({"arn": "arn:" + "a" * 2048}, "arn"),
        ({"tags": {f"k{index}": "v" for index in range(MAX_OBSERVED_TAGS + 1)}}, "tags"),
        ({"tags": {"k" * (MAX_OBSERVED_TAG_KEY + 1): "v"}}, "tags"),
        ({"tags": {"k": "v" * 2049}}, "tags"),
        ({"nodes": _nodes(MAX_OBSERVED_NODES + 1)}, "nodes"),
    ],
    ids=["empty-id", "long-id", "long-arn", "201-tags", "long-tag-key", "long-tag-value", "1001-nodes"],
)
def test_an_observation_beyond_a_bound_is_refused_naming_the_field(
    fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        _observation(**fields)
    assert [error["loc"][0] for error in raised.value.errors()] == [field]
