"""The guard's verdict: which order a pool gets, on hand-made pools whose outcomes are worked out by hand."""

from __future__ import annotations

import pytest

from osprey_control.guard import (
    NATIVE,
    Candidate,
    GuardSettings,
    LookJob,
    LookPool,
    Model,
    choose_order,
    echo_arrivals,
    pool_signature,
    run_forward,
    runtime_prior,
)

HOUR = 3600.0
EXACT = GuardSettings(samples=1, horizon_s=6 * HOUR)


def _long_job_first() -> LookPool:
    # One 8-GPU node, empty: a 4-hour job submitted first, then four 10-minute jobs.
    jobs = [LookJob("long", 8, False, 4 * HOUR, limit_s=4 * HOUR, waited_s=900.0)]
    jobs += [LookJob(f"short-{n}", 8, False, 600.0, limit_s=600.0, waited_s=600.0 - 60 * n) for n in range(4)]
    return LookPool(8, tuple(jobs))


def test_an_order_that_puts_off_a_job_native_starts_now_is_refused_though_it_waits_less():
    # Given native Slurm (submission order: the 4-hour job first) and a policy that runs the short jobs first
    pool = _long_job_first()
    native = Candidate(NATIVE, {job.key: 50.0 for job in pool.jobs})
    shortest_first = Candidate("policy", {"long": 10.0, **{f"short-{n}": 90.0 for n in range(4)}})
    # When the guard evaluates both over six hours
    verdict = choose_order(Model.SLURM, pool, [native, shortest_first], settings=EXACT)
    # Then the policy's order would wait far less with the same GPU-hours, but it starts the long job 40 minutes
    # later than native does: a job native starts within the horizon is never put off, so the pool stands down
    policy = verdict.score("policy")
    assert policy.wait_s < 0.2 * verdict.score(NATIVE).wait_s
    assert policy.goodput == pytest.approx(verdict.score(NATIVE).goodput)
    assert verdict.stood_down
    assert (policy.qualifies, policy.delayed) == (False, 1)
    assert "policy would start 1 job later than native" in verdict.reason
    assert "(would start 1 job later than native)" in verdict.describe()


def _gang_at_the_head_of_a_share() -> LookPool:
    # A SageMaker training queue on one 8-GPU node: a 4-GPU job runs for one more hour; queued in submission
    # order: an 8-GPU gang of one hour, which blocks its share until it fits, then two 4-GPU 20-minute jobs.
    return LookPool(
        8,
        (
            LookJob("running", 4, True, HOUR, waited_s=600.0),
            LookJob("gang", 8, False, HOUR, waited_s=900.0),
            LookJob("small-0", 4, False, HOUR / 3, waited_s=600.0),
            LookJob("small-1", 4, False, HOUR / 3, waited_s=540.0),
        ),
    )


def test_an_order_that_starts_jobs_earlier_and_no_job_later_is_chosen():
    # Given the queue's native order (the gang first: the small jobs wait behind it for two hours) and a policy
    # that puts the small jobs first: they run on the free GPUs before the running job ends and the gang starts
    pool = _gang_at_the_head_of_a_share()
    native = Candidate(NATIVE, {job.key: 50.0 for job in pool.jobs})
    small_first = Candidate("policy", {"running": 50.0, "gang": 50.0, "small-0": 90.0, "small-1": 90.0})
    # When the guard evaluates both
    verdict = choose_order(Model.SAGEMAKER_QUEUE, pool, [native, small_first], settings=EXACT)
    # Then it writes the policy's order: the small jobs wait minutes, the gang starts when it would anyway
    assert verdict.chosen == "policy"
    policy = verdict.score("policy")
    assert (policy.qualifies, policy.delayed) == (True, 0)
    assert policy.wait_s < 0.5 * verdict.score(NATIVE).wait_s
    assert "starts no job later than native" in verdict.reason


def _gang_behind_a_running_job() -> LookPool:
    # Two nodes; a 4-GPU job runs for one more hour; queued: a 4-GPU 2-hour job (first), then an 8-GPU gang.
    return LookPool(
        8,
        (
            LookJob("running", 4, True, HOUR, limit_s=HOUR, waited_s=600.0),
            LookJob("small", 4, False, 2 * HOUR, limit_s=2 * HOUR, waited_s=600.0),
            LookJob("gang", 8, False, HOUR, limit_s=HOUR, waited_s=300.0),
        ),
    )


def test_an_order_that_leaves_gpus_idle_is_refused_and_the_guard_stands_down():
    # Given native Slurm, which backfills the small job now, and a policy that puts the gang first, so that
    # Slurm keeps the four free GPUs empty for the gang's reservation
    pool = _gang_behind_a_running_job()
    native = Candidate(NATIVE, {"running": 50.0, "small": 50.0, "gang": 50.0})
    gang_first = Candidate("policy", {"running": 50.0, "small": 10.0, "gang": 90.0})
    settings = GuardSettings(samples=1, horizon_s=2.5 * HOUR)
    # When the guard evaluates both
    verdict = choose_order(Model.SLURM, pool, [native, gang_first], settings=settings)
    # Then the policy's order is predicted to lose goodput (4 GPUs idle for the first hour), and the pool keeps
    # its native order, saying why
    assert verdict.stood_down
    policy = verdict.score("policy")
    assert not policy.qualifies
    assert policy.goodput < verdict.score(NATIVE).goodput
    assert "policy would lose goodput" in verdict.reason
    assert "stood down to the native order" in verdict.describe()


