"""The simulator's job-level signals come from the production definitions (derivation.job_signals), fed with
what production would know: the declared limit before a job reports progress, never its true duration."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from osprey.simulate import JobRun, Status
from osprey.simulate.model import SimulationError
from osprey.simulate.telemetry import job_values, node_metrics
from tests.simulate.helpers import job, run, workload


def _queued(declared: float | None) -> JobRun:
    """An 8-GPU job submitted at t=100 and still queued."""
    return JobRun(0, job("small", 100, 8, 3000, declared=declared), 1, 8, Status.QUEUED, queued_since_s=100)


def test_a_queued_job_reports_its_declared_limit_and_requested_gpus_but_no_node_metrics() -> None:
    # Given an 8-GPU job queued since t=100 declaring 7200 s, when it is observed at t=500, then remaining_time
    # is the declared limit (it has held nothing yet) and it has no node metrics.
    queued = _queued(7200)
    assert node_metrics(queued, random.Random(0)) == ()
    assert job_values(queued, 500) == {
        "queue_wait": 400.0,
        "attained_service": 0.0,
        "remaining_time": 7200.0,
        "requested_gpus": 8.0,
    }


def test_a_job_without_a_declared_limit_has_no_remaining_time_until_it_reports() -> None:
    assert "remaining_time" not in job_values(_queued(None), 500)


def test_a_finished_job_attained_its_gpu_hours_and_remaining_time_came_from_progress() -> None:
    # Given an 8-GPU job of 1800 s that declared 7200 s, after it ran its attained service is 8 x 0.5 h.
    sim = run(workload(job("a", 0, 8, 1800, declared=7200)), "fifo")
    (a,) = sim.runs
    values = job_values(a, a.end_s or 0.0)
    assert values["attained_service"] == pytest.approx(4.0)
    # Finished: no longer running, so the budget minus the time held (the limit, never the true duration).
    assert values["remaining_time"] == pytest.approx(7200 - 1800)


def test_a_queued_job_with_an_estimate_reports_the_estimate_before_its_declared_limit() -> None:
    # Given an 8-GPU job queued since t=100 that declares a 7200 s limit and an expected_runtime of 3300 s
    estimated = JobRun(
        0,
        replace(job("small", 100, 8, 3000, declared=7200), expected_runtime_s=3300.0),
        1,
        8,
        Status.QUEUED,
        queued_since_s=100,
    )
    # When it is observed at t=500, then remaining_time is the user's estimate, as production's collector
    # reads it (expected_runtime before the declared limit), never the true 3000 s
    assert job_values(estimated, 500)["remaining_time"] == 3300.0


def test_the_slurm_model_enforces_the_declared_limit_never_the_estimate() -> None:
    # Given a 1-GPU job of 100 s that estimates 50 s and declares 600 s, when Slurm's model runs it, then it
    # completes: the estimate is Osprey's signal only, never the limit slurmctld kills at
    sim = run(workload(replace(job("a", 0, 1, 100, declared=600), expected_runtime_s=50.0)), "slurm")
    (a,) = sim.runs
    assert a.status is Status.DONE
    assert a.end_s == pytest.approx(100.0)


def test_an_estimate_of_zero_seconds_is_refused_with_the_job_named() -> None:
    bad = replace(job("a", 0, 1, 100), expected_runtime_s=0.0)
    with pytest.raises(SimulationError, match="job a: an expected runtime must be > 0 seconds"):
        workload(bad).validate()
