"""Least squares in a box: Levenberg-Marquardt with bounds, from several starts.

``least_squares(residuals, box, starts)`` minimises the sum of squared ``residuals(x)`` for ``x`` within
``box`` (per-dimension lows and highs, best scaled so that one finite-difference step suits every dimension)
and returns the lowest point reached from any start. Steps are projected onto the box, and a dimension on a
bound whose descent direction points out of the box is held there for the step, so that the other dimensions'
step is not spoiled by a component the bound would cut off (without this a projected step stalls on a
bound). Pure Python: the calibration's problems have at most five dimensions.

Decision: Levenberg-Marquardt rather than a derivative-free search: the residuals are smooth almost
everywhere, and it needs (dimensions + 1) evaluations of the residuals per iteration where a pattern search
over every direction needs 3^dimensions - 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__: list[str] = []

_MAX_ITERATIONS = 100
# Finite-difference step in the scaled dimensions, and the relative improvement at which a fit stops.
_DIFFERENCE = 1e-4
_TOLERANCE = 1e-9

Residuals = Callable[[Sequence[float]], list[float]]


@dataclass(frozen=True, slots=True)
class Box:
    lows: tuple[float, ...]
    highs: tuple[float, ...]

    def clip(self, x: Sequence[float]) -> list[float]:
        return [max(low, min(high, v)) for low, high, v in zip(self.lows, self.highs, x, strict=True)]

    def pinned(self, x: Sequence[float], gradient: Sequence[float]) -> set[int]:
        """Dimensions on a bound that the descent direction (minus ``gradient``) would push further out."""
        return {
            i
            for i, (value, slope) in enumerate(zip(x, gradient, strict=True))
            if (value <= self.lows[i] and slope > 0) or (value >= self.highs[i] and slope < 0)
        }


def least_squares(residuals: Residuals, box: Box, starts: Sequence[Sequence[float]]) -> list[float]:
    """The lowest point of the fits from every start (ties: the earliest start's); raises ValueError on none."""
    if not starts:
        raise ValueError("least_squares needs at least one start")
    best: tuple[float, list[float]] | None = None
    for start in starts:
        x, loss = _levenberg_marquardt(residuals, box, box.clip(start))
        if not math.isfinite(loss):
            loss = math.inf  # a start where the model breaks down never wins over one where it does not
        if best is None or loss < best[0] * (1 - 1e-9):
            best = (loss, x)
    assert best is not None
    return best[1]


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting for the (small) normal equations."""
    n = len(rhs)
    rows = [[*matrix[i], rhs[i]] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(col + 1, n):
            ratio = rows[r][col] / rows[col][col]
            rows[r] = [a - ratio * b for a, b in zip(rows[r], rows[col], strict=True)]
    solution = [0.0] * n
    for r in reversed(range(n)):
        tail = sum(rows[r][c] * solution[c] for c in range(r + 1, n))
        solution[r] = (rows[r][n] - tail) / rows[r][r]
    return solution


def _levenberg_marquardt(residuals: Residuals, box: Box, start: list[float]) -> tuple[list[float], float]:
    """The point reached from ``start`` and its loss (the sum of squared residuals there)."""
    x = start
    residual = residuals(x)
    loss = sum(r * r for r in residual)
    damping = 1e-3
    for _ in range(_MAX_ITERATIONS):
        columns = []
        for i in range(len(x)):
            # One-sided difference pointing into the box (a dimension may sit on its bound).
            h = _DIFFERENCE if x[i] + _DIFFERENCE <= box.highs[i] else -_DIFFERENCE
            shifted = list(x)
            shifted[i] += h
            columns.append([(a - b) / h for a, b in zip(residuals(shifted), residual, strict=True)])
        normal = [[sum(a * b for a, b in zip(ci, cj, strict=True)) for cj in columns] for ci in columns]
        gradient = [sum(a * r for a, r in zip(ci, residual, strict=True)) for ci in columns]
        pinned = box.pinned(x, gradient)
        moving = [i for i in range(len(x)) if i not in pinned]
        improved = converged = False
        while moving and damping < 1e8:
            # A dimension the residuals do not move (a zero column) gets no step: the ridge keeps it put.
            damped = [
                [normal[i][j] + (damping * (normal[i][i] + 1e-9) if i == j else 0.0) for j in moving]
                for i in moving
            ]
            step = [0.0] * len(x)
            for i, value in zip(moving, _solve(damped, [-gradient[i] for i in moving]), strict=True):
                step[i] = value
            trial = box.clip([a + b for a, b in zip(x, step, strict=True)])
            trial_residual = residuals(trial)
            trial_loss = sum(r * r for r in trial_residual)
            if trial_loss < loss - 1e-15:
                converged = loss - trial_loss < _TOLERANCE * max(loss, 1e-12)
                x, residual, loss, improved = trial, trial_residual, trial_loss, True
                damping = max(damping / 3.0, 1e-9)
                break
            damping *= 4.0
        if not improved or converged:
            break
    return x, loss
