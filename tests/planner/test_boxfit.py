"""Given a least-squares problem with bounds, when ``boxfit.least_squares`` fits it, then it finds the
minimum inside the box, stops on a bound the minimum lies beyond without stalling the other dimensions, and
keeps the deepest valley of several starts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from osprey_control.planner.boxfit import Box, least_squares

UNIT = Box(lows=(-1.0, -1.0), highs=(1.0, 1.0))


def test_an_inner_minimum_is_found() -> None:
    def residuals(x: Sequence[float]) -> list[float]:
        return [x[0] - 0.3, 2.0 * (x[1] + 0.5)]

    assert least_squares(residuals, UNIT, [[0.0, 0.0]]) == pytest.approx([0.3, -0.5], abs=1e-6)


def test_a_bound_holds_one_dimension_and_the_other_still_reaches_its_best() -> None:
    # Given a minimum at x0 = 3 (outside the box), coupled to x1: the best x1 with x0 held at 1 is 0.5
    def residuals(x: Sequence[float]) -> list[float]:
        return [x[0] - 3.0, x[1] - 0.5 * x[0]]

    # Then x0 stops on its bound and x1 reaches 0.5, the constrained minimum
    assert least_squares(residuals, UNIT, [[0.0, 0.0]]) == pytest.approx([1.0, 0.5], abs=1e-6)


def test_the_deepest_of_two_valleys_is_kept_whatever_the_first_start_finds() -> None:
    # Given two valleys, x = -0.6 (residual 0.1 left) and x = 0.7 (exact), the first start in the shallow one
    def residuals(x: Sequence[float]) -> list[float]:
        return [(x[0] + 0.6) * (x[0] - 0.7), 0.1 * (x[0] < 0)]

    box = Box(lows=(-1.0,), highs=(1.0,))
    assert least_squares(residuals, box, [[-0.9]])[0] == pytest.approx(-0.6, abs=1e-3)
    assert least_squares(residuals, box, [[-0.9], [0.9]])[0] == pytest.approx(0.7, abs=1e-3)
    with pytest.raises(ValueError, match="at least one start"):
        least_squares(residuals, box, [])


def test_a_start_where_the_residuals_break_down_never_wins() -> None:
    # Given residuals that are NaN left of 0 and exact at 0.3, and a first start in the broken region
    def residuals(x: Sequence[float]) -> list[float]:
        return [float("nan") if x[0] < 0 else x[0] - 0.3]

    box = Box(lows=(-1.0,), highs=(1.0,))
    # Then the second start's exact fit is kept
    assert least_squares(residuals, box, [[-0.5], [0.5]])[0] == pytest.approx(0.3, abs=1e-6)
