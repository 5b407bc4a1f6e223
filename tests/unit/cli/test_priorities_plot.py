"""Given the cycles `osprey local` ran and the decisions the registry recorded (only on change), when the
priorities plot is drawn, then its x-axis counts real cycles with each job's last priority carried forward,
lines with the same values stay distinguishable, and the legend sits outside the data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from osprey.local.plot import MAX_OFFSET, PriorityHistory, draw_priorities, per_cycle, plot_series

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


def _cycle(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def _during(n: int) -> datetime:
    """A decision recorded while cycle ``n`` (1-based) ran."""
    return _cycle(n - 1) + timedelta(seconds=5)


HISTORY = PriorityHistory(
    cycles=[_cycle(n) for n in range(6)],  # six cycles
    decisions={
        # climbs 10 a cycle for three cycles, then settles: recorded nothing after cycle 3
        "llama-batch": [(_during(1), 60), (_during(2), 70), (_during(3), 79)],
        # two jobs with the same history
        "etl-batch": [(_during(1), 40), (_during(2), 33)],
        "bert-sagemaker": [(_during(1), 40), (_during(2), 33)],
        # registered by the fourth cycle's discovery
        "vit-eks": [(_during(4), 55)],
        # never derived yet
        "idle": [],
    },
)


def test_the_x_axis_counts_real_cycles_and_carries_the_last_decision_forward() -> None:
    # When the series are computed from six cycles and change-only decisions
    priorities = per_cycle(HISTORY, initial=50)

    # Then every job has a value before the first cycle and after each of the six: no line stops early
    assert {label: len(values) for label, values in priorities.items()} == dict.fromkeys(HISTORY.decisions, 7)
    assert priorities["llama-batch"] == [50, 60, 70, 79, 79, 79, 79]
    assert priorities["etl-batch"] == [50, 40, 33, 33, 33, 33, 33]
    assert priorities["vit-eks"] == [50, 50, 50, 50, 55, 55, 55]
    assert priorities["idle"] == [50] * 7
    # ... and the drawn x values are the cycle numbers 0..6
    assert {tuple(line.x) for line in plot_series(priorities)} == {tuple(range(7))}


def test_several_decisions_in_one_cycle_keep_the_last_and_early_stamps_go_to_the_first() -> None:
    history = PriorityHistory(
        cycles=[_cycle(0), _cycle(1)],
        decisions={
            "j": [(_during(2) + timedelta(seconds=1), 65), (_during(2), 61), (T0 - timedelta(seconds=1), 58)]
        },
    )
    assert per_cycle(history, initial=50)["j"] == [50, 58, 65]


def test_overlapping_lines_are_distinguishable() -> None:
    # Given two jobs with identical priorities
    series = {line.label: line for line in plot_series(per_cycle(HISTORY))}
    etl, bert = series["etl-batch"], series["bert-sagemaker"]
    assert etl.priorities == bert.priorities

    # Then they are drawn at different heights, within the stated offset of their true values
    assert all(a != b for a, b in zip(etl.y, bert.y, strict=True))
    for line in series.values():
        assert all(abs(y - p) <= MAX_OFFSET for y, p in zip(line.y, line.priorities, strict=True))
    # ... and every line has its own marker and line style
    assert len({(line.marker, line.linestyle) for line in series.values()}) == len(series)


def test_ten_jobs_each_get_a_distinct_style() -> None:
    series = plot_series({f"job-{n}": [50, 50] for n in range(10)})
    assert len({(line.marker, line.linestyle) for line in series}) == 10
    assert len({line.y[0] for line in series}) == 10


def test_the_legend_is_outside_the_data() -> None:
    # When the figure is drawn
    figure = draw_priorities(per_cycle(HISTORY))
    figure.canvas.draw()
    axes = figure.axes[0]
    legend = axes.get_legend()
    assert legend is not None

    # Then the legend lists every job and lies wholly to the right of the axes
    assert [text.get_text() for text in legend.get_texts()] == list(HISTORY.decisions)
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    assert legend.get_window_extent(renderer).x0 >= axes.get_window_extent(renderer).x1
    assert axes.get_xlabel().startswith("cycle")
