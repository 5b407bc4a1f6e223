"""Given a fresh clone, when a new user reads the README and the help, then the README opens with its title and
the two fresh-machine commands, says how `osprey` gets on PATH, its Llama example is Llama 3 70B (grouped-query
attention, gated MLP: 70.6B parameters), the help names the four backends and shows readable value names, and
`osprey plan` says what SCORE is in."""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from osprey.cli.main import app
from tests.conftest import REPO_ROOT

runner = CliRunner()
README = (REPO_ROOT / "README.md").read_text()
BACKENDS = ("SageMaker", "AWS Batch", "EKS", "Slurm")


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    commands = getattr(group, "commands", None)
    if commands:
        for name, command in sorted(commands.items()):
            yield from _commands(command, (*path, name))
    yield path


def test_the_readme_opens_with_its_title_then_exactly_the_two_fresh_machine_commands() -> None:
    lines = README.splitlines()
    assert lines[0] == "# Osprey"
    block = README.split("```", 2)[1].splitlines()
    assert block[0] == "bash"
    commands = [line.split("#")[0].strip() for line in block[1:] if line.strip()]
    assert commands == ["bash .ci/demo", "bash .ci/test"]
    assert README.index("```") < README.index("\n## ")  # before any section


def test_try_it_puts_osprey_on_path_before_its_first_use() -> None:
    try_it = README.split("## Try it", 1)[1].split("\n## ", 1)[0]
    commands = [
        line.removeprefix("$ ").split("#")[0].strip() for line in try_it.splitlines() if line.startswith("$ ")
    ]
    assert commands[0] == "source .venv/bin/activate"
    assert all(command.startswith("osprey ") for command in commands[1:])


def _readme_plan(layers: str) -> list[str]:
    """The README's `osprey plan --layers N ...` command, continuation lines joined, comment dropped."""
    found = re.search(rf"\$ (osprey plan --layers {layers} (?:[^\n]*\\\n)*[^\n]*)", README)
    assert found is not None
    text = found.group(1).replace("\\\n", " ").split("#")[0]
    return shlex.split(text)[2:]


def test_the_readme_llama_example_is_llama_3_70b_with_gqa_and_a_gated_mlp() -> None:
    arguments = _readme_plan("80")
    assert {"--kv-heads", "--ffn-hidden", "--gated-mlp"} <= set(arguments)
    result = runner.invoke(app, ["plan", *arguments, "--top", "1"])
    assert result.exit_code == 0, result.output
    # Meta's count is 70.55B; the planner's, with biases and two-weight norms, 0.02% more
    assert result.stdout.startswith(
        "70.6B parameters (80 layers, hidden 8192, 64 heads (8 KV), gated MLP 28672"
    )
    assert "Llama 3 70B (70.6B)" in README


def test_the_plan_table_says_what_score_is_in() -> None:
    result = runner.invoke(app, ["plan", *_readme_plan("96"), "--top", "2"])
    assert result.exit_code == 0, result.output
    assert "SCORE tok/$" in result.stdout
    assert "SCORE: tokens per dollar" in result.stdout


def test_help_and_the_package_describe_four_backends() -> None:
    root = runner.invoke(app, ["--help"])
    text = " ".join(root.stdout.split())
    description = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["description"]
    for backend in BACKENDS:
        assert backend in text
        assert backend in description


@pytest.mark.parametrize("command", list(_commands(typer.main.get_command(app))), ids=" ".join)
def test_help_shows_readable_value_names(command: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*command, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    assert not re.search(r"<(list\[|str>|int>|float>|path>|Path>|int range>)", result.stdout), result.stdout
