"""The weights that keep a team's fair share under Osprey on AWS Batch (backends.batch.team_shares)."""

from __future__ import annotations

import math

import pytest

from osprey_control.backends.batch import (
    TeamShare,
    TeamShareState,
    decayed_usage,
    fold_weights,
    parse_team_share,
    team_share_identifier,
)
from osprey_control.derivation import AllocationInterval

HOUR = 3600.0


def _picked(states: list[TeamShareState], weights: dict[str, float]) -> str:
    """What Batch starts next: the share with the lowest usage x weightFactor (AWS Batch User Guide)."""
    return min(states, key=lambda state: state.usage * weights[state.share.identifier]).share.identifier


def test_a_teams_jobs_get_one_identifier_per_size_class() -> None:
    # Given jobs of team "vision" of 1, 8, 64 and 512 GPUs
    # When their share identifiers are chosen
    identifiers = [team_share_identifier("vision", gpus) for gpus in (1, 4, 8, 16, 64, 128, 512)]
    # Then jobs of one class share one identifier, and each parses back to its team and class
    assert identifiers == [
        "osprey-vision-g0",
        "osprey-vision-g0",
        "osprey-vision-g1",
        "osprey-vision-g1",
        "osprey-vision-g2",
        "osprey-vision-g2",
        "osprey-vision-g3",
    ]
    assert parse_team_share("osprey-vision-g3") == TeamShare("vision", 3)
    assert parse_team_share("osprey-ml-ops-g1") == TeamShare("ml-ops", 1)


@pytest.mark.parametrize("share", ["vision", "osprey-vision", "osprey-vision-gx", "osprey--g1", "team*"])
def test_identifiers_osprey_did_not_make_are_not_its_own(share: str) -> None:
    # Given a share identifier a team chose itself / When parsed / Then it is not an Osprey share
    assert parse_team_share(share) is None


@pytest.mark.parametrize("team", ["", "a b", "team*", "-x", "x--y"])
def test_a_team_name_that_cannot_be_part_of_an_identifier_is_rejected(team: str) -> None:
    with pytest.raises(ValueError, match="team must be letters, digits"):
        team_share_identifier(team, 8)


def test_usage_decays_with_the_queues_share_decay() -> None:
    # Given 8 GPUs held for a long time, ended one decay period ago, and 4 GPUs held now for one period
    old = AllocationInterval(0.0, 100 * HOUR, 8)
    current = AllocationInterval(100 * HOUR, None, 4)
    now = 101 * HOUR
    # When the usage is computed with shareDecaySeconds 3600
    usage = decayed_usage([old, current], now, HOUR)
    # Then the old job counts e^-1 of its GPUs and the running one 1 - e^-1 of its GPUs
    assert usage == pytest.approx(8 * math.exp(-1) + 4 * (1 - math.exp(-1)))
    # And with shareDecaySeconds 0 only what is held now counts
    assert decayed_usage([old, current], now, 0.0) == 4


def test_a_team_with_more_usage_waits_whatever_its_split_over_classes() -> None:
    # Given team a using 64 GPUs, almost all in its large class, and team b using 32 in one class,
    # both with a small job queued in their small class (little usage there)
    states = [
        TeamShareState(TeamShare("a", 0), 1.0, 60),
        TeamShareState(TeamShare("a", 2), 63.0, None),
        TeamShareState(TeamShare("b", 0), 32.0, 60),
    ]
    # When the weights are folded
    weights = fold_weights(states)
    # Then Batch's weighted usage of every class of a team is the team's usage, and team b goes first
    assert 1.0 * weights["osprey-a-g0"] == pytest.approx(64 * 1.04, rel=1e-3)
    assert 32.0 * weights["osprey-b-g0"] == pytest.approx(32 * 1.04, rel=1e-3)
    assert _picked([states[0], states[2]], weights) == "osprey-b-g0"


def test_a_teams_weight_entry_scales_its_share() -> None:
    # Given two teams with equal usage, team a's own entry at weightFactor 0.5 (twice the share)
    states = [TeamShareState(TeamShare("a", 0), 40.0, 50), TeamShareState(TeamShare("b", 0), 30.0, 50)]
    # When folded with the teams' weights
    weights = fold_weights(states, {"a": 0.5})
    # Then a, though it uses more, goes first (40 x 0.5 < 30 x 1)
    assert _picked(states, weights) == "osprey-a-g0"


def test_within_a_team_ospreys_order_picks_the_class() -> None:
    # Given one team whose small class has a queued job at priority 20 and whose large class one at 90
    states = [TeamShareState(TeamShare("a", 0), 10.0, 20), TeamShareState(TeamShare("a", 3), 30.0, 90)]
    # When folded
    weights = fold_weights(states)
    # Then the class holding the higher-priority job is picked, though it has more usage of its own
    assert _picked(states, weights) == "osprey-a-g3"


def test_ospreys_order_does_not_override_a_clear_usage_difference() -> None:
    # Given team a at 100 GPUs with a top-priority job queued, team b at 80 with a bottom-priority one
    states = [TeamShareState(TeamShare("a", 0), 100.0, 100), TeamShareState(TeamShare("b", 0), 80.0, 0)]
    # When folded with the default order margin (10 %)
    weights = fold_weights(states)
    # Then b goes first: 80 x 1.1 < 100 x 1.0
    assert _picked(states, weights) == "osprey-b-g0"


def test_weights_stay_within_what_batch_accepts() -> None:
    # Given a class with a sliver of usage in a busy team, and an unused class
    states = [
        TeamShareState(TeamShare("a", 0), 1e-9, 50),
        TeamShareState(TeamShare("a", 1), 5000.0, 50),
        TeamShareState(TeamShare("a", 2), 0.0, None),
    ]
    # When folded
    weights = fold_weights(states, {"a": 0.0002})
    # Then every weight is within 0.0001..999.9999 and has at most 4 decimals
    for weight in weights.values():
        assert 0.0001 <= weight <= 999.9999
        assert round(weight, 4) == weight
    assert weights["osprey-a-g0"] == 999.9999


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match="usage of osprey-a-g0 must be a finite number"):
        fold_weights([TeamShareState(TeamShare("a", 0), -1.0)])
    with pytest.raises(ValueError, match=r"order_margin must be within 0\.\.1"):
        fold_weights([], order_margin=2.0)
    with pytest.raises(ValueError, match="gpus must be a positive integer"):
        team_share_identifier("a", 0)
