"""``osprey.slurm`` and ``osprey slurm annotate`` without a cluster: what a user sees in the script, the REST
submission and the CLI's exit codes. (tests/slurm/test_submit.py submits the results to a real Slurm.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey.slurm import annotate_script, annotate_submission, script_environment
from osprey_control.backends.slurm import block_from_comment
from osprey_control.contract import OspreyBlockError

SEED = Path(__file__).parent / "data" / "seed_train.sbatch"


def _comment(text: str) -> str:
    line = next(line for line in text.splitlines() if line.startswith("#SBATCH --comment="))
    return line.removeprefix("#SBATCH --comment=").strip("'\"")


def test_the_seed_script_keeps_its_lines_and_gains_the_marker_and_a_default_policy() -> None:
    # Given the seed's script, with only OSPREY_ENABLED=1 and OSPREY_INTERVAL=60
    seed = SEED.read_text()
    # When it is annotated without options
    annotated = annotate_script(seed)
    # Then its lines are all still there, OSPREY_INTERVAL untouched, and the marker names default-policy
    assert all(line in annotated.text.splitlines() for line in seed.splitlines())
    block = block_from_comment(_comment(annotated.text))
    assert block is not None
    assert block.policy == "default-policy"
    assert annotated.notes == [
        "no OSPREY_PRIORITY_POLICY in the script and no policy given: using default-policy"
    ]
    assert script_environment(annotated.text)["OSPREY_INTERVAL"] == "60"
    # And the marker and exports come before the first command (sbatch stops reading #SBATCH there)
    lines = annotated.text.splitlines()
    assert lines.index("srun python train.py") > max(
        i for i, line in enumerate(lines) if line.startswith("#SBATCH")
    )
    assert 'export OSPREY_JOB_ID="${SLURM_CLUSTER_NAME}/${SLURM_JOB_ID}"' in lines
    # And annotating again changes nothing
    assert annotate_script(annotated.text).text == annotated.text


def test_options_join_the_scripts_values_and_a_contradiction_names_both() -> None:
    annotated = annotate_script(
        SEED.read_text(), {"priority_derivation_profile": "training-policy", "gang_timeout": 180}
    )
    block = block_from_comment(_comment(annotated.text))
    assert block is not None
    assert (block.policy, block.gang_timeout) == ("training-policy", 180)
    with pytest.raises(OspreyBlockError, match=r"OSPREY_PRIORITY_POLICY.*contradicts"):
        annotate_script(annotated.text, {"priority_derivation_profile": "aging-policy"})
    with pytest.raises(OspreyBlockError, match="OSPREY_ENABLED=0"):
        annotate_script("#!/bin/bash\nexport OSPREY_ENABLED=0\nsleep 1\n")
    with pytest.raises(OspreyBlockError, match="OSPREY_GANG_TIMEOUT"):
        annotate_script("#!/bin/bash\nexport OSPREY_ENABLED=1\nexport OSPREY_GANG_TIMEOUT=soon\n")


def test_a_users_own_comment_is_kept_beside_the_marker() -> None:
    script = "#!/bin/bash\n#SBATCH --nodes=1 --comment='nightly eval'\nsleep 1\n"
    annotated = annotate_script(script, {"priority_derivation_profile": "training-policy"})
    assert "#SBATCH --nodes=1" in annotated.text
    assert _comment(annotated.text).endswith(",nightly eval")


def test_a_rest_submission_gets_environment_and_marker_in_either_environment_form() -> None:
    job = {
        "name": "eval",
        "current_working_directory": "/fsx",
        "environment": {"PATH": "/bin"},
        "comment": "x",
    }
    made = annotate_submission(job, {"priority_derivation_profile": "training-policy"})
    assert made["environment"] == {
        "PATH": "/bin",
        "OSPREY_ENABLED": "1",
        "OSPREY_PRIORITY_POLICY": "training-policy",
    }
    assert made["comment"] == "osprey:enabled=true,osprey:policy=training-policy,x"
    assert job["environment"] == {"PATH": "/bin"}  # the input is not modified
    listed = annotate_submission({**job, "environment": ["PATH=/bin"]}, {"priority_derivation_profile": "p1"})
    assert listed["environment"] == ["PATH=/bin", "OSPREY_ENABLED=1", "OSPREY_PRIORITY_POLICY=p1"]
    with pytest.raises(OspreyBlockError, match=r"job\.current_working_directory"):
        annotate_submission({"name": "x"}, {"priority_derivation_profile": "p1"})
    with pytest.raises(OspreyBlockError, match="contradicts"):
        annotate_submission(
            {**job, "environment": {"OSPREY_PRIORITY_POLICY": "other"}}, {"priority_derivation_profile": "p1"}
        )


def test_the_cli_prints_the_script_notes_on_stderr_and_exits_1_on_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["slurm", "annotate", str(SEED), "--co-schedule"])
    assert done.exit_code == 0, done.output
    assert "osprey:co-schedule=true" in done.stdout
    assert "note:" in done.stderr
    assert "default-policy" in done.stderr
    bad = runner.invoke(app, ["slurm", "annotate", str(SEED), "--policy", "Not_A_Label"])
    assert bad.exit_code == 1
    assert "priority_derivation_profile" in bad.stderr
    missing = runner.invoke(app, ["slurm", "annotate", str(tmp_path / "nope.sbatch")])
    assert missing.exit_code == 2  # a missing input file: a usage error (docs/cli.md)
    assert "cannot read" in missing.stderr


@pytest.mark.parametrize("value", ["true", "TRUE", " 1", "yes"])
def test_annotating_a_script_whose_opt_in_is_not_exactly_1_names_the_one_value(value: str) -> None:
    # Given a script exporting OSPREY_ENABLED with a value other than the one that opts in (1) or out (0)
    # When it is annotated, then the error names the value and what to write (osprey_control.contract.opt_in)
    with pytest.raises(OspreyBlockError, match="write OSPREY_ENABLED=1"):
        annotate_script(f"#!/bin/bash\nexport OSPREY_ENABLED='{value}'\nsleep 1\n")
