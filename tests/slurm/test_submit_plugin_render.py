"""Given a deployment's Slurm priority range, when Osprey renders its ``job_submit.lua`` (and the head node's
installer that carries it), then the script starts a new job exactly where the applier would write its
starting priority: the mapping comes from the one ``SlurmPriorityRange``, never a second copy of the formula.
(tests/slurm/test_submit_plugin.py runs the script inside a real slurmctld.)"""

from __future__ import annotations

import re
import subprocess

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.backends.slurm import (
    DEFAULT_SLURM_PRIORITY_RANGE,
    START_PRIORITY,
    SlurmPriorityRange,
    install_script,
    job_submit_lua,
)
from osprey_control.policy import PolicySpec


def _table(lua: str) -> dict[int, int]:
    body = lua.split("local OSPREY_PRIORITY = {", 1)[1].split("}", 1)[0]
    return {int(key): int(value) for key, value in re.findall(r"\[(\d+)\]\s*=\s*(\d+)", body)}


@pytest.mark.parametrize("priority_range", [DEFAULT_SLURM_PRIORITY_RANGE, SlurmPriorityRange(1000, 2000)])
def test_the_script_maps_every_osprey_priority_as_the_applier_does(
    priority_range: SlurmPriorityRange,
) -> None:
    lua = job_submit_lua(priority_range)
    assert _table(lua) == {p: priority_range.map(p) for p in range(101)}
    assert f"local OSPREY_DEFAULT = {START_PRIORITY}\n" in lua
    assert f"priority range {priority_range.low}..{priority_range.high}" in lua
    assert "@" not in lua  # every placeholder filled


def test_a_new_job_starts_at_a_policys_default_initial_priority_the_middle_of_the_range() -> None:
    assert START_PRIORITY == PolicySpec.model_fields["initial_priority"].default == 50
    assert DEFAULT_SLURM_PRIORITY_RANGE.start == 5001
    assert SlurmPriorityRange(1, 4).start == 3  # half of 3 rounded up, as map rounds


def test_the_installer_carries_the_script_verbatim_and_is_valid_bash() -> None:
    priority_range = SlurmPriorityRange(1000, 2000)
    script = install_script(priority_range)
    heredoc = script.split("<<'OSPREY_JOB_SUBMIT_LUA'\n", 1)[1].split("\nOSPREY_JOB_SUBMIT_LUA\n", 1)[0]
    assert heredoc + "\n" == job_submit_lua(priority_range)
    assert script.startswith("#!/bin/bash\n")
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_osprey_slurm_submit_plugin_prints_the_installer_or_the_script_for_the_deployments_range() -> None:
    runner = CliRunner()
    installer = runner.invoke(app, ["slurm", "submit-plugin"])
    assert installer.exit_code == 0
    assert installer.output == install_script(DEFAULT_SLURM_PRIORITY_RANGE)
    lua = runner.invoke(app, ["slurm", "submit-plugin", "--lua", "--priority-range", "1000..2000"])
    assert lua.exit_code == 0
    assert lua.output == job_submit_lua(SlurmPriorityRange(1000, 2000))
    bad = runner.invoke(app, ["slurm", "submit-plugin", "--priority-range", "5..3"])
    assert bad.exit_code == 1
    assert "--priority-range" in bad.output
    assert "1 <= low < high" in bad.output
