"""``osprey simulate --workload family:SEED``: Given a family seed, when the command runs, then it simulates
that draw (its own cluster, named ``family-<seed>``) and prints what was drawn; given a seed that is not a
whole number, or ``--gpus`` beside it, it exits 2 naming the flag and what is allowed (docs/cli.md)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.simulate import family_workload

runner = CliRunner()


def test_a_family_seed_simulates_that_draw_on_its_own_cluster() -> None:
    expected = family_workload(1004)
    result = runner.invoke(
        app, ["simulate", "--workload", "family:1004", "--schedulers", "kueue,oracle", "--json"]
    )
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["scheduler"] for o in objects] == ["kueue", "oracle"]
    assert {o["workload"] for o in objects} == {"family-1004"}
    assert {o["gpus"] for o in objects} == {expected.total_gpus}
    assert {o["jobs"] for o in objects} == {len(expected.jobs)}


def test_the_table_is_followed_by_what_was_drawn() -> None:
    result = runner.invoke(app, ["simulate", "--workload", "family:1004", "--schedulers", "oracle"])
    assert result.exit_code == 0, result.output
    for note in family_workload(1004).notes:
        assert note in result.stdout


def test_a_seed_that_is_not_a_whole_number_exits_2_naming_what_is_allowed() -> None:
    for value in ("family:x", "family:", "family:1.5", "family:+3", "family: 3"):
        result = runner.invoke(app, ["simulate", "--workload", value, "--schedulers", "oracle"])
        assert result.exit_code == 2, (value, result.output)
        assert f"error: --workload: {value!r}: the family seed must be a whole number" in result.output, value
        assert "allowed: alibaba, llm, seed, family:SEED or an existing .csv file" in result.output, value


def test_gpus_beside_a_family_seed_exits_2_since_the_draw_has_its_own_cluster() -> None:
    result = runner.invoke(
        app, ["simulate", "--workload", "family:3", "--gpus", "64", "--schedulers", "oracle"]
    )
    assert result.exit_code == 2, result.output
    assert "error: --gpus: family:3 draws its own cluster" in result.output


def test_an_unknown_workload_names_the_family_among_what_is_allowed() -> None:
    result = runner.invoke(app, ["simulate", "--workload", "nope", "--schedulers", "oracle"])
    assert result.exit_code == 2
    assert "is not one of alibaba, llm, seed, family:SEED or an existing .csv file" in result.output
