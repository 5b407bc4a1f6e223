"""osprey.batch.team_share: the share identifier a team's job is submitted with on a fair-share queue."""

from __future__ import annotations

import pytest

from osprey.batch import build_submit_job_request, team_share


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
