"""Given the slurm.conf docs/slurm.md recommends beside Osprey (``PriorityWeightPartition=5001``, every other
weight 0), when jobs are submitted, then each starts at 5001, the middle of Osprey's range, instead of 1 below
every job Osprey has ranked; Osprey's explicit priorities still place jobs above and below it (a real Slurm)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.slurm import SlurmApplier
from tests.slurm.cluster import LocalSlurm
from tests.slurm.conftest import running_cluster
from tests.slurm.test_real_slurm import MARK, _fill, _record


@pytest.fixture(scope="module")
def weighted() -> Iterator[LocalSlurm]:
    yield from running_cluster("PriorityWeightPartition=5001")


def test_new_jobs_start_mid_range_and_osprey_places_jobs_around_them(weighted: LocalSlurm) -> None:
    # Given every node busy and three jobs queued
    _fill(weighted)
    low, new, high = (
        weighted.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300") for _ in range(3)
    )
    # Then each has the partition's weight as its priority: 5001
    assert weighted.sprio() == {low: 5001, new: 5001, high: 5001}
    # When Osprey has ranked two of them (10 -> 1001, 90 -> 9001) and not yet the newest
    report = SlurmApplier(lambda cluster: weighted.client()).apply(
        [PriorityChange(_record(weighted.cluster, job), p) for job, p in ((low, 10), (high, 90))]
    )
    assert [result.outcome for result in report.results] == [Outcome.APPLIED] * 2
    # Then the unranked job sits between them, not below every ranked job
    assert weighted.sprio() == {low: 1001, new: 5001, high: 9001}
    assert weighted.squeue_order() == [high, new, low]
