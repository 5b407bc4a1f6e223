"""Workloads: the LLM generator's documented shape, the seed's case, the Alibaba trace handling, job CSVs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from osprey.simulate import (
    TRACE_DIR,
    Job,
    SimulationError,
    Workload,
    homogeneous_nodes,
    llm_workload,
    read_alibaba,
    read_job_csv,
    seed_workload,
)


def test_llm_gangs_are_whole_nodes_from_8_to_512_gpus_with_many_small_and_few_large() -> None:
    scenario = llm_workload(seed=0, jobs=400, gpus=1024)
    sizes = Counter(job.gpus for job in scenario.jobs)
    assert set(sizes) <= {8, 16, 32, 64, 128, 256, 512}
    assert sizes[8] > sizes[64] > sizes[512] > 0
    durations = sorted(job.duration_s for job in scenario.jobs)
    median, p99 = durations[len(durations) // 2], durations[int(0.99 * len(durations))]
    assert p99 > 8 * median  # heavy tail
    utils = [job.utilization for job in scenario.jobs]
    assert min(utils) < 0.5  # input-bound jobs
    assert max(utils) > 0.85  # well-tuned jobs
    assert scenario.node_gpus == (8,) * 128


def test_the_seed_case_is_64_gpus_and_5_jobs_submitted_together() -> None:
    scenario = seed_workload()
    assert scenario.total_gpus == 64
    assert len(scenario.jobs) == 5
    assert max(job.submit_s for job in scenario.jobs) <= 300
    assert max(job.gpus for job in scenario.jobs) == 64


def test_a_job_csv_is_read_and_a_bad_value_names_its_line(tmp_path: Path) -> None:
    good = tmp_path / "jobs.csv"
    good.write_text("job_id,submit_time_s,num_gpus,duration_s,utilization\nb,5,16,100,0.4\na,0,8,50,\n")
    scenario = read_job_csv(good, homogeneous_nodes(32))
    assert [job.job_id for job in scenario.jobs] == ["a", "b"]
    assert scenario.jobs[1].utilization == 0.4
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time_s,num_gpus,duration_s\na,0,eight,50\n")
    with pytest.raises(SimulationError, match="line 2: num_gpus: 'eight' is not an integer"):
        read_job_csv(bad, homogeneous_nodes(32))


def test_a_gang_that_is_not_whole_nodes_is_rejected() -> None:
    for gpus, nodes in ((12, (8, 8)), (16, (8, 4))):
        broken = Workload("x", (Job("gang", 0, gpus, 100),), nodes)
        with pytest.raises(SimulationError, match="whole number"):
            broken.validate()


trace = pytest.mark.skipif(not (TRACE_DIR / "alibaba_openb2023_gpu_replay.csv").is_file(), reason="no trace")


@trace
def test_alibaba_replay_starts_at_the_window_and_gives_fractional_tasks_a_whole_gpu() -> None:
    scenario = read_alibaba(gpus=32)
    assert len(scenario.jobs) == 6203 - 31  # the tasks created before the window are dropped
    assert scenario.jobs[0].submit_s >= 0
    assert {job.gpus for job in scenario.jobs} == {1, 2, 4, 8}
    assert scenario.node_gpus == (8, 8, 8, 8)
    real = read_alibaba(limit=10)
    assert real.total_gpus == 6212
    assert len(real.node_gpus) == 1213


def test_llm_jobs_declare_an_overestimated_runtime_in_whole_hours_without_changing_the_jobs() -> None:
    # Given the generator, every job declares a limit of at least its duration, in whole hours; the jobs
    # themselves (sizes, durations, arrivals) are what they were before limits were declared.
    generated = llm_workload(seed=3, jobs=200, gpus=1024, load=1.0)
    for job in generated.jobs:
        assert job.declared_runtime_s is not None
        assert job.declared_runtime_s >= job.duration_s
        assert job.declared_runtime_s % 3600 == 0
    ratios = sorted(j.declared_runtime_s / j.duration_s for j in generated.jobs if j.declared_runtime_s)
    assert ratios[len(ratios) // 2] > 1.3  # users over-estimate


def test_a_job_csv_takes_an_optional_declared_runtime(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(
        "job_id,submit_time_s,num_gpus,duration_s,declared_runtime_s\na,0,8,500,3600\nb,5,8,100,\n"
    )
    jobs = read_job_csv(path, (8, 8)).jobs
    assert [job.declared_runtime_s for job in jobs] == [3600.0, None]
    path.write_text("job_id,submit_time_s,num_gpus,duration_s,declared_runtime_s\na,0,8,500,-1\n")
    with pytest.raises(SimulationError, match="line 2: declared_runtime_s: must be > 0"):
        read_job_csv(path, (8, 8))
