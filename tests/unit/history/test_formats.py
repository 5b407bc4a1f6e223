"""Given each scheduler's own record of past jobs (a small hand-written fixture in its real output format), when
it is read, then the format is detected from the content and each job's GPUs, team, times, limit and state are
what the scheduler recorded; and the replay says how it handled finished, running and queued jobs."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from osprey.simulate.history import PastJob, detect_format, read_history, replay_workload
from osprey.simulate.workloads import LLM_STARTUP

FIXTURES = Path(__file__).parent / "fixtures"
FILES = {
    "slurm": "sacct.txt",
    "kueue": "kueue-workloads.json",
    "batch": "batch-describe-jobs.json",
    "sagemaker": "sagemaker-training-jobs.jsonl",
}


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def by_id(path: Path) -> dict[str, PastJob]:
    return {job.job_id: job for job in read_history(path).jobs}


@pytest.mark.parametrize(("kind", "name"), FILES.items())
def test_the_format_is_detected_from_the_content_not_the_name(kind: str, name: str, tmp_path: Path) -> None:
    renamed = tmp_path / "record.txt"
    shutil.copy(FIXTURES / name, renamed)
    assert detect_format(renamed.read_text()) == kind
    assert read_history(renamed).format == kind


def test_detection_refuses_what_no_scheduler_wrote() -> None:
    for text in ("job_id,submit_time_s\n1,0\n", '{"items": [{"kind": "Pod"}]}', "[1, 2]", "not json"):
        assert detect_format(text) is None, text


def test_slurm_sacct() -> None:
    jobs = by_id(FIXTURES / FILES["slurm"])
    sft = jobs["40112"]
    # GPUs from gres/gpu in AllocTRES, Account as the team, Timelimit in seconds
    assert (sft.gpus, sft.nodes, sft.team, sft.limit_s) == (16, 2, "nlp", 12 * 3600)
    assert (sft.submit, sft.start, sft.end) == (
        at("2026-11-30T08:00:04"),
        at("2026-11-30T08:00:09"),
        at("2026-11-30T14:12:40"),
    )
    assert jobs["40115"].gpus == 8  # typed gres/gpu:a100=8
    assert jobs["40119"].limit_s == 26 * 3600  # 1-02:00:00
    assert jobs["40118"].limit_s is None
    assert jobs["40120"].limit_s is None
    assert jobs["40123"].limit_s == 90 * 60  # minutes alone
    assert jobs["40114"].gpus == 0  # a CPU job
    assert (jobs["40116"].start, jobs["40116"].state) == (None, "CANCELLED")  # Start None: never started
    assert jobs["40117"].end is None  # End Unknown: running
    assert (jobs["40122"].start, jobs["40122"].end, jobs["40122"].gpus) == (
        None,
        None,
        16,
    )  # pending: ReqTRES


def test_slurm_job_steps_are_skipped(tmp_path: Path) -> None:
    # Given sacct without -X: each job's steps under it
    lines = (FIXTURES / FILES["slurm"]).read_text().splitlines()
    step = lines[1].replace("40112|llama-8b-sft", "40112.batch|batch", 1)
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([lines[0], lines[1], step, step.replace("40112.batch", "40112.0")]) + "\n")
    # Then the job counts once
    assert [job.job_id for job in read_history(path).jobs] == ["40112"]


def test_kueue_workloads() -> None:
    jobs = by_id(FIXTURES / FILES["kueue"])
    sft = jobs["nlp/pytorchjob-llama-8b-sft"]
    # podSets' count x GPU requests; creation, Admitted and Finished times; queue as the team; priority
    assert (sft.gpus, sft.nodes, sft.team, sft.priority_class) == (16, 2, "nlp/nlp-queue", 1000)
    assert (sft.submit, sft.start, sft.end) == (
        at("2026-11-30T08:00:00"),
        at("2026-11-30T08:00:02"),
        at("2026-11-30T14:10:00"),
    )
    assert jobs["speech/pytorchjob-whisper-ft"].limit_s == 7200  # maximumExecutionTimeSeconds
    assert jobs["speech/pytorchjob-whisper-ft"].state == "Failed"
    assert jobs["nlp/job-tokenize-c4"].gpus == 0
    assert jobs["nlp/pytorchjob-llama-70b"].end is None  # admitted, not finished: running
    never = jobs["vision/pytorchjob-vit-sweep-4"]
    assert (never.start, never.end is not None) == (None, True)  # finished without admission
    assert jobs["nlp/pytorchjob-llama-8b-dpo"].start is None  # pending


def test_batch_describe_jobs_pages() -> None:
    jobs = {job.job_id.split(" ")[0]: job for job in read_history(FIXTURES / FILES["batch"]).jobs}
    assert len(jobs) == 8  # both pages
    sft = jobs["llama-8b-sft"]
    # A multi-node job: the node range's GPUs x its nodes; epoch ms; shareIdentifier; timeout; priority
    assert (sft.gpus, sft.nodes, sft.team, sft.limit_s, sft.priority_class) == (16, 2, "nlp", 43200, 80)
    assert (sft.submit, sft.start, sft.end) == (
        at("2026-11-30T08:00:00"),
        at("2026-11-30T08:00:40"),
        at("2026-11-30T14:10:00"),
    )
    assert jobs["vit-sweep-3"].gpus == 2
    assert jobs["tokenize-c4"].gpus == 0
    assert jobs["llama-70b-pretrain"].gpus == 32
    assert jobs["llama-70b-pretrain"].end is None
    assert jobs["vit-sweep-4"].start is None
    assert jobs["vit-sweep-4"].end is not None
    assert (jobs["llama-8b-dpo"].start, jobs["llama-8b-dpo"].state) == (None, "RUNNABLE")


def test_sagemaker_training_jobs() -> None:
    record = read_history(FIXTURES / FILES["sagemaker"])
    jobs = {job.job_id.rsplit("-2026", 1)[0]: job for job in record.jobs}
    sft = jobs["llama-8b-sft"]
    # InstanceCount x the catalogue's GPUs per instance; MaxRuntimeInSeconds; the role as the team
    assert (sft.gpus, sft.nodes, sft.limit_s, sft.team) == (16, 2, 43200, "nlp-sagemaker-execution")
    assert sft.start == at("2026-11-30T08:04:10.500000")
    assert jobs["vit-sweep-3"].gpus == 4  # ml.g5.12xlarge
    assert jobs["whisper-ft"].gpus == 8  # ml.p4d.24xlarge
    assert jobs["preprocess"].gpus == 0
    assert record.notes == ("instance types not in the catalogue, taken as no GPUs: ml.m5.4xlarge",)


def test_sagemaker_reads_one_object_and_a_list_too(tmp_path: Path) -> None:
    lines = (FIXTURES / FILES["sagemaker"]).read_text().splitlines()
    one = tmp_path / "one.json"
    one.write_text(lines[0])
    several = tmp_path / "list.json"
    several.write_text("[" + ",".join(lines) + "]")
    assert len(read_history(one).jobs) == 1
    assert len(read_history(several).jobs) == len(lines)


@pytest.mark.parametrize(("kind", "name"), FILES.items())
def test_the_replay_counts_finished_running_and_queued_jobs_and_sizes_the_cluster(
    kind: str, name: str
) -> None:
    record = read_history(FIXTURES / name)
    workload, counts = replay_workload(record, seed=0, gpus=None)
    # Every fixture holds finished jobs, one running, queued ones, one never started and one CPU job
    assert counts.running == 1
    assert counts.queued >= 1
    assert counts.finished >= 4
    assert (counts.never_started, counts.no_gpus) == (1, 1)
    assert len(workload.jobs) == counts.finished + counts.running + counts.queued
    # The cluster is the record's peak concurrent GPUs, in whole 8-GPU nodes, and fits every job
    assert counts.gpus_from_record
    assert counts.gpus % 8 == 0
    assert workload.total_gpus == counts.gpus >= max(job.gpus for job in workload.jobs)
    workload.validate()
    assert workload.jobs[0].submit_s == 0.0
    assert any("peak concurrent GPUs" in note for note in workload.notes)


def test_a_finished_job_needs_the_time_it_ran_and_a_running_one_runs_to_the_records_end() -> None:
    record = read_history(FIXTURES / FILES["slurm"])
    workload, _ = replay_workload(record, seed=0, gpus=None)
    jobs = {job.job_id: job for job in workload.jobs}

    def held(job_id: str) -> float:
        """How long the replayed job holds its GPUs in its first attempt: its drawn startup and its work."""
        job = jobs[job_id]
        workers = job.gpus // 8 if job.gpus > 8 else 1
        return max(LLM_STARTUP.delays(0, job_id, 1, workers)) + job.duration_s

    assert held("40112") == pytest.approx(at("2026-11-30T14:12:40") - at("2026-11-30T08:00:09"), abs=0.01)
    assert held("40115") == pytest.approx(7200, abs=0.01)  # TIMEOUT: it ran into its limit, and no further
    assert jobs["40115"].declared_runtime_s == 7201  # and ends there, not at its limit
    running = next(job for job in record.jobs if job.job_id == "40117")
    assert running.start is not None
    # Running at the record's end: at least to it, drawn from the finished jobs that ran longer (the nlp team
    # has two, fewer than three: everyone's)
    longer = {22351.0, 9163.0, 7200.0, 5671.0}
    assert record.end - running.start < min(longer)
    assert round(held("40117"), 2) in longer
    assert jobs["40117"].share == "nlp"


def test_queued_jobs_draw_their_run_time_per_seed_from_the_finished_ones() -> None:
    record = read_history(FIXTURES / FILES["slurm"])
    finished = {
        min(job.end - job.start, job.limit_s or float("inf"))
        for job in record.jobs
        if job.start is not None and job.end is not None and job.gpus
    }
    draws = set()
    for seed in range(8):
        workload, _ = replay_workload(record, seed=seed, gpus=None)
        queued = next(job for job in workload.jobs if job.job_id == "40122")
        startup = max(LLM_STARTUP.delays(seed, "40122", 1, 2))
        assert round(queued.duration_s + startup, 2) in {round(value, 2) for value in finished}
        draws.add(queued.duration_s)
        assert next(job for job in workload.jobs if job.job_id == "40123").duration_s <= 90 * 60  # its limit
    assert len(draws) > 1  # the seeds spread it


def test_gpus_overrides_the_record() -> None:
    _, counts = replay_workload(read_history(FIXTURES / FILES["kueue"]), seed=0, gpus=128)
    assert (counts.gpus, counts.gpus_from_record) == (128, False)
