"""The bench's goals across the workload family (issue 36): each (native, layered) pair's goals checked on
every family draw, and one line per pair and goal saying on how many draws it was met; and which draws the
bench runs (:data:`FAMILY_SEEDS`, ``--family-seeds``: :func:`family_seeds`).

Do no harm on *every* draw: ``goodput`` (layered >= 0.99 x native) and ``idle`` (layered <= native + 0.5
points). The others on a share of the draws, since one odd draw may favour the native order by chance:
``wait-gap`` on >= 80 % (layered mean wait closes >= 60 % of the native -> ``oracle`` gap; where native
already waits no longer than ``oracle``, layered <= 0.8 x native), ``p95`` on >= 90 % (<= 1.2 x native),
``fairness`` on >= 90 % (>= native - 0.02), ``changes`` on >= 90 % (<= 10 priority changes per job-hour).
The limits per draw are the named workloads' (``bench/sim_bench.py``). ``wait-gap`` is the only goal that
reads an oracle: ``oracle`` (non-preemptive least remaining GPU-time first, docs/scheduling.md); where the
draws also ran ``oracle-backfill`` the line adds, as a report only, on how many draws the same rule holds
against it and the worst draw's share of that gap.

One line per pair and goal::

    family pair=<native>-><layered> goal=<goal> met=<k>/<n> worst=<draw> <its numbers and the limit>; needs <m>/<n>: met|MISSED

``worst`` is the draw with the smallest margin against the goal's limit (dimensionless where the goal is a
ratio, in points where it is a difference), the first such draw on a tie.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "FAMILY_GOALS",
    "FAMILY_SEEDS",
    "DrawCheck",
    "FamilyGoal",
    "change_points",
    "family_goals",
    "family_seeds",
]

# scheduler -> metric (Result field names) -> value, for one draw.
Measured = Mapping[str, Mapping[str, float]]

GOODPUT_FACTOR = 0.99
IDLE_POINTS = 0.5
GAP_SHARE = 0.6
BEATS_ORACLE_FACTOR = 0.8
P95_FACTOR = 1.2
FAIRNESS_POINTS = 0.02
MAX_CHANGES = 10.0
ORACLE = "oracle"
ORACLE_BACKFILL = "oracle-backfill"
# The family's draws (issue 36): 30 fixed seeds, so every run of the bench checks the same draws.
FAMILY_SEEDS = tuple(range(1000, 1030))
# (goal, share of the draws that must meet it), in the order the lines are printed.
FAMILY_GOALS = (
    ("goodput", 1.0),
    ("idle", 1.0),
    ("wait-gap", 0.8),
    ("p95", 0.9),
    ("fairness", 0.9),
    ("changes", 0.9),
)


@dataclass(frozen=True)
class DrawCheck:
    """One goal on one draw: met or not, the margin against the limit (< 0: missed) and the numbers."""

    draw: str
    met: bool
    margin: float
    detail: str


@dataclass(frozen=True)
class FamilyGoal:
    """One goal of one pair over the family: its checks per draw and the share of draws that must meet it."""

    goal: str
    pair: str
    required: float
    checks: tuple[DrawCheck, ...]
    report: str = ""  # wait-gap: the gap against oracle-backfill (not part of the goal)

    @property
    def met_count(self) -> int:
        return sum(check.met for check in self.checks)

    @property
    def needed(self) -> int:
        # The small epsilon keeps 0.9 x 30 = 27.000000000000004 from needing 28 draws.
        return math.ceil(self.required * len(self.checks) - 1e-9)

    @property
    def met(self) -> bool:
        return self.met_count >= self.needed

    @property
    def worst(self) -> DrawCheck:
        return min(self.checks, key=lambda check: check.margin)

    def line(self) -> str:
        n = len(self.checks)
        return (
            f"family pair={self.pair} goal={self.goal} met={self.met_count}/{n} worst={self.worst.draw} "
            f"{self.worst.detail}{self.report}; needs {self.needed}/{n}: {'met' if self.met else 'MISSED'}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "pair": self.pair,
            "goal": self.goal,
            "met": self.met,
            "met_draws": self.met_count,
            "draws": len(self.checks),
            "needed": self.needed,
            "worst": self.worst.draw,
            "worst_detail": self.worst.detail,
            "report": self.report.removeprefix("; "),
            "per_draw": {check.draw: check.met for check in self.checks},
        }


def family_seeds(text: str) -> list[int]:
    """``--family-seeds``: ``none``, or seeds and ``A-B`` ranges (inclusive) separated by commas, in the order
    given, each once. Raises ValueError saying what is allowed."""
    if text.strip() == "none":
        return []
    seeds: list[int] = []
    for part in (piece.strip() for piece in text.split(",")):
        match = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part)
        if match is None:
            raise ValueError(
                f"{part!r} is not a seed (0, 1, ...) or a range A-B; allowed: A-B, a,b,c or none"
            )
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise ValueError(f"{part!r}: the range ends before it starts")
        seeds.extend(seed for seed in range(first, last + 1) if seed not in seeds)
    return seeds


def _relative(value: float, reference: float) -> float:
    """``value`` over a wait or goodput reference; a reference of 0 counts as 1 (s, or goodput 1)."""
    return value / reference if reference > 0 else value


def wait_gap(layered: float, native: float, oracle: float, name: str = ORACLE) -> tuple[bool, float, str]:
    """The named workloads' wait rule: close >= 60 % of the native -> oracle gap, or, where native waits no
    longer than the oracle, <= 0.8 x native. Margin: share of the gap closed minus 0.6, or the room to
    0.8 x native over native."""
    head = f"mean wait {layered:.1f} s vs native {native:.1f} s, {name} {oracle:.1f} s"
    if native <= oracle:
        limit = BEATS_ORACLE_FACTOR * native
        margin = _relative(limit - layered, native)
        return (
            layered <= limit,
            margin,
            f"{head}: native beats {name}, limit <= {BEATS_ORACLE_FACTOR} x native = {limit:.1f} s",
        )
    closed = (native - layered) / (native - oracle)
    detail = f"{head}: closes {100 * closed:.0f} % of the gap (limit >= {100 * GAP_SHARE:.0f} %)"
    return closed >= GAP_SHARE, closed - GAP_SHARE, detail


def _check(
    goal: str, native: Mapping[str, float], layered: Mapping[str, float], oracle: float | None
) -> tuple[bool, float, str] | None:
    if goal == "goodput":
        got, limit = layered["goodput"], GOODPUT_FACTOR * native["goodput"]
        detail = f"goodput {got:.4f} vs native {native['goodput']:.4f} (limit >= {limit:.4f})"
        return got >= limit, _relative(got - limit, native["goodput"]), detail
    if goal == "idle":
        got, limit = layered["idle_pct"], native["idle_pct"] + IDLE_POINTS
        return (
            got <= limit,
            limit - got,
            f"idle {got:.2f} % vs native {native['idle_pct']:.2f} % (limit <= {limit:.2f})",
        )
    if goal == "wait-gap":
        return None if oracle is None else wait_gap(layered["mean_wait_s"], native["mean_wait_s"], oracle)
    if goal == "p95":
        got, limit = layered["p95_wait_s"], P95_FACTOR * native["p95_wait_s"]
        detail = f"p95 wait {got:.1f} s vs native {native['p95_wait_s']:.1f} s (limit <= {limit:.1f})"
        return got <= limit, _relative(limit - got, native["p95_wait_s"]), detail
    if goal == "fairness":
        got, limit = layered["fairness"], native["fairness"] - FAIRNESS_POINTS
        detail = f"fairness {got:.4f} vs native {native['fairness']:.4f} (limit >= {limit:.4f})"
        return got >= limit, got - limit, detail
    changes = layered["priority_changes_per_job_hour"]
    detail = f"{changes:.2f} priority changes per job-hour (limit <= {MAX_CHANGES:.0f})"
    return changes <= MAX_CHANGES, MAX_CHANGES - changes, detail


def _backfill_report(pair: tuple[str, str], draws: Mapping[str, Measured], worst: str) -> str:
    """Report only: the wait rule against ``oracle-backfill`` on the draws that ran it."""
    native_name, layered_name = pair
    results = {
        draw: wait_gap(
            m[layered_name]["mean_wait_s"],
            m[native_name]["mean_wait_s"],
            m[ORACLE_BACKFILL]["mean_wait_s"],
            ORACLE_BACKFILL,
        )
        for draw, m in draws.items()
        if ORACLE_BACKFILL in m and native_name in m and layered_name in m
    }
    if not results:
        return ""
    met = sum(ok for ok, _, _ in results.values())
    worst_part = f", on {worst}: {results[worst][2]}" if worst in results else ""
    return f"; against {ORACLE_BACKFILL} (report only): {met}/{len(results)} draws{worst_part}"


def family_goals(
    draws: Mapping[str, Measured], pairs: Iterable[tuple[str, str]], *, oracle_name: str = ORACLE
) -> list[FamilyGoal]:
    """Every family goal of every pair measured on at least one draw (``draws``: draw name -> its results,
    in the order the draws were run). A draw without both of a pair's schedulers does not count for it, a
    draw without ``oracle_name`` (the wait goal's reference) not for ``wait-gap``."""
    out = []
    for native_name, layered_name in pairs:
        pair = f"{native_name}->{layered_name}"
        for goal, required in FAMILY_GOALS:
            checks = []
            for draw, measured in draws.items():
                native, layered = measured.get(native_name), measured.get(layered_name)
                if native is None or layered is None:
                    continue
                oracle = measured[oracle_name]["mean_wait_s"] if oracle_name in measured else None
                checked = _check(goal, native, layered, oracle)
                if checked is not None:
                    checks.append(DrawCheck(draw, *checked))
            if not checks:
                continue
            result = FamilyGoal(goal, pair, required, tuple(checks))
            if goal == "wait-gap":
                report = _backfill_report((native_name, layered_name), draws, result.worst.draw)
                result = FamilyGoal(goal, pair, required, tuple(checks), report)
            out.append(result)
    return out


def _change_pct(layered: float, native: float) -> float | None:
    """Layered against native in %; None where native is 0 and layered is not (no finite change)."""
    if native > 0:
        return 100.0 * (layered - native) / native
    return 0.0 if layered == 0 else None


def change_points(
    draws: Mapping[str, Measured], pairs: Sequence[tuple[str, str]]
) -> list[tuple[str, str, float, float]]:
    """(pair, draw, mean wait change %, goodput change %) of each layered scheduler against its native one,
    per draw: the points of ``family-wait-vs-goodput.png``. A draw whose change is not finite is left out."""
    points = []
    for draw, measured in draws.items():
        for native_name, layered_name in pairs:
            native, layered = measured.get(native_name), measured.get(layered_name)
            if native is None or layered is None:
                continue
            wait = _change_pct(layered["mean_wait_s"], native["mean_wait_s"])
            goodput = _change_pct(layered["goodput"], native["goodput"])
            if wait is not None and goodput is not None:
                points.append((f"{native_name}->{layered_name}", draw, wait, goodput))
    return points
