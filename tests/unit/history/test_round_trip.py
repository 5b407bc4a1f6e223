"""Given a run of the simulator's native Slurm model written out as ``sacct`` records it, when the record is
replayed through ``slurm``, then the replay's mean wait is the run's: the record keeps what decides waiting
(submissions, sizes, how long each job held its GPUs), and what the replay draws per seed (startup,
utilization) does not move a native scheduler that reads neither. Cut while jobs still run and wait, the
replay cannot know how long they will, and waits less (docs/history.md gives the numbers)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from osprey.simulate import Simulator, llm_workload, make_scheduler
from osprey.simulate.history import SACCT_FORMAT, read_history, replay_record

BASE = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def _stamp(seconds: float | None) -> str:
    return (
        "Unknown"
        if seconds is None
        else datetime.fromtimestamp(BASE + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    )


def _sacct(cut_fraction: float, path: Path) -> float:
    """The native Slurm run of an LLM workload as sacct would record it at ``cut_fraction`` of the arrivals;
    returns the mean wait (s) of the jobs submitted by then, in the full run."""
    workload = llm_workload(seed=0, jobs=80, gpus=256, load=1.0)
    sim = Simulator(workload, make_scheduler("slurm"), seed=0)
    sim.run(None)
    cut = cut_fraction * workload.jobs[-1].submit_s  # inf: the whole run
    lines, waits = [SACCT_FORMAT.replace(",", "|")], []
    for number, run in enumerate(sim.runs):
        job = run.job
        if job.submit_s > cut:
            continue
        waits.append(run.queued_s)
        allocated = job.submit_s + run.queued_s  # Slurm's Start: the allocation (native Slurm never evicts)
        start = allocated if allocated <= cut else None
        end = run.end_s if run.end_s is not None and run.end_s <= cut else None
        assert job.declared_runtime_s is not None
        limit = int(job.declared_runtime_s)
        nodes = max(1, job.gpus // 8)
        tres = f"cpu={12 * job.gpus},gres/gpu={job.gpus},node={nodes}"
        cells = (
            str(5000 + number), job.job_id, "user", job.share, "gpu", _stamp(job.submit_s), _stamp(start),
            _stamp(end), f"{limit // 60}", str(nodes), tres if start is not None else "", tres,
            "COMPLETED" if end is not None else ("RUNNING" if start is not None else "PENDING"),
        )  # fmt: skip
        lines.append("|".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return sum(waits) / len(waits)


def test_the_native_replay_of_a_whole_record_waits_as_long_as_the_run_it_came_from(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    original = _sacct(math.inf, path)
    replay = replay_record(read_history(path), ["slurm"], [0, 1, 2], gpus=256)
    (native,) = replay.means
    assert (native.jobs, replay.counts.finished) == (80, 80)
    assert native.mean_wait_s == pytest.approx(original, rel=0.01)


def test_a_record_cut_while_jobs_run_and_wait_replays_them_all(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    original = _sacct(0.85, path)
    replay = replay_record(read_history(path), ["slurm"], [0, 1, 2], gpus=256)
    counts = replay.counts
    assert (counts.finished, counts.running, counts.queued) == (61, 3, 3)
    (native,) = replay.means
    assert native.completed == native.jobs == 67
    # The queued jobs' run times are drawn from finished ones: far shorter than the 37-hour job that was really
    # waiting, so the replay waits less than the full run did (a lower bound, said in the docs)
    assert 0 < native.mean_wait_s < original
