"""Emit :class:`osprey_control.telemetry.MetricPoint` lists as EMF through Powertools Metrics."""

from __future__ import annotations

from collections.abc import Iterable

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from osprey_control.telemetry import MetricPoint

__all__ = ["publish"]


def _unit(name: str) -> MetricUnit:
    return MetricUnit.NoUnit if name == "None" else MetricUnit(name)


def publish(points: Iterable[MetricPoint], namespace: str) -> int:
    """One EMF record per point, with its own dimensions and all its values; returns how many were printed.

    EphemeralMetrics, not Metrics: Powertools' Metrics shares one metric set per process, and each point here
    needs its own dimension set.
    """
    written = 0
    for point in points:
        if not point.values:
            continue
        metrics = EphemeralMetrics(namespace=namespace)
        for dimension, label in point.dimensions.items():
            metrics.add_dimension(name=dimension, value=label)
        for value in point.values:
            metrics.add_metric(name=point.name, unit=_unit(point.unit), value=value)
        metrics.flush_metrics()
        written += 1
    return written
