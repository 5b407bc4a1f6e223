"""Given measured A100 iteration times of several parallel layouts of one model, when the planner predicts each
layout's step time, then (issue #18) its order agrees with the measured order and the layout it would pick
is close to the measured fastest.

The data: BigScience's BLOOM-176B topology sweeps on Jean Zay (384 A100-80GB), seconds per iteration of
every (tp, pp, dp, micro-batch) they ran for one model shape on one day
(``tests/planner/data/bloom_a100_topology_sweeps.csv``; source and selection rule in that directory's README).
A "model" below is one such group: same shape, 64 heads, global batch 2048, same date (the code and the
machine changed between dates, so only times of one day are compared with each other).

Two decisions, written down because the issue is silent on them:

- **The planner's pick** is the measured layout with the shortest predicted step time among those the
  planner's memory check accepts. The unconstrained search's best is in general a layout nobody measured
  (4x3x32 b1 for 14336x72), so the measurement cannot judge it; it is shown in the docs table, not scored.
- **Spearman** is computed per model on the step times (ties share their average rank) and averaged over the
  models; "within 5%" is the pick's *measured* time at most 1.05 x the measured best.

Issue #18's goal (mean Spearman >= 0.8, the pick within 5% on at least 3 of 4 models) is met by the planner
calibrated on the cluster's measurements of the *other days* (leave one day out; also in time order, on the
days before): the calibration fits this stack's fixed cost per block pass, which Megatron-LM's stack
(SC21, the constants' source) does not pay. Uncalibrated, the SC21 constants rank these runs at 0.48; a
regression guard holds that figure (docs/planner.md, "Ranking on measured A100 iteration times").
``python -m tests.planner.test_ranking`` prints the docs tables.
"""

from __future__ import annotations

import csv
import dataclasses
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from osprey_control.planner import (
    DEFAULT_EFFICIENCY,
    Evaluation,
    ModelSpec,
    OptimizerSharding,
    Plan,
    Recompute,
    cluster,
    evaluate,
)
from osprey_control.planner.calibrate import Calibration, Measured, fit
from osprey_control.planner.costmodel import Efficiency
from osprey_control.planner.hardware import Cluster
from osprey_control.planner.search import SearchOptions, search
from tests.planner.published import sc21_rows

DATA = Path(__file__).resolve().parent / "data" / "bloom_a100_topology_sweeps.csv"
DOC = Path(__file__).resolve().parents[2] / "docs" / "planner.md"
SEQ = 2048
# --pad-vocab-size-to 250880 (tr11-176B-ml.slurm).
VOCAB = 250880
NODES = 48
# 4 Omni-Path links per node, 100 Gb/s each (OPA100).
NETWORK_GBITS = 400.0
WITHIN = 0.05


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks; equal values share the average of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the (tie-averaged) ranks."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs two sequences of one length, got {len(x)} and {len(y)}")
    rx, ry = _ranks(x), _ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    covariance = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var_x = sum((a - mx) ** 2 for a in rx)
    var_y = sum((b - my) ** 2 for b in ry)
    if var_x == 0 or var_y == 0:
        raise ValueError("spearman is undefined when one sequence has a single distinct value")
    return float(covariance / (var_x * var_y) ** 0.5)


@dataclass(frozen=True)
class Group:
    name: str
    model: ModelSpec
    runs: tuple[tuple[Plan, float], ...]


@dataclass(frozen=True)
class Ranked:
    group: Group
    predicted: tuple[Evaluation, ...]
    spearman: float
    pick: int
    best: int
    search_best: Evaluation | None

    @property
    def pick_ratio(self) -> float:
        return self.group.runs[self.pick][1] / self.group.runs[self.best][1]


def jean_zay() -> Cluster:
    return cluster(NODES * 8, gpu="A100-80GB", gpus_per_node=8, network_gbits=NETWORK_GBITS)


