"""Given Osprey's ``job_submit.lua`` installed as docs/slurm.md says (the head node's installer, on a real
slurmctld 22.05), when jobs are submitted, then each job that opted in is created mid-range (or at its own
``initial-priority``), before slurmctld's main scheduler first looks at it, and every other job is untouched."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.slurm import (
    DEFAULT_SLURM_PRIORITY_RANGE,
    SlurmApplier,
    SlurmPriorityRange,
    block_from_comment,
    install_script,
)
from osprey_control.contract import OspreyBlockError
from tests.slurm.cluster import LocalSlurm
from tests.slurm.conftest import running_cluster
from tests.slurm.test_real_slurm import MARK, _fill, _record, _wait

MIDDLE = DEFAULT_SLURM_PRIORITY_RANGE.start  # 5001


def _install(slurm: LocalSlurm, *args: str, priority_range: SlurmPriorityRange | None = None) -> str:
    """Run the installer `osprey slurm submit-plugin` prints, as root, against this cluster's slurm.conf."""
    script = install_script(priority_range or DEFAULT_SLURM_PRIORITY_RANGE)
    done = subprocess.run(
        ["bash", "-c", script, "osprey-job-submit.sh", *args],
        env=slurm.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"installer failed ({done.returncode}): {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def plugged() -> Iterator[LocalSlurm]:
    # As on ParallelCluster: the installer runs first (the head node's OnNodeStart action) and slurm.conf names
    # the plugin (CustomSlurmSettings: JobSubmitPlugins: lua); slurmctld refuses to start without the script.
    yield from running_cluster("JobSubmitPlugins=lua", before_start=_install)


@pytest.fixture
def idle(plugged: LocalSlurm) -> LocalSlurm:
    plugged.run("scancel", "--partition=gpu", "--full", check=False)
    plugged.wait_idle()
    return plugged


COMMENTS = {
    "marker": "osprey:enabled=true,osprey:policy=default-policy",
    "marker in the user's own text": "nightly run; osprey:enabled=true;osprey:policy=p",
    "enabled True (not the one opt-in value)": "osprey:enabled=True,osprey:policy=default-policy",
    "enabled 1 as a tag (the environment's value)": "osprey:enabled=1,osprey:policy=default-policy",
    "own initial priority": "osprey:enabled=true,osprey:policy=training-policy,osprey:initial-priority=80",
    "environment form": "OSPREY_ENABLED=1,OSPREY_PRIORITY_POLICY=default-policy",
    "opted out": "osprey:enabled=false,osprey:policy=default-policy",
    "out by tag, in by environment (the tag wins)": "osprey:enabled=false,OSPREY_ENABLED=1,OSPREY_PRIORITY_POLICY=a",
    "unmarked": "just a comment",
    "no policy": "osprey:enabled=true",
    "not a policy name": "osprey:enabled=true,osprey:policy=Default_Policy",
    "an invalid enabled value": "osprey:enabled=yes,osprey:policy=default-policy",
}


def _managed(comment: str) -> bool:
    """Whether Osprey's own reader manages a job with this comment (an invalid block is a reported problem)."""
    try:
        return block_from_comment(comment) is not None
    except OspreyBlockError:
        return False


def test_opted_in_jobs_start_mid_range_and_the_rest_keep_their_own_priority(idle: LocalSlurm) -> None:
    # Given every node busy, when a job per comment is submitted, and one job with no comment at all
    _fill(idle)
    jobs = {
        label: idle.sbatch("-N1", "-t", "5", f"--comment={comment}", wrap="sleep 60")
        for label, comment in COMMENTS.items()
    }
    bare = idle.sbatch("-N1", "-t", "5", wrap="sleep 60")
    # Then each opted-in job is created at the middle of Osprey's range (its own initial-priority mapped, when
    # it has one); every other job keeps its own priority, 1
    priorities = idle.sprio()
    assert {label: priorities[job] for label, job in jobs.items()} == {
        "marker": MIDDLE,
        "marker in the user's own text": MIDDLE,
        "own initial priority": DEFAULT_SLURM_PRIORITY_RANGE.map(80),
        "environment form": MIDDLE,
        "enabled True (not the one opt-in value)": 1,
        "enabled 1 as a tag (the environment's value)": 1,
        "opted out": 1,
        "out by tag, in by environment (the tag wins)": 1,
        "unmarked": 1,
        "no policy": 1,
        "not a policy name": 1,
        "an invalid enabled value": 1,
    }
    assert priorities[bare] == 1
    # And those are exactly the jobs Osprey's marker reader manages
    assert {label for label, job in jobs.items() if priorities[job] != 1} == {
        label for label, comment in COMMENTS.items() if _managed(comment)
    }


def test_a_held_submission_stays_held_and_an_unprivileged_users_job_starts_mid_range(
    idle: LocalSlurm,
) -> None:
    _fill(idle)
    # Given a marked job submitted held (sbatch --hold: priority 0), and one submitted by an ordinary user
    held = idle.sbatch("-N1", "-t", "5", "--hold", MARK, wrap="sleep 60")
    idle.root.chmod(0o777)  # the user's job writes its output there
    done = subprocess.run(
        ["runuser", "-u", "nobody", "--", "sbatch", "--parsable", "-N1", "-t", "5", f"--chdir={idle.root}",
         "--output=/dev/null", MARK, "--wrap", "sleep 60"],
        env=idle.env, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    users = int(done.stdout.strip().split(";")[0])
    # Then the held job is still held (the plugin never releases a hold), and the user's job is mid-range:
    # the plugin runs inside slurmctld, so no user needs the operator's right to set a priority
    out = idle.run("squeue", "-h", "-o", "%i %Q %r", "-j", f"{held},{users}")
    rows = {
        int(job): (int(priority), reason)
        for job, priority, reason in (line.split() for line in out.splitlines())
    }
    assert rows[held] == (0, "JobHeldUser")
    assert rows[users][0] == MIDDLE


def test_a_new_job_that_fits_starts_at_submission_ahead_of_a_blocked_ranked_job(idle: LocalSlurm) -> None:
    # Given half the nodes busy for 5 minutes and a 4-node job Osprey has ranked low (10 -> 1001): it waits
    busy = idle.sbatch("-N2", "--exclusive", "-t", "5", wrap="sleep 300")
    _wait(lambda: idle.squeue_states().get(busy) == "RUNNING", "the busy job to run")
    ranked = idle.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 60")
    report = SlurmApplier(lambda cluster: idle.client()).apply(
        [PriorityChange(_record(idle.cluster, ranked), 10)]
    )
    assert [result.outcome for result in report.results] == [Outcome.APPLIED]
    # When a marked one-node job arrives whose 10-minute limit ends after the ranked job's reservation (so
    # backfill may not start it)
    new = idle.sbatch("-N1", "--exclusive", "-t", "10", MARK, wrap="sleep 60")
    # Then it starts at once, before any Osprey cycle: created at 5001, above the ranked job, it is the first
    # job slurmctld's scheduler tries
    _wait(lambda: idle.squeue_states().get(new) == "RUNNING", "the new job to start", timeout=10)
    assert idle.squeue_states()[ranked] == "PENDING"


def test_without_the_plugin_the_same_new_job_waits_behind_the_ranked_one(clean: LocalSlurm) -> None:
    # Given ParallelCluster's defaults (no plugin, no priority weights) and the same queue
    busy = clean.sbatch("-N2", "--exclusive", "-t", "5", wrap="sleep 300")
    _wait(lambda: clean.squeue_states().get(busy) == "RUNNING", "the busy job to run")
    ranked = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 60")
    SlurmApplier(lambda cluster: clean.client()).apply([PriorityChange(_record(clean.cluster, ranked), 10)])
    new = clean.sbatch("-N1", "--exclusive", "-t", "10", MARK, wrap="sleep 60")
    # Then the new job sits at 1, below the ranked job, and neither scheduler starts it (backfill runs every
    # second here: three passes)
    time.sleep(3)
    assert clean.sprio()[new] == 1
    assert clean.squeue_states()[new] == "PENDING"


def test_the_installer_enables_the_plugin_on_a_running_cluster_once(clean: LocalSlurm) -> None:
    # Given a running cluster without the plugin
    try:
        # When the installer runs with --enable (for a cluster that already exists), twice
        first = _install(clean, "--enable", priority_range=SlurmPriorityRange(1000, 2000))
        second = _install(clean, "--enable", priority_range=SlurmPriorityRange(1000, 2000))
        # Then slurmctld runs the plugin without a restart, slurm.conf names it once, and a new marked job
        # starts at the middle of that range
        assert "now includes lua" in first
        assert "already includes lua" in second
        assert clean.conf.read_text().count("JobSubmitPlugins=lua") == 1
        _fill(clean)
        job = clean.sbatch("-N1", "-t", "5", MARK, wrap="sleep 60")
        assert clean.sprio()[job] == SlurmPriorityRange(1000, 2000).start == 1500
    finally:  # the module's cluster goes back to ParallelCluster's defaults for the other tests
        text = clean.conf.read_text().replace("JobSubmitPlugins=lua", "")
        clean.conf.write_text(text)
        clean.run("scontrol", "reconfigure")
