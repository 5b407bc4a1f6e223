"""``osprey local``: the synthesized control plane on an embedded moto server, driven through the CLI.

The server runs in this process (as ``osprey local up`` runs it in its own); ``cycle`` and ``status`` talk to it
through its endpoint and the state file, exactly as from another shell.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.local.fleet import DEFAULT_JOBS
from osprey.local.loads import load_at
from osprey.local.server import LocalAws, free_port
from osprey.local.session import LocalState, bring_up


def document(output: str) -> Any:
    """The CLI's (indented) JSON document. In this test the handlers run in the test's process, so their
    single-line log records are in the same output, before it and (from the gang watches, which run on in
    the background) after it; with `osprey local up` they print in the server's process."""
    parsed, _ = json.JSONDecoder().raw_decode(output[output.index('{\n  "') :])
    return parsed


@pytest.fixture
def local(template: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalState]:
    path = tmp_path / "local.json"
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(path))
    with LocalAws(free_port()) as aws:
        yield bring_up(aws, template, path)


def test_up_deploys_the_control_plane_and_registers_the_simulated_fleet(local: LocalState) -> None:
    # Then the state file says where everything is, and the registry holds every simulated job
    assert LocalState.load(Path(os.environ["OSPREY_LOCAL_STATE"])) == local
    assert set(local.functions) >= {"lease", "shards", "derive", "apply", "finish", "ingest"}
    assert [job.label for job in local.jobs] == [job.label for job in DEFAULT_JOBS]
    result = CliRunner().invoke(app, ["local", "status", "--json"])
    assert result.exit_code == 0, result.output
    status = document(result.output)
    assert status["endpoint"] == local.endpoint
    # (the plain EKS job is registered by the first cycle's discovery step, from the cluster's Kubernetes
    # API; the two gangs already are, since their watches started when they were registered)
    assert {item["job"] for item in status["decisions"]} == {
        j.label for j in DEFAULT_JOBS if j.backend != "eks" or j.gang_workers
    }
    assert {item["priority"] for item in status["decisions"]} == {None}  # nothing derived yet


def test_cycle_runs_the_deployed_state_machine_and_prints_the_applied_decisions(local: LocalState) -> None:
    # When two cycles run
    runner = CliRunner()
    first = runner.invoke(app, ["local", "cycle", "--json"])
    plot = Path(os.environ["OSPREY_LOCAL_STATE"]).with_name("priorities.png")
    second = runner.invoke(app, ["local", "cycle", "--plot", str(plot)])

    # Then the first succeeded and moved every job from the initial 50 by at most maxPriorityChange (10)
    assert first.exit_code == 0, first.output
    cycle = document(first.output)
    assert cycle["status"] == "SUCCEEDED"
    assert cycle["tick"] == 0
    resnet = next(job for job in local.jobs if job.label == "resnet-batch")
    assert cycle["loads"]["resnet-batch"]["gpu"] == load_at(resnet, 0)[0]
    decisions = {item["job"]: item for item in cycle["decisions"]}
    assert {item["previous"] for item in decisions.values()} == {50}
    assert all(40 <= item["priority"] <= 60 for item in decisions.values())
    # ... the busiest job went up, the idle one down, and each backend holds the applied value
    assert decisions["resnet-batch"]["priority"] == 60
    assert decisions["etl-batch"]["priority"] == 40
    assert decisions["resnet-batch"]["onBackend"] == "weightFactor 6.3096"
    assert decisions["bert-sagemaker"]["onBackend"].startswith("schedulingPriority ")
    gpt = decisions["gpt-sagemaker"]
    assert gpt["onBackend"] == f"tag osprey:derived-priority={gpt['priority']}"
    # ... including the EKS job the cycle discovered on the cluster's Kubernetes API (Kueue band 0..1000)
    vit = decisions["vit-eks"]
    assert (vit["backend"], vit["simulated"]) == ("eks", True)
    assert vit["onBackend"] == f"workload priority {vit['priority'] * 10}"
    # ... and the second cycle (human-readable) continued from there
    assert second.exit_code == 0, second.output
    assert "SUCCEEDED (tick 1)" in second.output
    assert "resnet-batch" in second.output
    # ... with the load behind each priority (what the rules read) and what a Batch weightFactor means
    resnet_row = next(line for line in second.output.splitlines() if line.startswith("resnet-batch "))
    assert re.search(r"gpu \d+ membw \d+ latency \d+", resnet_row), resnet_row
    assert re.search(r"weightFactor [\d.]+ \(\d+% share\)", resnet_row), resnet_row
    assert "ON BACKEND: Batch weightFactor, LOWER gets more of the queue" in second.output
    # ... and `osprey explain`, with no flags, reads the same registry through the running local
    explained = runner.invoke(app, ["explain", "resnet-batch"])
    assert explained.exit_code == 0, explained.output
    assert "EFFECTIVE" in explained.output
    assert f"osprey local at {local.endpoint}" in runner.invoke(app, ["jobs"]).output
    # ... and the plot covers both cycles (a PNG file, from the registry's decision history)
    assert f"wrote {plot} (2 cycles)" in second.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # ... and the live view shows progress and the third cycle's table
    live = runner.invoke(app, ["local", "cycle", "--live"])
    assert live.exit_code == 0, live.output
    assert "1/1" in live.output
    assert "(tick 2)" in live.output
    assert "resnet-batch" in live.output
    # ... with each gang's watch (still waiting or formed by now: its clock started at `up`)
    ddp = next(line for line in live.output.splitlines() if "ddp-eks" in line)
    assert "waiting" in ddp or "ready" in ddp