def bloom_groups() -> list[Group]:
    with DATA.open() as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    names = list(dict.fromkeys(row["group"] for row in rows))
    groups = []
    for name in names:
        members = [row for row in rows if row["group"] == name]
        first = members[0]
        model = ModelSpec(
            layers=int(first["layers"]),
            hidden=int(first["hidden"]),
            heads=int(first["heads"]),
            seq=SEQ,
            vocab=VOCAB,
            global_batch=int(first["global_batch"]),
            # --checkpoint-activations; DeepSpeed ZeRO stage 1 (from 02-28 the BF16 optimizer's equivalent).
            recompute=Recompute.FULL,
            optimizer_sharding=OptimizerSharding.ZERO1,
            fp32_grad_accumulation=first["fp32_grad_accumulation"] == "true",
        )
        runs = tuple(
            (
                Plan(int(row["tp"]), int(row["pp"]), int(row["dp"]), int(row["micro_batch"])),
                float(row["sec_per_iter"]),
            )
            for row in members
        )
        groups.append(Group(name, model, runs))
    return groups


def rank_group(group: Group, machine: Cluster, efficiency: Efficiency = DEFAULT_EFFICIENCY) -> Ranked:
    # Layers that do not divide pp: DeepSpeed gives the first stages one block more (or, from 02-28, the
    # embeddings their own slot), so the planner's uneven pipeline is the closest layout.
    predicted = tuple(
        evaluate(group.model, machine, plan, uneven_pipeline=True, efficiency=efficiency)
        for plan, _ in group.runs
    )
    measured = [seconds for _, seconds in group.runs]
    candidates = [i for i, e in enumerate(predicted) if e.feasible] or list(range(len(predicted)))
    pick = min(candidates, key=lambda i: predicted[i].step_time_s)
    best = min(range(len(measured)), key=lambda i: measured[i])
    # The software these runs used: DeepSpeed's pipeline has no interleaved schedule.
    options = SearchOptions(uneven_pipeline=True, max_virtual=1, efficiency=efficiency)
    found = search(group.model, machine, options).best
    rho = spearman([e.step_time_s for e in predicted], measured)
    return Ranked(group, predicted, rho, pick, best, found)


def ranked_groups() -> list[Ranked]:
    machine = jean_zay()
    return [rank_group(group, machine) for group in bloom_groups()]


def pooled_spearman(results: Sequence[Ranked]) -> float:
    predicted = [e.step_time_s for r in results for e in r.predicted]
    measured = [seconds for r in results for _, seconds in r.group.runs]
    return spearman(predicted, measured)


def _layout(plan: Plan) -> str:
    return f"{plan.tp}x{plan.pp}x{plan.dp} b{plan.micro_batch}"


def calibrated_groups() -> list[tuple[Ranked, Calibration]]:
    """Each model ranked by the cost model calibrated on the runs of the *other days* (leave one day out: a
    day's two models share its code and machine, so neither may teach the other): what a team gets from its
    cluster's past measurements when it plans a shape it has not run."""
    machine = jean_zay()
    groups = bloom_groups()
    results = []
    for held_out in groups:
        others = [
            Measured(g.model, plan, seconds)
            for g in groups
            if _day(g) != _day(held_out)
            for plan, seconds in g.runs
        ]
        calibration = fit(others, machine)
        results.append((rank_group(held_out, machine, calibration.efficiency), calibration))
    return results


def _day(group: Group) -> str:
    return group.name.split("@")[1]


def calibrated_table(results: Sequence[tuple[Ranked, Calibration]]) -> str:
    lines = [
        "| held-out model | Spearman (uncalibrated) | Spearman (calibrated) | planner's pick (measured s) "
        "| pick ÷ best | fitted on the other days: compute, nvlink, network; added per micro-batch, per block pass |",
        "|---|---:|---:|---|---:|---|",
    ]
    plain = {r.group.name: r.spearman for r in RESULTS}
    for r, c in results:
        pick_plan, pick_s = r.group.runs[r.pick]
        fitted = ", ".join(f"x{c.factors[name]:.2f}" for name in ("compute", "nvlink", "network"))
        lines.append(
            f"| {r.group.name} | {plain[r.group.name]:+.2f} | {r.spearman:+.2f} | {_layout(pick_plan)} "
            f"({pick_s:.2f}) | {r.pick_ratio:.3f} | {fitted}; {c.micro_batch_overhead_s * 1e3:.0f} ms, "
            f"{c.added_layer_overhead_s * 1e3:.1f} ms |"
        )
    ranked = [r for r, _ in results]
    lines.append("")
    lines.append(_summary(ranked, "calibrated on the other days' runs"))
    return "\n".join(lines) + "\n"


