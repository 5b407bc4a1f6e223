"""Given what the shard Map hands the apply step, when it is validated, then the reports' shards and failures
are read and their counts ignored, and a payload the derive step did not write names its bad field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from osprey_control.steps.apply import reported_shards
from osprey_control.steps.payload import ApplyRequest


def test_a_map_output_with_a_failed_shard_applies_only_the_shards_that_derived() -> None:
    # Given two derive reports (with their counts) and a shard whose derive failed, and the lease token
    payload = {
        "shards": [
            {"shard": 3, "evaluated": 40, "pending": 2, "jobs_failed": 0, "failures": [], "series": 9},
            {"shard": 5, "failed": True, "error": {"Error": "Lambda.Unknown"}},
            {"shard": 7, "evaluated": 1, "pending": 0},
        ],
        "token": 12,
    }
    # When validated
    request = ApplyRequest.model_validate(payload)
    # Then the token is kept and only the shards that derived are applied
    assert request.token == 12
    assert reported_shards(request.reports()) == [3, 7]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"shards": [{"shard": "3"}]}, "shards.0.shard"),
        ({"shards": [{"shard": -1}]}, "shards.0.shard"),
        ({"shards": [], "token": "7"}, "token"),
        ({"shards": {"shard": 1}}, "shards"),
    ],
)
def test_a_payload_the_state_machine_did_not_write_names_the_field(
    payload: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        ApplyRequest.model_validate(payload)
    assert field in str(raised.value).replace("\n", ".").replace(" ", "")
