"""Submissions made with ``osprey slurm annotate`` and ``osprey.slurm.annotate_submission`` on a real Slurm:
the control plane discovers them with their block, and the job itself sees its ``OSPREY_*`` environment."""

from __future__ import annotations

import time
from pathlib import Path

from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.slurm import annotate_submission
from osprey_control.backends.slurm import discover
from osprey_control.registry import JobStatus
from tests.slurm.cluster import LocalSlurm

SEED = Path(__file__).parent / "data" / "seed_train.sbatch"


def _wait_for(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and "OSPREY_JOB_ID" in path.read_text():
            return path.read_text()
        time.sleep(0.2)
    raise AssertionError(f"{path} never written")


def test_the_annotated_seed_script_runs_with_its_environment_and_is_discovered(clean: LocalSlurm) -> None:
    # Given the seed's script annotated by the CLI with a policy, its training command replaced by one that
    # prints the job's OSPREY_* environment
    done = CliRunner().invoke(app, ["slurm", "annotate", str(SEED), "--policy", "training-policy"])
    assert done.exit_code == 0, done.stderr
    script = done.stdout.replace("srun python train.py", "env | grep ^OSPREY_ | sort; sleep 60")
    # When it is submitted with the real sbatch
    job_id = clean.sbatch(script=script)
    # Then the control plane discovers it as an Osprey job with the policy, 2 nodes and 8 GPUs
    found = {o.job_id: o for o in discover(clean.client(), clean.cluster).observations}
    assert job_id in found
    observation = found[job_id]
    assert observation.block.policy == "training-policy"
    assert observation.name == "llama-pretrain"
    assert observation.declared_runtime_s == 600
    assert observation.requested_gpus == 8
    # And the job sees its environment: the seed's own lines and the job id the registry uses
    printed = _wait_for(clean.root / f"job-{job_id}.out")
    assert "OSPREY_ENABLED=1" in printed
    assert "OSPREY_INTERVAL=60" in printed
    assert "OSPREY_PRIORITY_POLICY=training-policy" in printed
    assert f"OSPREY_JOB_ID={clean.cluster}/{job_id}" in printed
    running = {o.job_id: o for o in discover(clean.client(), clean.cluster).observations}[job_id]
    assert running.status is JobStatus.RUNNING
    assert [node.node_id for node in running.nodes] == ["n1", "n2"]


def test_a_rest_submission_annotated_by_the_sdk_is_discovered(clean: LocalSlurm) -> None:
    # Given a slurmrestd submission annotated with the block
    job = annotate_submission(
        {
            "name": "rest-eval",
            "nodes": 1,
            "time_limit": 5,
            "current_working_directory": str(clean.root),
            "standard_output": str(clean.root / "rest-%j.out"),
            "environment": {"PATH": "/usr/bin:/bin"},
        },
        {"priority_derivation_profile": "inference-policy", "initial_priority": 70},
    )
    # When it is submitted through slurmrestd
    job_id = clean.client().submit("#!/bin/bash\nenv | grep ^OSPREY_ | sort\nsleep 30\n", job)
    # Then discovery finds it with its block
    found = {o.job_id: o for o in discover(clean.client(), clean.cluster).observations}
    assert found[job_id].block.policy == "inference-policy"
    assert found[job_id].block.initial_priority == 70
    printed = _wait_for_text(clean.root / f"rest-{job_id}.out", "OSPREY_PRIORITY_POLICY")
    assert "OSPREY_PRIORITY_POLICY=inference-policy" in printed


def _wait_for_text(path: Path, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return path.read_text()
        time.sleep(0.2)
    raise AssertionError(f"{path} never contained {text!r}")


def test_a_users_own_comment_survives_sbatch_beside_the_marker(clean: LocalSlurm) -> None:
    # Given a script whose comment has a space (annotate quotes the new #SBATCH line)
    done = CliRunner().invoke(
        app,
        ["slurm", "annotate", "-", "--policy", "training-policy"],
        input=('#!/bin/bash\n#SBATCH --comment="nightly eval"\nsleep 30\n'),
    )
    assert done.exit_code == 0, done.stderr
    # When sbatch reads it
    job_id = clean.sbatch(script=done.stdout)
    # Then Slurm holds marker and text unquoted, and the job is discovered
    assert clean.run("squeue", "-h", "-j", str(job_id), "-o", "%k").strip() == (
        "osprey:enabled=true,osprey:policy=training-policy,nightly eval"
    )
    assert job_id in {o.job_id for o in discover(clean.client(), clean.cluster).observations}