def _summary(results: Sequence[Ranked], what: str) -> str:
    mean = statistics.fmean(r.spearman for r in results)
    within = sum(r.pick_ratio <= 1 + WITHIN for r in results)
    return (
        f"Mean Spearman {mean:.2f} over {len(results)} models, {what} (pooled over all "
        f"{sum(len(r.group.runs) for r in results)} runs: {pooled_spearman(results):.2f}); the pick within "
        f"5% of the measured best on {within} of {len(results)}."
    )


def ranking_table(results: Sequence[Ranked]) -> str:
    lines = [
        "| model (hidden x layers @ date) | layouts | Spearman | planner's pick (measured s) "
        "| measured best (s) | pick ÷ best | search's best (predicted s) |",
        "|---|---:|---:|---|---|---:|---|",
    ]
    for r in results:
        pick_plan, pick_s = r.group.runs[r.pick]
        best_plan, best_s = r.group.runs[r.best]
        found = r.search_best
        searched = f"{_layout(found.plan)} ({found.step_time_s:.1f})" if found else "none fits"
        lines.append(
            f"| {r.group.name} | {len(r.group.runs)} | {r.spearman:+.2f} | {_layout(pick_plan)} ({pick_s:.2f}) "
            f"| {_layout(best_plan)} ({best_s:.2f}) | {r.pick_ratio:.3f} | {searched} |"
        )
    lines.append("")
    lines.append(_summary(results, "the cost model as calibrated on SC21"))
    return "\n".join(lines) + "\n"


RESULTS = ranked_groups()
_BLOCK = re.compile(r"<!-- ranking: bloom -->\n(.*?)<!-- end ranking -->", re.DOTALL)
_CALIBRATED_BLOCK = re.compile(r"<!-- ranking: bloom-calibrated -->\n(.*?)<!-- end ranking -->", re.DOTALL)


@pytest.fixture(scope="module")
def calibrated() -> list[tuple[Ranked, Calibration]]:
    return calibrated_groups()


def test_spearman_of_the_same_order_is_one_and_of_the_reverse_minus_one() -> None:
    assert spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 35.0, 90.0]) == pytest.approx(1.0)
    assert spearman([1.0, 2.0, 3.0, 4.0], [9.0, 7.0, 3.0, 1.0]) == pytest.approx(-1.0)


