"""``osprey cost``'s model: the monthly bill of a deployment, per line item, with its arithmetic.

- :mod:`osprey.cost.prices`: the price table (source pages and date);
- :mod:`osprey.cost.template`: what the synthesized template says (state transitions, functions, alarms);
- :mod:`osprey.cost.fleet`: a synthetic fleet, the collector's series, the agent's metrics;
- :mod:`osprey.cost.model`: the line items; :mod:`osprey.cost.arithmetic`: numbers that show their formula;
- :mod:`osprey.cost.source`: reading or synthesizing the artifacts (the only I/O).
"""

from __future__ import annotations

from osprey.cost.fleet import FleetShape, agent_metrics, metric_load, synthetic_fleet
from osprey.cost.model import Assumptions, CostLine, CostReport, estimate
from osprey.cost.prices import PRICES, PRICES_DATE, SOURCES
from osprey.cost.template import TemplateError, TemplateFacts, read_template

__all__ = [
    "PRICES",
    "PRICES_DATE",
    "SOURCES",
    "Assumptions",
    "CostLine",
    "CostReport",
    "FleetShape",
    "TemplateError",
    "TemplateFacts",
    "agent_metrics",
    "estimate",
    "metric_load",
    "read_template",
    "synthetic_fleet",
]
