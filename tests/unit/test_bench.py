"""Given the derivation benchmark, when run on a small fleet, then it agrees with its baseline and prints the
machine-readable last line; given the cold-start benchmark, then it reports every handler module against its
baseline. (Speed itself is measured by the benchmarks, never asserted here.)"""

from __future__ import annotations

import re

import pytest
from bench.derive_bench import main


def test_benchmark_prints_its_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--jobs", "40", "--nodes", "3", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "priorities differing from the baseline: 0" in lines
    assert re.fullmatch(r"rule_evals_per_s=\d+ jobs=40 seconds=\d+\.\d+", lines[-1])


def test_cold_start_benchmark_reports_every_handler_against_its_baseline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.cold_start import handler_modules  # noqa: PLC0415
    from bench.cold_start import main as cold_start  # noqa: PLC0415

    # Given the handler modules of the Lambda bundle, when the benchmark runs with one repetition
    assert cold_start(["--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # Then it prints the baseline, one line per handler with its ratio, and the summary line (never timings)
    modules = handler_modules()
    assert {"osprey_handlers.derive", "osprey_handlers.ingest", "osprey_handlers.apply"} <= set(modules)
    assert re.fullmatch(r"baseline `import boto3`: \d+\.\d ms \(median of 1\)", lines[0])
    for module, line in zip(modules, lines[1:-1], strict=True):
        assert re.fullmatch(
            rf"{re.escape(module)}: \d+\.\d ms median .*; \d+\.\d\dx baseline; (ok|over target)", line
        )
    assert re.fullmatch(
        rf"handlers={len(modules)} worst_ms=\d+\.\d baseline_ms=\d+\.\d target_ms=300", lines[-1]
    )


def test_reservation_benchmark_plans_a_pool_and_prints_its_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.reservation_bench import main as reservation  # noqa: PLC0415

    # Given a small busy pool, when the benchmark runs once, then one job is the head and the ratio line follows
    assert reservation(["--jobs", "300", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "'head': 1" in lines[0]
    assert re.fullmatch(r"plan_seconds=\d+\.\d+ derive_seconds=\d+\.\d+ ratio=\d+\.\d+ jobs=300", lines[-1])
