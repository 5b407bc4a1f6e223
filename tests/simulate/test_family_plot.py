"""The family scatter: Given each draw's wait and goodput change per pair, when it is plotted, then one PNG
``family-wait-vs-goodput.png`` holds a point per draw and pair, a colour per pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from osprey.simulate.plots import plot_family


def test_the_scatter_is_one_png_named_for_the_family(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    points = [("kueue->kueue+osprey", -40.0, 0.5), ("slurm->slurm+osprey", 250.0, -3.0)]
    path = plot_family(points, tmp_path / "img")
    assert path == tmp_path / "img" / "family-wait-vs-goodput.png"
    assert path.read_bytes()[:4] == b"\x89PNG"
    # A different set of points draws a different picture (the points are on it, not only the axes).
    other = plot_family([("kueue->kueue+osprey", 40.0, -0.5)], tmp_path / "other")
    assert other.read_bytes() != path.read_bytes()
