"""The real-Slurm fixture: one local cluster per test module (tests/slurm/cluster.py).

Where Slurm cannot run (no packages, not root) the tests skip and say why; with ``OSPREY_REQUIRE_SLURM=1``
(set by ``.ci/run``) they fail instead, so CI can never pass by skipping them. Teardown asserts that no
process of the cluster (daemon, slurmstepd or job) is left behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.slurm.cluster import LocalSlurm, missing_requirements

REQUIRE_VARIABLE = "OSPREY_REQUIRE_SLURM"


def require_real_slurm() -> None:
    reason = missing_requirements()
    if reason is None:
        return
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but a real Slurm cannot run here: {reason}", pytrace=False)
    pytest.skip(f"real Slurm unavailable: {reason}")


def running_cluster(
    *extra_conf: str, before_start: Callable[[LocalSlurm], object] | None = None
) -> Iterator[LocalSlurm]:
    """A started 4-node cluster (``extra_conf``: slurm.conf lines added to the fixture's; ``before_start``: run
    on the cluster's directory before any daemon starts), stopped after, with nothing of it left running; skips
    or fails (``OSPREY_REQUIRE_SLURM=1``) where Slurm cannot run."""
    require_real_slurm()
    cluster = LocalSlurm(nodes=4, gpus=4, extra_conf=extra_conf)
    if before_start is not None:
        before_start(cluster)
    cluster.start()
    try:
        yield cluster
    finally:
        root = cluster.root
        cluster.stop()
        assert cluster.leftovers() == [], f"processes of the local Slurm in {root} outlived its teardown"


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    yield from running_cluster()


@pytest.fixture
def clean(slurm: LocalSlurm) -> LocalSlurm:
    """The module's cluster with no job left from an earlier test."""
    slurm.run("scancel", "--partition=gpu", "--full", check=False)
    slurm.wait_idle()
    return slurm
