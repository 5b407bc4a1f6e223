"""Given the scale benchmark with tiny arguments, when it runs one cycle of the real state machine in moto, then
it prints its machine-readable line, and the measured state sizes stay far below the 64 KiB goal (issue 14;
timings are the benchmark's business, not asserted)."""

from __future__ import annotations

import math
import re

import pytest
from bench.scale_bench import main

LINE = re.compile(
    r"jobs=6 gpus=16 max_state_bytes=(\d+) getmetricdata_calls=(\d+) series=(\d+) dynamodb_writes=(\d+) "
    r"state_transitions=(\d+) lambda_invocations=(\d+)"
)


def test_the_scale_bench_prints_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Given 6 jobs, 2 of them running on 16 GPUs; when the bench runs one cycle
    assert main(["--jobs", "6", "--gpus", "16", "--cycles", "1"]) == 0

    # Then its last line has every field
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = LINE.fullmatch(last)
    assert match is not None, last
    max_bytes, calls, series, writes, transitions, invocations = (int(value) for value in match.groups())
    assert 0 < max_bytes < 64 * 1024
    assert series > 0
    # One collection for the whole cycle: the fewest calls GetMetricData's 500 queries a call allow
    assert calls == math.ceil(series / 500)
    assert writes >= 2  # at least the two running jobs' decisions (and the lease)
    assert transitions > 0
    assert invocations >= 4  # lease, shards, derive per shard, apply, plan, finish
