"""The generated tables of docs/planner.md, computed from the planner and the published data.

Each table sits between ``<!-- generated: NAME -->`` and ``<!-- end generated -->`` in the doc. Regenerate
after changing the cost model::

    .venv/bin/python -m tests.planner.doc_tables --write

``tests/planner/test_doc_tables.py`` fails when the doc and the code disagree.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from osprey_control.planner import (
    DEFAULT_EFFICIENCY,
    CurrentPlan,
    Efficiency,
    Evaluation,
    Measurement,
    ModelSpec,
    Plan,
    Recompute,
    cluster,
    evaluate,
    replan,
    search,
)
from osprey_control.planner.search import search_exhaustive
from tests.planner.cross_generation import cross_generation_table, h100_rows, llama_rows, nemo_rows
from tests.planner.published import korthikanti_rows, memory_rows, sc21_rows, selene

__all__ = ["DOC", "TABLES", "render"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "planner.md"
_TERMS = (
    ("compute", "compute_s"),
    ("tp comm", "tp_comm_s"),
    ("pp comm", "pp_comm_s"),
    ("bubble", "bubble_s"),
    ("dp exposed", "dp_exposed_s"),
    ("optimizer", "optimizer_s"),
)


def _plan(e: Evaluation) -> str:
    p = e.plan
    virtual = f" v{p.virtual}" if p.virtual > 1 else ""
    return f"{p.tp}x{p.pp}x{p.dp} b{p.micro_batch}{virtual}"


def _favouring(published: Evaluation, best: Evaluation) -> str:
    """The terms (seconds per step) by which the best plan beats the published one, largest first."""
    gains = [(getattr(published, field) - getattr(best, field), name) for name, field in _TERMS]
    shown = [f"{name} {gain:.2f} s less" for gain, name in sorted(gains, reverse=True) if gain >= 0.05][:2]
    return ", ".join(shown) or "-"


def sc21_table() -> str:
    lines = [
        "| model | published plan (tp x pp x dp, micro-batch, virtual) | published TFLOP/s | predicted | error "
        "| planner's best | best predicted | published ÷ best | best is faster by |",
        "|---|---|---:|---:|---:|---|---:|---:|---|",
    ]
    errors, agreeing = [], 0
    for row in sc21_rows():
        published = evaluate(row.model, row.cluster, row.plan)
        best = search(row.model, row.cluster).best
        assert best is not None
        error = (published.tflops_per_gpu - row.tflops_per_gpu) / row.tflops_per_gpu
        errors.append(abs(error))
        ratio = published.tflops_per_gpu / best.tflops_per_gpu
        agreeing += ratio >= 0.9
        same = best.plan == published.plan
        lines.append(
            f"| {row.name} | {_plan(published)} | {row.tflops_per_gpu:.0f} | {published.tflops_per_gpu:.1f} "
            f"| {error:+.1%} | {'same' if same else _plan(best)} | {best.tflops_per_gpu:.1f} | {ratio:.3f}"
            f"{'' if ratio >= 0.9 else ' **(>10%)**'} | {'-' if same else _favouring(published, best)} |"
        )
    lines.append("")
    lines.append(
        f"Median absolute error {statistics.median(errors):.1%}, largest {max(errors):.1%}; the published "
        f"configuration is within 10% of the predicted best on {agreeing} of {len(errors)} rows."
    )
    return "\n".join(lines)


def korthikanti_table() -> str:
    lines = [
        "| model | plan (tp x pp, micro-batch, virtual) | GPUs | published s/iteration, full recompute "
        "| predicted | error | published, sp + selective | predicted | error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in korthikanti_rows():
        full = evaluate(row.model, row.cluster, row.plan)
        selective = evaluate(
            dataclasses.replace(row.model, recompute=Recompute.SELECTIVE), row.cluster, row.plan
        )
        error = (full.step_time_s - row.iter_s_full) / row.iter_s_full
        error_selective = (selective.step_time_s - row.iter_s_selective) / row.iter_s_selective
        lines.append(
            f"| {row.name} | {_plan(full)} | {row.cluster.gpus} | {row.iter_s_full:.2f} "
            f"| {full.step_time_s:.2f} | {error:+.1%} | {row.iter_s_selective:.2f} | {selective.step_time_s:.2f} "
            f"| {error_selective:+.1%} |"
        )
    return "\n".join(lines)


def memory_table() -> str:
    lines = [
        "| model | tp x pp, b, v | states GiB (pub / pred) | activations, tp only (pub / pred) "
        "| activations, tp + sp + selective (pub / pred) |",
        "|---|---|---:|---:|---:|",
    ]
    for row in memory_rows():
        gpus = row.plan.tp * row.plan.pp
        none = evaluate(dataclasses.replace(row.model, recompute=Recompute.NONE), selene(gpus), row.plan)
        selective = evaluate(
            dataclasses.replace(row.model, recompute=Recompute.SELECTIVE), selene(gpus), row.plan
        )
        p = row.plan
        lines.append(
            f"| {row.name} | {p.tp}x{p.pp}, b{p.micro_batch}, v{p.virtual} "
            f"| {row.states_gib:.2f} / {none.layer_states_gib:.2f} "
            f"| {row.activations_tp_gib:.2f} / {none.activations_gib:.2f} "
            f"| {row.activations_selective_gib:.2f} / {selective.activations_gib:.2f} |"
        )
    return "\n".join(lines)


def replan_table() -> str:
    from tests.planner.test_replan import SEED_CLUSTER, SEED_MODEL, SEED_PLAN, WHAT_IF  # noqa: PLC0415

    lines = [
        "| network (per node, latency) | 8x1x16 step s | 8x1x16 dp exposed s | proposed | proposed step s "
        "| expected saving | decision |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    current = CurrentPlan(SEED_MODEL, SEED_CLUSTER, SEED_PLAN)
    for gbits, latency in ((1600, 15), (800, 45), (400, 45)):
        decision = replan(
            current, Measurement(step=600, network_gbits=gbits, network_latency_us=latency), options=WHAT_IF
        )
        proposed = decision.proposed
        assert proposed is not None
        lines.append(
            f"| {gbits} Gb/s, {latency} µs | {decision.current.step_time_s:.1f} "
            f"| {decision.current.dp_exposed_s:.1f} | {_plan(proposed)} | {proposed.step_time_s:.1f} "
            f"| {decision.expected_saving_s:.1f} s ({decision.expected_saving_fraction:.1%}) | {decision.reason} |"
        )
    checked = replan(current, Measurement(step=600, network_gbits=400, network_latency_us=45))
    proposed = checked.proposed
    assert proposed is not None
    lines.append("")
    lines.append(
        f"With the memory check on (the default), 8x1x16 needs {checked.current.memory_gib_per_gpu:.0f} GiB per "
        f"GPU against a limit of {checked.current.memory_limit_gib:.0f}; the planner proposes {_plan(proposed)} "
        f"({proposed.memory_gib_per_gpu:.0f} GiB, {proposed.step_time_s:.1f} s per step)."
    )
    seed = evaluate(
        SEED_MODEL,
        SEED_CLUSTER.with_changes(network_gbits=400, network_latency_us=45),
        Plan(tp=4, pp=4, dp=8, micro_batch=1),
    )
    lines.append(
        f"The seed's own 4x4x8 b1 predicts {seed.step_time_s:.1f} s per step on the degraded network "
        f"({1 - seed.step_time_s / checked.current.step_time_s:.1%} faster than 8x1x16) and needs "
        f"{seed.memory_gib_per_gpu:.0f} GiB per GPU."
    )
    return "\n".join(lines)


def search_speed_table() -> str:

    model = ModelSpec(layers=128, hidden=25600, heads=160, seq=2048, vocab=51200, global_batch=3072)
    lines = [
        "| GPUs | plans evaluated (pruned) | plans evaluated (exhaustive) | best plan |",
        "|---:|---:|---:|---|",
    ]
    for gpus in (64, 128, 256, 512, 1024, 2048, 3072):
        target = cluster(gpus, gpu="A100-80GB", gpus_per_node=8, network_gbits=1600)
        result, baseline = search(model, target), search_exhaustive(model, target)
        best = _plan(result.best) if result.best else "none fits"
        lines.append(f"| {gpus} | {result.evaluated} | {baseline.evaluated} | {best} |")
    return "\n".join(lines)


def sensitivity_table() -> str:
    """SC21 median and worst error with each efficiency constant moved by -20% and +20%."""
    rows = sc21_rows()

    def errors(efficiency: Efficiency) -> tuple[float, float]:
        values = [
            abs(evaluate(r.model, r.cluster, r.plan, efficiency=efficiency).tflops_per_gpu - r.tflops_per_gpu)
            / r.tflops_per_gpu
            for r in rows
        ]
        return statistics.median(values), max(values)

    median, worst = errors(DEFAULT_EFFICIENCY)
    lines = [
        "| constant | value | median / worst error at -20% | at +20% |",
        "|---|---:|---:|---:|",
        f"| (as calibrated) | | {median:.1%} / {worst:.1%} | |",
    ]
    for field in dataclasses.fields(Efficiency):
        value = getattr(DEFAULT_EFFICIENCY, field.name)
        if value == 0:
            continue  # a cost that is 0 until calibrated (micro_batch_overhead_s): no +-20% to show
        low = errors(dataclasses.replace(DEFAULT_EFFICIENCY, **{field.name: value * 0.8}))
        high = errors(dataclasses.replace(DEFAULT_EFFICIENCY, **{field.name: value * 1.2}))
        lines.append(
            f"| `{field.name}` | {value:g} | {low[0]:.1%} / {low[1]:.1%} | {high[0]:.1%} / {high[1]:.1%} |"
        )
    return "\n".join(lines)


TABLES: dict[str, Callable[[], str]] = {
    "sensitivity": sensitivity_table,
    "sc21": sc21_table,
    "korthikanti-time": korthikanti_table,
    "korthikanti-memory": memory_table,
    "replan-seed": replan_table,
    "search-speed": search_speed_table,
    "h100": lambda: cross_generation_table(h100_rows()),
    "nemo": lambda: cross_generation_table(nemo_rows()),
    "llama": lambda: cross_generation_table(llama_rows()),
}
_BLOCK = re.compile(r"(<!-- generated: ([a-z0-9-]+) -->\n)(.*?)(<!-- end generated -->)", re.DOTALL)


def render(text: str) -> str:
    """``text`` with every generated block replaced by the current table; unknown names are an error."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in TABLES:
            raise KeyError(
                f"docs/planner.md names an unknown generated table {name!r}; known: {', '.join(TABLES)}"
            )
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return _BLOCK.sub(replace, text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate or check the tables of docs/planner.md.")
    parser.add_argument("--write", action="store_true", help="rewrite docs/planner.md in place")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    new = render(text)
    if args.write:
        DOC.write_text(new)
        return 0
    if new != text:
        print(
            "docs/planner.md is out of date: run python -m tests.planner.doc_tables --write", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
