"""Given a machine where a real Slurm cannot run, the Slurm tests skip with the reason elsewhere and fail in CI
(``OSPREY_REQUIRE_SLURM=1``, set by .ci/run), so CI can never pass by skipping them."""

from __future__ import annotations

import pytest

from tests.slurm import conftest


def test_without_slurm_the_tests_skip_with_the_reason_or_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "missing_requirements", lambda: "Slurm binaries not installed (slurmrestd)")
    monkeypatch.delenv(conftest.REQUIRE_VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="slurmrestd"):
        conftest.require_real_slurm()
    monkeypatch.setenv(conftest.REQUIRE_VARIABLE, "1")
    with pytest.raises(
        pytest.fail.Exception, match="OSPREY_REQUIRE_SLURM=1 but a real Slurm cannot run here"
    ):
        conftest.require_real_slurm()


def test_with_slurm_nothing_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "missing_requirements", lambda: None)
    monkeypatch.setenv(conftest.REQUIRE_VARIABLE, "1")
    conftest.require_real_slurm()  # neither skips nor fails
