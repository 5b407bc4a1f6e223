"""Given a model and a cluster, when the planner searches, then it returns only valid plans, ranks the
feasible ones by score, matches the exhaustive baseline, and says so when nothing fits."""

from __future__ import annotations

import dataclasses

from osprey_control.planner import ModelSpec, SearchOptions, cluster, search
from osprey_control.planner.search import divisors, enumerate_plans, search_exhaustive

MODEL = ModelSpec(layers=40, hidden=6144, heads=48, seq=2048, vocab=51200, global_batch=1024)
CLUSTER = cluster(256, instance_type="p4de.24xlarge")


def test_every_candidate_satisfies_the_layout_constraints() -> None:
    result = search(MODEL, CLUSTER, SearchOptions(top_k=50), keep_all=True)
    assert result.everything
    for e in result.everything:
        tp, pp, dp, b, v = e.plan.key()
        assert tp * pp * dp == 256
        assert MODEL.heads % tp == 0
        assert tp <= 8
        assert MODEL.layers % pp == 0
        assert MODEL.global_batch % (dp * b) == 0
        if v > 1:
            assert MODEL.layers % (pp * v) == 0
            assert e.micro_batches % pp == 0


def test_top_k_is_sorted_by_score_and_all_feasible() -> None:
    result = search(MODEL, CLUSTER, SearchOptions(top_k=7))
    assert result.best is not None
    assert len(result.candidates) == 7
    assert result.candidates[0] == result.best
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    assert all(c.feasible for c in result.candidates)


def test_pruned_search_finds_the_same_best_as_the_exhaustive_baseline() -> None:
    pruned = search(MODEL, CLUSTER)
    baseline = search_exhaustive(MODEL, CLUSTER)
    assert pruned.best is not None
    assert baseline.best is not None
    assert pruned.best.plan == baseline.best.plan
    assert pruned.evaluated <= baseline.evaluated
    assert baseline.evaluated == sum(1 for _ in enumerate_plans(MODEL, CLUSTER, SearchOptions()))


def test_no_feasible_plan_gives_no_best_and_the_least_memory_candidates() -> None:
    huge = dataclasses.replace(MODEL, layers=400, hidden=16384, heads=128)
    result = search(huge, cluster(8, instance_type="p4d.24xlarge"))
    assert result.best is None
    assert result.candidates
    assert not any(c.feasible for c in result.candidates)
    memory = [c.memory_gib_per_gpu for c in result.candidates]
    assert memory == sorted(memory)


def test_uneven_pipeline_allows_depths_that_do_not_divide_the_layers() -> None:
    plans = {
        e.plan.pp
        for e in search(MODEL, CLUSTER, SearchOptions(uneven_pipeline=True), keep_all=True).everything
    }
    assert any(MODEL.layers % pp for pp in plans)
    assert all(
        MODEL.layers % pp == 0 for pp in {p.pp for p in enumerate_plans(MODEL, CLUSTER, SearchOptions())}
    )


def test_divisors() -> None:
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(1) == [1]
