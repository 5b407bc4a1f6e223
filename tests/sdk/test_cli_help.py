"""Given every osprey command, when a user asks for its help in an 80-column terminal or for shell completion,
then the help reads cleanly (no `<bool>` placeholders, no literal backticks, nothing cut short) and the
shell completes commands and option values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from osprey.cli.main import app

runner = CliRunner()
ELSEWHERE: set[tuple[str, ...]] = set()


def _paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if path[:1] and path[:1] in ELSEWHERE:
        return
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _paths(sub, (*path, name))


COMMANDS = list(_paths(get_command(app)))


def test_every_command_is_covered() -> None:
    assert {path[0] for path in COMMANDS if path} >= {
        "jobs",
        "explain",
        "derive",
        "local",
        "simulate",
        "cost",
    }
    assert ("local", "up") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "osprey")
def test_help_is_clean_at_80_columns(path: tuple[str, ...]) -> None:
    # When the user asks for the command's help in an 80-column terminal
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)

    # Then it fits, and shows no placeholder, markup or cut-off text
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "<bool>" not in result.output
    assert "`" not in result.output
    assert "…" not in result.output
    # (click ends a listed command's summary with "..." when it does not fit; "Usage: ... [ARGS]..." is fine)
    assert [line for line in lines if line.rstrip().endswith("...") and not line.startswith("Usage:")] == []


def test_shell_completion_is_offered_and_completes_commands_and_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # typer makes --show-completion a bare flag when it can detect the running shell (its parent process) and
    # one taking the shell's name otherwise; the test names the shell, so it must not depend on who started it.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    # The root help offers both completion options
    help_text = runner.invoke(app, ["--help"]).output
    assert "--install-completion" in help_text
    assert "--show-completion" in help_text

    # The completion script for bash completes through the osprey entry point
    script = runner.invoke(app, ["--show-completion", "bash"], prog_name="osprey")
    assert script.exit_code == 0, script.output
    assert "_OSPREY_COMPLETE=complete_bash" in script.output

    # ... and completes a command, then an option's allowed values
    def complete(words: str, index: int) -> list[str]:
        environment = {"_OSPREY_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(index)}
        return runner.invoke(app, [], env=environment, prog_name="osprey").output.split()

    assert complete("osprey exp", 1) == ["explain"]
    assert complete("osprey jobs --backend sage", 3) == ["sagemaker", "sagemaker-queued"]
    assert complete("osprey jobs --status RU", 3) == ["RUNNING"]
