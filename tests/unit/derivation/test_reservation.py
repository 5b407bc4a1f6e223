"""The reservation plan (EASY backfilling with predicted run times) on pools small enough to check by hand."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from osprey_control.derivation import (
    PoolJob,
    ReservationRole,
    compile_policy,
    plan_reservations,
    pool_settings,
    reservation_of,
)
from osprey_control.policy import load_policy_text

HOUR = 3600.0


def _running(key: str, gpus: int, remaining_h: float | None, *, held_s: float = 3 * HOUR) -> PoolJob:
    remaining = None if remaining_h is None else remaining_h * HOUR
    return PoolJob(key, gpus, running=True, remaining_s=remaining, rank=90, held_s=held_s, may_yield=True)


def _queued(key: str, gpus: int, runtime_h: float | None, rank: float) -> PoolJob:
    runtime = None if runtime_h is None else runtime_h * HOUR
    return PoolJob(key, gpus, running=False, remaining_s=runtime, rank=rank)


def test_the_first_job_that_does_not_fit_is_the_head_with_its_predicted_start() -> None:
    # Given 64 GPUs, 48 held by two jobs ending in 1 h and 3 h, and a 32-GPU job first in the queue
    jobs = [_running("a", 16, 1), _running("b", 32, 3), _queued("big", 32, 2, rank=80)]
    # When the plan is made
    plan = plan_reservations(jobs, 64)
    # Then the 32-GPU job is the head, predicted to start when "a" ends (16 free + 16 released)
    head = reservation_of(plan, "big")
    assert head.role is ReservationRole.HEAD
    assert head.head_start_in_s == 1 * HOUR
    assert reservation_of(plan, "a").role is ReservationRole.RUNNING


def test_a_job_that_ends_before_the_head_starts_is_backfilled_and_one_that_would_delay_it_is_held() -> None:
    # Given the head predicted to start in 1 h, and two small queued jobs that fit in the 16 free GPUs
    jobs = [
        _running("a", 16, 1),
        _running("b", 32, 3),
        _queued("big", 32, 2, rank=80),
        _queued("short", 8, 0.5, rank=40),
        _queued("long", 8, 5, rank=60),
    ]
    plan = plan_reservations(jobs, 64)
    # Then the short job is a backfill (ranked above the head), the long one is held (below everything)
    assert reservation_of(plan, "short").role is ReservationRole.BACKFILL
    assert reservation_of(plan, "long").role is ReservationRole.HELD
    values = {key: reservation_of(plan, key).value for key in ("short", "big", "long")}
    assert values["short"] > values["big"] > values["long"]
    assert "big" in reservation_of(plan, "long").describe()


def test_a_job_of_unknown_length_is_never_a_backfill_nor_held_but_fits_in_the_extra() -> None:
    # Given the head needs 24 of the 32 GPUs free when "a" ends: 8 are extra
    jobs = [
        _running("a", 16, 1),
        _running("b", 32, None),
        _queued("big", 24, 2, rank=80),
        _queued("unknown", 8, None, rank=50),
        _queued("unknown2", 8, None, rank=49),
    ]
    plan = plan_reservations(jobs, 64)
    # Then the first unknown job takes the extra GPUs; nothing says when the second would end: it is not held
    assert reservation_of(plan, "unknown").role is ReservationRole.BACKFILL
    assert reservation_of(plan, "unknown2").role is ReservationRole.NONE


def test_nothing_is_held_when_the_heads_start_cannot_be_predicted() -> None:
    # Given every running job has no predicted end
    jobs = [_running("a", 48, None), _queued("big", 32, 2, rank=80), _queued("small", 8, 9, rank=10)]
    # Then there is no reservation at all: holding for an unbounded time would only idle GPUs
    assert plan_reservations(jobs, 64) == {}


def test_without_a_capacity_the_pool_is_full_and_nothing_is_held() -> None:
    jobs = [_running("a", 32, 1), _queued("big", 32, 2, rank=80), _queued("small", 8, 9, rank=10)]
    plan = plan_reservations(jobs, None)
    assert reservation_of(plan, "big").role is ReservationRole.HEAD
    assert reservation_of(plan, "small").role is ReservationRole.NONE


def test_young_jobs_yield_to_the_head_only_when_opted_in_and_only_enough_of_them() -> None:
    # Given a 64-GPU job queued behind two jobs that started a minute ago and run for hours
    jobs = [
        _running("young1", 32, 5, held_s=60),
        _running("young2", 16, 5, held_s=120),
        _running("old", 16, 5, held_s=4 * HOUR),
        _queued("big", 48, 3, rank=80),
    ]
    # When yielding is off, nobody yields
    assert all(r.role is not ReservationRole.YIELDS for r in plan_reservations(jobs, 64).values())
    # When it is on (10 % of the head's 5 h wait = 30 min), the two young jobs yield and the old one keeps its GPUs
    plan = plan_reservations(jobs, 64, yield_fraction=0.1)
    assert reservation_of(plan, "young1").role is ReservationRole.YIELDS
    assert reservation_of(plan, "young2").role is ReservationRole.YIELDS
    assert reservation_of(plan, "old").role is ReservationRole.RUNNING
    assert reservation_of(plan, "big").head_start_in_s == 0.0
    # A yielding job drops below the running ones but not below the queue: only the head may preempt it
    assert (
        reservation_of(plan, "old").value
        > reservation_of(plan, "big").value
        > reservation_of(plan, "young1").value
    )


def test_a_job_preempted_before_never_yields_again_and_too_few_young_gpus_yield_none() -> None:
    again = PoolJob(
        "again", 32, running=True, remaining_s=5 * HOUR, rank=90, held_s=60, attempts=2, may_yield=True
    )
    jobs = [
        again,
        _running("young", 16, 5, held_s=60),
        _running("old", 16, 5),
        _queued("big", 48, 3, rank=80),
    ]
    plan = plan_reservations(jobs, 64, yield_fraction=0.1)
    # 16 young GPUs cannot start a 48-GPU job: preempting them would only throw work away
    assert all(r.role is not ReservationRole.YIELDS for r in plan.values())


def _compiled(extra: str) -> object:
    text = f"""
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {{name: p}}
spec:
  derivationRules:
  - {{metric: reservation, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100}}
{extra}"""
    result = load_policy_text(text, "p.yaml")
    assert result.errors == [], result.errors
    return compile_policy(result.policies[0].policy)


def test_pool_settings_take_the_declared_capacity_and_yield_fraction() -> None:
    compiled = _compiled("  reservation: {capacityGpus: 256, yieldFraction: 0.1}\n")
    settings = pool_settings([compiled])  # type: ignore[list-item]
    assert settings is not None
    assert (settings.capacity_gpus, settings.yield_fraction) == (256, 0.1)


def test_a_bad_reservation_setting_names_the_field() -> None:
    text = """
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {name: p}
spec:
  derivationRules:
  - {metric: reservation, weight: 1, scaling: linear, minPriority: 0, maxPriority: 100}
  reservation: {capacityGpus: 0, yieldFraction: 2}
