"""osprey.batch.team_share and own_share: the share identifier a job is submitted with on a fair-share queue."""

from __future__ import annotations

import pytest

from osprey.batch import build_submit_job_request, own_share, team_share
from osprey_control.backends.batch import is_osprey_identifier, parse_team_share


def test_a_teams_job_is_submitted_with_its_teams_size_class_share() -> None:
    # Given team vision's 16-GPU job / When its request is built with team_share
    request = build_submit_job_request(
        {"priority_derivation_profile": "default-policy", "share_identifier": team_share("vision", 16)},
        jobName="train",
        jobQueue="gpu",
        jobDefinition="trainer:3",
    )
    # Then Batch gets the team's Osprey share for its size class
    assert request["shareIdentifier"] == "osprey-vision-g1"


def test_a_team_name_batch_cannot_take_is_refused_before_any_call() -> None:
    with pytest.raises(ValueError, match="team must be letters, digits"):
        team_share("vision team", 8)


def test_a_job_with_a_share_of_its_own_gets_an_osprey_identifier_no_other_job_has() -> None:
    # Given two jobs submitted with own_share / When their requests are built
    requests = [
        build_submit_job_request(
            {"priority_derivation_profile": "default-policy", "share_identifier": own_share()},
            jobName="train",
            jobQueue="gpu",
            jobDefinition="trainer:3",
        )
        for _ in range(2)
    ]
    shares = [request["shareIdentifier"] for request in requests]
    # Then each is in Osprey's namespace (the applier weighs only those), never a team share, and they differ
    assert all(is_osprey_identifier(share) and share.startswith("osprey-job-") for share in shares)
    assert all(parse_team_share(share) is None for share in shares)
    assert shares[0] != shares[1]
