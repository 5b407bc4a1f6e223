"""Given the real-Kueue benchmark (bench/kueue_bench.py), when it runs a tiny workload, then it prints its result,
ratio and fidelity lines: a smoke test, so a change to what it reads (a Workload's conditions, the applier, a
policy) cannot break it unnoticed. The numbers themselves are the bench's business, never asserted here.

The bench starts its own control plane (not the session's ``k8s`` fixture: it owns its queues' whole quota), so
it checks the binaries itself, skipping or failing as the fixture does."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from bench.kueue_bench import main, missing_requirements

from tests.k8s.conftest import REQUIRE_VARIABLE

TENANTS = Path(__file__).resolve().parents[2] / "bench" / "data" / "tenants-kueue-bench.yaml"


def _require_kueue() -> None:
    """Skip where a real Kueue cannot run, or fail when CI requires one (as the ``k8s`` fixture does)."""
    reason = missing_requirements()
    if reason and os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but a real Kueue cannot run here: {reason}", pytrace=False)
    if reason:
        pytest.skip(f"real Kueue unavailable: {reason}")


def test_the_kueue_bench_prints_results_ratio_and_fidelity(capsys: pytest.CaptureFixture[str]) -> None:
    _require_kueue()
    # When the bench runs 5 short jobs on 8 nodes, with and without Osprey
    assert main(["--jobs", "5", "--min-duration", "1", "--max-duration", "3", "--interval", "1"]) == 0
    out = capsys.readouterr().out
    # Then each scheduler has its line, the layered run its ratio, and both models their fidelity
    for name in ("kueue", "kueue\\+osprey"):
        assert re.search(rf"^scheduler={name} mean_wait_s=[\d.]+ makespan_s=[\d.]+$", out, re.M), out
        assert re.search(rf"^fidelity scheduler={name} order_tau=-?[\d.]+ wait_ratio=[\d.]+ ", out, re.M), out
    assert re.search(r"^ratio kueue\+osprey/kueue mean_wait=[\d.]+ makespan=[\d.]+ ", out, re.M), out
    for name in ("kueue", "kueue\\+osprey"):
        assert re.search(
            rf"^timing scheduler={name} quota_held_beyond_duration_s=-?[\d.]+ finish_to_next_admission_s=[\d.]+$",
            out,
            re.M,
        ), out
    # And the driver's pods were accepted by the API server (waitForPodsReady saw them ready)
    assert "refused status.ready" not in out, out


def test_the_kueue_bench_runs_a_cohort_from_a_tenants_file(capsys: pytest.CaptureFixture[str]) -> None:
    _require_kueue()
    # When the bench runs 6 short jobs on the cohort of bench/data/tenants-kueue-bench.yaml (three teams, 12 nodes)
    argv = ["--jobs", "6", "--min-duration", "1", "--max-duration", "3", "--interval", "1", "--nodes", "12",
            "--tenants", str(TENANTS)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    # Then the cohort's two runs have their lines, and the cohort model its fidelity against the real Kueue
    for name in ("kueue-cohort", "kueue-cohort\\+osprey"):
        assert re.search(rf"^scheduler={name} mean_wait_s=[\d.]+ makespan_s=[\d.]+$", out, re.M), out
        assert re.search(rf"^fidelity scheduler={name} order_tau=-?[\d.]+ wait_ratio=[\d.]+ ", out, re.M), out
    assert re.search(r"^ratio kueue-cohort\+osprey/kueue-cohort mean_wait=[\d.]+ ", out, re.M), out


def test_a_tenants_file_the_cohort_cannot_run_is_refused_before_kueue_starts(tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("teams:\n  - name: a\n    nominalGpus: 8\n    borrowingLimitGpus: 0\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["--tenants", str(tenants)])
    assert exit_info.value.code == 2


def test_a_team_name_kubernetes_cannot_take_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by review: the team names the run's ClusterQueue and LocalQueue, which Kubernetes names must be
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("teams:\n  - name: Team_A\n    nominalGpus: 64\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["--tenants", str(tenants)])
    assert exit_info.value.code == 2
    assert "team 'Team_A' names a ClusterQueue and a LocalQueue here" in capsys.readouterr().err
