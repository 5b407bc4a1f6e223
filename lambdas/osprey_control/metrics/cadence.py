"""When a job's CloudWatch series are read: on one cycle in N, without any state in the Lambda.

GetMetricData is billed per metric requested, so reading every series every cycle is most of the control
plane's bill. With ``every_n_cycles`` N > 1 each job is read on one cycle in N and, on the others, derived from
the values its last decision used (:mod:`osprey_control.metrics.reuse`, stored in the registry record the
cycle reads anyway).

A cycle knows its number from its own time: ``floor(epoch seconds / cycle_seconds)``. A job's turn is
``crc32(job key) mod N``, so the jobs (and their GetMetricData calls) spread evenly over the N cycles instead
of every shard reading at once, and the turn survives restarts and cold starts. A cycle that starts late by
less than ``cycle_seconds`` keeps its number; a cycle skipped or run twice (a sub-minute loop drifting) makes
one job read one cycle late or twice, never lose its reads.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from datetime import datetime

from osprey_control.registry import JobKey
from osprey_control.wiring import CYCLE_SECONDS_VARIABLE, EVERY_N_CYCLES_VARIABLE

__all__ = ["DEFAULT_EVERY_N_CYCLES", "EVERY_N_CYCLES_VARIABLE", "is_due", "turn_of"]

# What the CDK app deploys (docs/metrics-and-actuation.md, Cadence): at 60 s cycles a job's metrics are at
# most 5 minutes old, and GetMetricData costs a fifth. The collector's own default stays 1 (every cycle).
DEFAULT_EVERY_N_CYCLES = 5
MAX_EVERY_N_CYCLES = 60


def read_setting(environment: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(every_n_cycles, cycle_seconds)`` from the derive function's environment; (1, 60) when unset.
    ValueError names the variable when a value is not an integer in range."""
    env = os.environ if environment is None else environment
    values: list[int] = []
    for name, default, low, high in (
        (EVERY_N_CYCLES_VARIABLE, 1, 1, MAX_EVERY_N_CYCLES),
        (CYCLE_SECONDS_VARIABLE, 60, 1, 86_400),
    ):
        text = env.get(name, "").strip()
        try:
            value = int(text) if text else default
        except ValueError:
            raise ValueError(f"{name} must be an integer {low}..{high}, got {text!r}") from None
        if not low <= value <= high:
            raise ValueError(f"{name} must be an integer {low}..{high}, got {value}")
        values.append(value)
    return values[0], values[1]


def cycle_number(now: datetime, cycle_seconds: int) -> int:
    return int(now.timestamp() // cycle_seconds)


def turn_of(job: JobKey, every_n_cycles: int) -> int:
    """The job's cycle in each run of N: stable across processes (crc32, not Python's salted ``hash``)."""
    return zlib.crc32(str(job).encode()) % every_n_cycles


def is_due(job: JobKey, now: datetime, *, every_n_cycles: int, cycle_seconds: int) -> bool:
    """Whether ``job``'s series are read on the cycle running at ``now``."""
    if every_n_cycles <= 1:
        return True
    return cycle_number(now, cycle_seconds) % every_n_cycles == turn_of(job, every_n_cycles)
