"""Given a shard whose derive step runs short of time or meets a hung custom rule, when it is derived, then it
stops before the deadline's margin with every started job written and the rest deferred for the next cycle,
and a hung rule holds only its own bulkhead's slots."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from osprey_control.custom_rules import LambdaRuleInvoker, RuleAllowList
from osprey_control.custom_rules.invoker import rule_client_config
from osprey_control.derivation import CustomRuleCall, CustomRuleError, FailureReason, compile_policy
from osprey_control.policy import load_policies
from osprey_control.steps.deadline import Deadline
from osprey_control.steps.derive import derive_shard
from tests.conftest import REPO_ROOT
from tests.control.steps.derive.test_shard import NOW, POLICIES, MemoryStore, metrics_for, record

SPOT_RULE = "arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-spot"
OTHER_RULE = "arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-other"


class Clock:
    """The Lambda's remaining time, spent by the store: each decision written takes ``per_write_ms``."""

    def __init__(self, remaining_ms: float, per_write_ms: float) -> None:
        self.remaining_ms = remaining_ms
        self.per_write_ms = per_write_ms

    def __call__(self) -> float:
        return self.remaining_ms


class TimedStore(MemoryStore):
    def __init__(self, versions: dict[Any, int], clock: Clock) -> None:
        super().__init__(versions)
        self.clock = clock

    def record_decision(self, *args: Any, **kwargs: Any) -> None:
        super().record_decision(*args, **kwargs)
        self.clock.remaining_ms -= self.clock.per_write_ms


class Policies:
    def __init__(self, compiled: dict[str, Any]) -> None:
        self.compiled = compiled

    def get(self, name: str) -> Any:
        if name not in self.compiled:
            raise LookupError(name)
        return self.compiled[name]


@pytest.fixture
def two_rule_policies(tmp_path: Path) -> Policies:
    """The shipped policies plus ``other-policy``: the spot policy calling a different rule function."""
    text = (REPO_ROOT / "policies" / "examples" / "spot-aware-policy.yaml").read_text()
    other = text.replace("name: spot-aware-policy", "name: other-policy").replace(SPOT_RULE, OTHER_RULE)
    (tmp_path / "other-policy.yaml").write_text(other)
    compiled = {p.name: compile_policy(p) for p in load_policies([tmp_path])}
    return Policies({**POLICIES, **compiled})


def test_the_deadline_stops_derive_after_the_jobs_it_allows_and_the_next_cycle_derives_the_rest() -> None:
    # Given six jobs without custom rules, one worker, and a deadline 30 s past its 10 s margin where every
    # decision written takes 10 s
    jobs = [record(f"job-{n}") for n in range(6)]
    clock = Clock(remaining_ms=40_000, per_write_ms=10_000)
    store = TimedStore({job.key: 3 for job in jobs}, clock)
    deadline = Deadline(clock, margin_ms=10_000)

    # When the shard is derived
    first = derive_shard(
        jobs, metrics_for(*jobs), Policies(POLICIES), store, None, now=NOW, max_workers=1, deadline=deadline
    )

    # Then exactly three jobs were derived and written, and exactly the others are deferred, untouched
    derived = {outcome.record.key for outcome in first.outcomes}
    assert len(derived) == 3
    assert first.failures == []
    assert set(store.written) == derived
    assert {job.key for job in first.deferred} == {job.key for job in jobs} - derived
    # ... and the next cycle, with time again, derives the deferred ones
    second = derive_shard(
        first.deferred,
        metrics_for(*jobs),
        Policies(POLICIES),
        store,
        None,
        now=NOW,
        deadline=Deadline.never(),
    )
    assert second.deferred == []
    assert second.failures == []
    assert set(store.written) == {job.key for job in jobs}


def test_a_job_whose_rules_could_outlast_the_deadline_is_deferred_while_jobs_without_rules_run() -> None:
    # Given 500 ms left before the margin, a job whose policy calls an 800 ms custom rule, and one that calls none
    spot, plain = record("spot", policy="spot-aware-policy"), record("plain")
    store = MemoryStore({spot.key: 3, plain.key: 3})
    deadline = Deadline(lambda: 10_500, margin_ms=10_000)
    rules = _Answering()

    # When the shard is derived
    result = derive_shard(
        [spot, plain], metrics_for(spot, plain), Policies(POLICIES), store, rules, now=NOW, deadline=deadline
    )

    # Then the rule is never called, its job is deferred, and the other job is written
    assert rules.calls == []
    assert [job.key for job in result.deferred] == [spot.key]
    assert list(store.written) == [plain.key]