def test_the_verdict_is_the_same_for_the_same_pool_whatever_the_candidate_order():
    # Given a pool and its candidates, with sampled run-time errors
    pool = _long_job_first()
    native = Candidate(NATIVE, {job.key: 50.0 for job in pool.jobs})
    policy = Candidate("policy", {"long": 10.0, **{f"short-{n}": 90.0 for n in range(4)}})
    settings = GuardSettings(samples=5)
    # When it is guarded twice, the candidates listed in either order
    first = choose_order(Model.SLURM, pool, [native, policy], settings=settings)
    second = choose_order(Model.SLURM, pool, [policy, native], settings=settings)
    # Then the draws and the verdict are the same
    assert first.chosen == second.chosen
    assert first.score("policy") == second.score("policy")
    assert first.score(NATIVE) == second.score(NATIVE)


def test_last_cycles_order_is_kept_while_it_loses_nothing():
    # Given a pool where the policy's order is only slightly better than another policy variant
    pool = _gang_at_the_head_of_a_share()
    native = Candidate(NATIVE, {job.key: 50.0 for job in pool.jobs})
    best = Candidate("policy", {"running": 50.0, "gang": 50.0, "small-0": 91.0, "small-1": 90.0})
    variant = Candidate("policy-no-yield", {"running": 50.0, "gang": 50.0, "small-0": 90.0, "small-1": 91.0})
    # When last cycle chose the variant
    verdict = choose_order(
        Model.SAGEMAKER_QUEUE, pool, [native, best, variant], previous="policy-no-yield", settings=EXACT
    )
    # Then the variant stays (a switch would cost every job a priority change for nothing)
    assert verdict.chosen == "policy-no-yield"
    assert "kept last cycle's order" in verdict.reason


def test_candidates_without_the_native_order_are_refused():
    pool = _long_job_first()
    with pytest.raises(ValueError, match="must include 'native'"):
        choose_order(Model.SLURM, pool, [Candidate("policy", {})])


def test_a_job_of_unknown_time_takes_the_median_known_time_of_the_pool():
    # Given a pool where two jobs' times are known (one running: 1 h held + 1 h left; one queued: 3 h)
    jobs = [
        LookJob("a", 1, True, HOUR, waited_s=HOUR),
        LookJob("b", 1, False, 3 * HOUR),
        LookJob("c", 1, False, None),
    ]
    # Then the prior is the median of 2 h and 3 h
    assert runtime_prior(jobs) == pytest.approx(2.5 * HOUR)
    assert runtime_prior([LookJob("c", 1, False, None)]) is None


def test_arrivals_repeat_the_last_window():
    # Given a job submitted 1 h ago, one submitted 8 h ago, and a window of 6 h
    jobs = [
        LookJob("recent", 2, False, HOUR, age_s=HOUR, waited_s=HOUR),
        LookJob("old", 2, False, HOUR, age_s=8 * HOUR),
    ]
    # When arrivals are predicted
    arrivals = echo_arrivals(jobs, window_s=6 * HOUR)
    # Then only the recent one has a twin, arriving 5 h from now with the same size and time
    assert [(job.key, job.gpus, job.arrive_in_s, job.remaining_s) for job in arrivals] == [
        (("arrival", "recent"), 2, 5 * HOUR, HOUR)
    ]


def test_the_pool_signature_changes_when_a_job_starts_and_not_when_time_passes():
    queued = [LookJob("a", 1, False, HOUR), LookJob("b", 1, True, HOUR)]
    later = [LookJob("a", 1, False, HOUR / 2, waited_s=600.0), LookJob("b", 1, True, HOUR / 2)]
    started = [LookJob("a", 1, True, HOUR), LookJob("b", 1, True, HOUR)]
    assert pool_signature(queued) == pool_signature(later)
    assert pool_signature(queued) != pool_signature(started)


def test_kueue_preemption_throws_away_the_work_since_the_last_checkpoint():
    # Given a 16-GPU gang that has run 50 min (checkpoints every 30 min) with 1 h left, and a queued gang
    pool = LookPool(
        16,
        (LookJob("running", 16, True, HOUR, waited_s=50 * 60.0), LookJob("queued", 16, False, HOUR)),
        checkpoint_s=1800.0,
    )
    # When the queued gang has the higher priority on Kueue (LowerPriority preemption)
    outcome = run_forward(Model.KUEUE, pool, {"running": 10.0, "queued": 90.0}, horizon_s=6 * HOUR)
    # Then the running one is preempted at once, loses 20 min, and the window's goodput is 2 h of 16 GPUs out of 6
    assert outcome.preemptions == 1
    assert outcome.starts["queued"] == 0.0
    assert outcome.goodput == pytest.approx(2 / 6)