def test_commands_without_a_running_local_aws_say_how_to_start_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OSPREY_LOCAL_STATE", str(tmp_path / "none.json"))
    result = CliRunner().invoke(app, ["local", "cycle"])
    assert result.exit_code == 1
    assert "run `osprey local up`" in result.output
    bad = CliRunner().invoke(app, ["local", "up", "--deploy", "helm"])
    assert bad.exit_code == 2  # a usage error (docs/cli.md, Exit codes)
    assert "--deploy must be cdk or template" in bad.output
    down = CliRunner().invoke(app, ["local", "down"])
    assert down.exit_code == 0
    assert "not up" in down.output


def _osprey(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from osprey.cli.main import main; main()", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_a_detached_server_serves_cycles_to_other_processes_until_down(
    template: dict[str, Any], tmp_path: Path
) -> None:
    # Given `osprey local up --detach` (its own process) on a synthesized template
    template_file = tmp_path / "Osprey.template.json"
    template_file.write_text(json.dumps(template))
    state_file = tmp_path / "local.json"
    env = {**os.environ, "OSPREY_LOCAL_STATE": str(state_file)}
    # (gangs that wait long enough for their watches to be still running at `down`)
    up = _osprey(
        "local",
        "up",
        "--detach",
        "--port",
        str(free_port()),
        "--template",
        str(template_file),
        "--gang-timeout",
        "600",
        env=env,
        timeout=200,
    )
    assert up.returncode == 0, up.stdout + up.stderr
    # ... which showed its progress with the time since it started, the last line once it was up
    progress = up.stdout.strip().splitlines()
    assert all(re.match(r"\[\d+:\d\d\] ", line) for line in progress), up.stdout
    assert any("creating the template's resources" in line for line in progress)
    assert "osprey local is up at http://localhost:" in progress[-1]
    pid = LocalState.load(state_file).pid
    try:
        # When another process runs a cycle
        cycle = _osprey("local", "cycle", "--json", env=env)
        # Then its output is only the decisions (the handlers log in the server's process)
        assert cycle.returncode == 0, cycle.stdout + cycle.stderr
        result = json.loads(cycle.stdout)
        assert result["status"] == "SUCCEEDED"
        assert {item["previous"] for item in result["decisions"]} == {50}
        # ... and `osprey jobs`, given no table, finds the running local by itself (its state file), and
        # --watch redraws it
        watched = _osprey(
            "jobs", "--watch", "--interval", "0.2", "--count", "2", "--backend", "batch", env=env
        )
        assert watched.returncode == 0, watched.stdout + watched.stderr
        assert (
            watched.stdout.count(f"osprey local at {LocalState.load(state_file).endpoint} (pid {pid})") == 2
        )
        assert watched.stdout.count("resnet-batch") == 2
        assert "vit-eks" not in watched.stdout
    finally:
        down = _osprey("local", "down", env=env)
    # ... and `down` stops the server, first the gang watches still waiting (the two seeded gangs, and any
    # job the cycle's EKS discovery registered under a policy with coScheduling enabled), and removes the
    # state file
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"pid {pid}" in down.stdout
    stopped = re.search(
        r"stopped (\d+) running execution\(s\) \(gang watches\)", state_file.with_suffix(".log").read_text()
    )
    assert stopped is not None
    assert int(stopped.group(1)) >= 2
    assert not state_file.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