class _Answering:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def invoke(self, call: CustomRuleCall) -> Any:
        self.calls.append(call.arn)
        return {"derived_priority": 35}


class HungSpotRule:
    """The spot rule blocks until released; the other rule answers at once. Tracks the spot calls in flight."""

    def __init__(self, others: int) -> None:
        self.release = threading.Event()
        self.others_done = threading.Event()
        self.spot_in_flight = 0
        self.spot_in_flight_max = 0
        self._others_left = others
        self._lock = threading.Lock()

    def invoke(self, call: CustomRuleCall) -> Any:
        if call.arn == OTHER_RULE:
            with self._lock:
                self._others_left -= 1
                if self._others_left == 0:
                    self.others_done.set()
            return {"derived_priority": 70}
        with self._lock:
            self.spot_in_flight += 1
            self.spot_in_flight_max = max(self.spot_in_flight_max, self.spot_in_flight)
        try:
            assert self.release.wait(30), "the test never released the hung rule"
        finally:
            with self._lock:
                self.spot_in_flight -= 1
        raise CustomRuleError(FailureReason.TIMEOUT, "no answer within 800 ms")


def test_a_hung_rule_holds_only_its_own_slots_and_the_other_rules_jobs_finish(
    two_rule_policies: Policies,
) -> None:
    # Given ten jobs of a policy whose rule hangs, listed before three jobs of a policy with another rule, and
    # more hung jobs than the shard has workers
    hung = [record(f"spot-{n}", policy="spot-aware-policy") for n in range(10)]
    others = [record(f"other-{n}", policy="other-policy") for n in range(3)]
    jobs = [*hung, *others]
    store = MemoryStore({job.key: 3 for job in jobs})
    rules = HungSpotRule(len(others))
    results: list[Any] = []

    # When the shard is derived (in the background, since the hung rule blocks until the test releases it)
    worker = threading.Thread(
        target=lambda: results.append(
            derive_shard(
                jobs,
                metrics_for(*jobs),
                two_rule_policies,
                store,
                rules,
                now=NOW,
                max_workers=8,
                rule_slots=2,
            )
        )
    )
    worker.start()
    try:
        # Then the other rule's jobs are derived while the hung rule still blocks, which holds two calls only
        assert rules.others_done.wait(10), "the other rule's jobs waited behind the hung rule"
        assert not rules.release.is_set()
        assert rules.spot_in_flight_max <= 2
    finally:
        rules.release.set()
        worker.join(30)
    # ... and once the hung calls time out, their jobs get the rule's fallback, counted by reason
    [result] = results
    assert result.failures == []
    assert result.custom_rule_failures == {"timeout": len(hung)}
    assert set(store.written) == {job.key for job in jobs}


def test_rule_clients_time_out_at_the_rules_timeout_and_never_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an invoker that creates its own clients
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    invoker = LambdaRuleInvoker(RuleAllowList("123456789012"))

    # When it gets the clients for an 800 ms rule and a 30 s rule
    fast, slow = invoker.client_for_timeout(800), invoker.client_for_timeout(30_000)

    # Then each reads for exactly the rule's timeout and makes one attempt, and the client is reused
    assert fast.meta.config.read_timeout == 0.8
    assert slow.meta.config.read_timeout == 30.0
    assert fast.meta.config.retries["total_max_attempts"] == 1
    assert slow.meta.config.retries["total_max_attempts"] == 1
    assert fast.meta.config.connect_timeout == 0.8
    assert invoker.client_for_timeout(800) is fast
    assert rule_client_config(800).retries == {"mode": "standard", "total_max_attempts": 1}  # type: ignore[attr-defined]


def test_a_read_timeout_is_a_timeout() -> None:
    # Given a client whose read times out
    class TimingOut:
        def invoke(self, **request: Any) -> Any:
            raise ReadTimeoutError(endpoint_url="https://lambda.us-east-1.amazonaws.com")

    invoker = LambdaRuleInvoker(RuleAllowList("123456789012"), client=TimingOut())
    # When a rule is invoked, then it fails with reason timeout (the engine uses the fallback)
    with pytest.raises(CustomRuleError) as raised:
        invoker.invoke(CustomRuleCall("p", 0, SPOT_RULE, 5_000, {"version": "1"}))
    assert raised.value.reason is FailureReason.TIMEOUT