def test_spearman_gives_tied_values_their_average_rank() -> None:
    # Given ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): covariance 4.5, variances 4.5 and 5
    assert spearman([1.0, 2.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(4.5 / (4.5 * 5.0) ** 0.5)


def test_spearman_refuses_what_it_cannot_compute() -> None:
    with pytest.raises(ValueError, match="one length"):
        spearman([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="single distinct value"):
        spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])


def test_each_model_has_three_or_more_measured_layouts_of_the_whole_machine() -> None:
    assert len(RESULTS) == 8
    for r in RESULTS:
        assert len(r.group.runs) >= 3, r.group.name
        assert {plan.tp * plan.pp * plan.dp for plan, _ in r.group.runs} == {NODES * 8}, r.group.name
        assert len({plan.key() for plan, _ in r.group.runs}) == len(r.group.runs), r.group.name


def test_every_measured_layout_fits_the_planners_memory_model() -> None:
    # Given layouts that ran on 80 GB GPUs, then the memory model does not call any of them infeasible
    for r in RESULTS:
        for evaluation in r.predicted:
            assert evaluation.feasible, (r.group.name, evaluation.plan, evaluation.memory_gib_per_gpu)


def test_ranking_regression_guard() -> None:
    # Given the cost model as calibrated on SC21 (nothing fitted to these rows)
    mean = statistics.fmean(r.spearman for r in RESULTS)
    within = sum(r.pick_ratio <= 1 + WITHIN for r in RESULTS)
    # Then the ranking stays where it is today (mean 0.48, picks within 5% on 7 of 8): better is welcome
    assert mean >= 0.47, [(r.group.name, round(r.spearman, 2)) for r in RESULTS]
    assert within >= 7, [(r.group.name, round(r.pick_ratio, 3)) for r in RESULTS]
    # And on the two models of the last day (tp 8 against tp 4, micro-batch 2 against 4) the order is exact
    assert [r.spearman for r in RESULTS if r.group.name.endswith("@02-28")] == pytest.approx([1.0, 1.0])


def _with_block_cost(seconds: float) -> tuple[float, int, int]:
    """Mean Spearman and picks within 5% with ``seconds`` added to every block pass (a what-if), and the SC21
    Table 1 rows still within 15% with it."""
    machine = jean_zay()
    efficiency = dataclasses.replace(
        DEFAULT_EFFICIENCY, layer_overhead_s=DEFAULT_EFFICIENCY.layer_overhead_s + seconds
    )
    ranked = [rank_group(group, machine, efficiency) for group in bloom_groups()]
    sc21_within = 0
    for row in sc21_rows():
        e = evaluate(row.model, row.cluster, row.plan, efficiency=efficiency)
        sc21_within += abs(e.tflops_per_gpu / row.tflops_per_gpu - 1) <= 0.15
    within = sum(r.pick_ratio <= 1 + WITHIN for r in ranked)
    return statistics.fmean(r.spearman for r in ranked), within, sc21_within


def test_a_fixed_cost_per_block_is_what_the_ranking_misses_and_megatron_does_not_pay() -> None:
    # Given a fixed cost added to every block pass (host dispatch; 0.1 ms in the SC21-calibrated model)
    rho, within, sc21_within = _with_block_cost(0.002)
    # Then 2 ms of it ranks BLOOM's stack at 0.95, every pick within 5%
    assert rho == pytest.approx(0.95, abs=0.01)
    assert within == 8
    # But it is this stack's cost, not Megatron's: on SC21 Table 1 3 ms of it fails half the rows
    assert sc21_within >= 9
    assert _with_block_cost(0.003)[2] <= 5


def test_issue_18_goal_calibrated_on_the_clusters_other_days(
    calibrated: list[tuple[Ranked, Calibration]],
) -> None:
    # Given each model ranked by the model fitted to the other days' runs (never its own, nor its day's)
    ranked = [r for r, _ in calibrated]
    mean = statistics.fmean(r.spearman for r in ranked)
    # Then the mean Spearman is at least 0.8 and every pick is within 5% of the measured best (issue #18)
    assert mean >= 0.8, [(r.group.name, round(r.spearman, 2)) for r in ranked]
    assert all(r.pick_ratio <= 1 + WITHIN for r in ranked), [(r.group.name, r.pick_ratio) for r in ranked]
    # And every fit finds the stack's block cost, milliseconds per block pass, and no per-micro-batch cost
    for _, calibration in calibrated:
        assert 0.001 < calibration.added_layer_overhead_s < 0.006, calibration.to_dict()
        assert calibration.micro_batch_overhead_s < 0.005, calibration.to_dict()


def test_calibrating_on_earlier_days_ranks_the_later_days() -> None:
    # Given the runs of each day ranked by the model fitted to the days before it (measurements in time order)
    machine = jean_zay()
    groups = bloom_groups()
    later = []
    for group in groups:
        past = [Measured(g.model, p, s) for g in groups if _day(g) < _day(group) for p, s in g.runs]
        if past:
            later.append(rank_group(group, machine, fit(past, machine).efficiency))
    # Then the six later models rank at a mean Spearman of 0.95 (the goal: 0.8) and every pick is within 5%
    assert len(later) == 6
    assert statistics.fmean(r.spearman for r in later) == pytest.approx(0.95, abs=0.01)
    assert all(r.pick_ratio <= 1 + WITHIN for r in later)


def test_the_docs_tables_are_the_computed_ones(calibrated: list[tuple[Ranked, Calibration]]) -> None:
    text = DOC.read_text()
    found = _BLOCK.search(text)
    assert found is not None, "docs/planner.md has no <!-- ranking: bloom --> block"
    assert found.group(1) == ranking_table(RESULTS), "run python -m tests.planner.test_ranking and paste"
    found = _CALIBRATED_BLOCK.search(text)
    assert found is not None, "docs/planner.md has no <!-- ranking: bloom-calibrated --> block"
    assert found.group(1) == calibrated_table(calibrated), (
        "run python -m tests.planner.test_ranking and paste"
    )


if __name__ == "__main__":
    print(ranking_table(RESULTS), end="")
    print()
    print(calibrated_table(calibrated_groups()), end="")