"""
    errors = load_policy_text(text, "p.yaml").errors
    paths = " ".join(str(error) for error in errors)
    assert "capacityGpus" in paths
    assert "yieldFraction" in paths


_JOBS = st.lists(
    st.builds(
        PoolJob,
        key=st.uuids().map(str),
        gpus=st.sampled_from((1, 2, 4, 8, 16, 32, 64)),
        running=st.booleans(),
        remaining_s=st.one_of(st.none(), st.floats(0, 200_000)),
        rank=st.floats(0, 100),
        waited_s=st.floats(0, 100_000),
        held_s=st.floats(0, 50_000),
        attempts=st.integers(1, 3),
        may_yield=st.booleans(),
    ),
    max_size=40,
    unique_by=lambda job: job.key,
)


@given(jobs=_JOBS, spare=st.integers(0, 128), fraction=st.sampled_from((0.0, 0.1, 0.5)))
def test_every_plan_keeps_the_roles_promises(jobs: list[PoolJob], spare: int, fraction: float) -> None:
    capacity = sum(job.gpus for job in jobs if job.running) + spare
    plan = plan_reservations(jobs, capacity, yield_fraction=fraction)
    by_key = {job.key: job for job in jobs}
    heads = [key for key, r in plan.items() if r.role is ReservationRole.HEAD]
    # At most one head, and a plan without a head marks nobody
    assert len(heads) <= 1
    assert heads or not plan
    for key, reservation in plan.items():
        job = by_key[key]
        assert 0.0 <= reservation.value <= 1.0
        assert reservation.head_start_in_s is None or reservation.head_start_in_s >= 0
        if reservation.role is ReservationRole.HELD:
            # Only a queued job known to end after the head's start is ever held
            assert not job.running
            assert job.remaining_s is not None
            assert reservation.head_start_in_s is not None
            assert job.remaining_s > reservation.head_start_in_s
        if reservation.role is ReservationRole.YIELDS:
            # Only an opted-in running job on its first attempt yields, and never without opting in
            assert job.running
            assert job.may_yield
            assert job.attempts == 1
            assert fraction > 0
    yielding = [by_key[key] for key, r in plan.items() if r.role is ReservationRole.YIELDS]
    if yielding:
        head = by_key[heads[0]]
        assert sum(job.gpus for job in yielding) + spare >= head.gpus  # all or none: they start the head
