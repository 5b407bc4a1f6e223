"""Given every `osprey` command, when it is run with a bad command line or fails at its work, then the exit
code follows the one convention of docs/cli.md: 0 done, 1 the command ran and the work failed (bad file
contents, a missing setup, nothing to do), 2 the command line is wrong (as click reports its own errors)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from osprey.cli.main import app

runner = CliRunner()
ROOT = typer.main.get_command(app)
MODEL = ["--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "2048", "--vocab", "51200",
         "--global-batch", "512", "--gpus", "64", "--instance-type", "p4d.24xlarge"]  # fmt: skip
FLEET = ["--nodes", "10", "--gpus-per-node", "8", "--jobs", "20"]


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf command's path (typer's groups carry ``commands``, as click's do)."""
    commands = getattr(group, "commands", None)
    if commands:
        for name, command in sorted(commands.items()):
            yield from _commands(command, (*path, name))
    else:
        yield path


ALL = list(_commands(ROOT))


@pytest.fixture(autouse=True)
def nothing_to_talk_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No osprey local, no region, no table: a command that gets as far as its control plane fails (1)."""
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "no-local.json"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "OSPREY_TABLE_NAME", "OSPREY_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def test_the_walk_finds_every_command() -> None:
    assert len(ALL) >= 20
    assert {("jobs",), ("policy", "replay"), ("local", "cycle"), ("plan",), ("slurm", "annotate")} <= set(ALL)


@pytest.mark.parametrize("command", ALL, ids=" ".join)
def test_an_unknown_option_is_a_usage_error_in_every_command(command: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*command, "--no-such-option"])
    assert result.exit_code == 2, result.output
    assert "No such option" in result.output
    assert "Traceback" not in result.output


def test_an_unknown_command_and_a_missing_argument_are_usage_errors() -> None:
    assert runner.invoke(app, ["no-such-command"]).exit_code == 2
    assert runner.invoke(app, ["explain"]).exit_code == 2
    assert runner.invoke(app, ["policy", "replay"]).exit_code == 2


BAD_COMMAND_LINES = [
    ["jobs", "-o", "bogus"],
    ["history", "some-job", "--since", "yesterday"],
    ["policy", "replay", "policies/training-policy.yaml", "--since", "yesterday"],
    ["policy", "validate", "no/such/dir"],
    ["policy", "diff", "no-such.yaml"],
    ["policy", "apply", "--dry-run", "no-such.yaml"],
    ["local", "cycle", "--count", "0"],
    ["local", "cycle", "--live", "--json"],
    ["local", "up", "--deploy", "bogus"],
    ["local", "up", "--gang-timeout", "0"],
    ["plan", *MODEL, "--layers", "0"],
    ["plan", *MODEL, "--instance-type", "p3.2xlarge"],
    ["plan", *MODEL, "--plot", "space.jpg"],
    ["plan", "--config", "no-such.yaml"],
    ["cost", *FLEET, "--nodes", "many"],
    ["cost", *FLEET, "--template", "no-such.json"],
    ["derive", "--policy", "policies/training-policy.yaml", "--metrics", "no-such.json"],
    ["derive", "--policy", "no-such.yaml", "--metrics", "docs/examples/fleet/llama-pretrain.json"],
    ["derive", "--policy", "policies/training-policy.yaml", "--metrics", "docs/examples/fleet/llama-pretrain.json",
     "--current", "101"],
    ["eks", "annotate", "no-such.yaml", "-p", "training-policy"],
    ["eks", "annotate", "-", "-p", "training-policy", "--gang-timeout", "0"],
    ["slurm", "annotate", "no-such.sbatch"],
    ["slurm", "annotate", "-", "--min-workers", "101"],
]  # fmt: skip


@pytest.mark.parametrize("arguments", BAD_COMMAND_LINES, ids=lambda a: " ".join(a[:2] + a[-2:]))
def test_a_bad_option_value_or_a_missing_input_file_exits_2(
    arguments: list[str], repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo_root)
    result = runner.invoke(app, arguments, input="")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_the_work_failing_exits_1(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo_root)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (repo_root / "policies" / "training-policy.yaml").read_text().replace("weight: 0.6", "weight: 0")
    )
    metrics = tmp_path / "bad.json"
    metrics.write_text('{"nodes": [{"gpu_utilization": "high"}]}')
    failing = {
        "invalid policy contents": ["policy", "validate", str(bad)],
        "invalid metrics contents": ["derive", "--policy", "policies/training-policy.yaml", "--metrics", str(metrics)],
        "no local running": ["local", "status"],
        "no control plane": ["jobs"],
        "no manifest kind": ["eks", "annotate", "-", "-p", "training-policy"],
    }  # fmt: skip
    for what, arguments in failing.items():
        result = runner.invoke(app, arguments, input="apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
        assert result.exit_code == 1, (what, result.output)
        assert result.stderr.strip(), what
        assert "Traceback" not in result.output
