"""Given metric points, when a handler publishes them, then stdout carries valid EMF in Osprey's namespace."""

from __future__ import annotations

import json

import pytest

from osprey_control.telemetry import MetricPoint
from osprey_handlers._telemetry import publish


def test_points_become_emf_records_with_their_dimensions(capsys: pytest.CaptureFixture[str]) -> None:
    points = [
        MetricPoint("DerivedPriority", "None", (60.0, 70.0), {"Policy": "training-policy"}),
        MetricPoint("JobsEvaluated", "Count", (2.0,)),
    ]
    assert publish(points, "/aws/osprey") == 2
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    derived = next(r for r in records if "DerivedPriority" in r)
    directive = derived["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "/aws/osprey"
    assert ["Policy"] in directive["Dimensions"] or any("Policy" in d for d in directive["Dimensions"])
    assert derived["Policy"] == "training-policy"
    assert derived["DerivedPriority"] == [60.0, 70.0]
    evaluated = next(r for r in records if "JobsEvaluated" in r)
    assert evaluated["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [
        {"Name": "JobsEvaluated", "Unit": "Count"}
    ]
