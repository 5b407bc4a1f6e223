"""An Osprey custom rule: jobs on spot capacity that may be interrupted go later.

A custom rule is an ordinary AWS Lambda function (docs/custom-rules.md). Osprey invokes it once per job and
cycle with the event of docs/design.md §4 and uses the ``derived_priority`` it answers. This one reads each
node's ``spot_interruption_risk`` (0 no warning, 0.5 an EC2 rebalance recommendation, 1.0 an interruption
warning; ``null`` when unknown) and takes up to :data:`RISK_PENALTY` points off the priority the policy's
other rules computed, in proportion to the riskiest node: a job about to lose a node should not hold the
capacity that a job able to finish needs, and a checkpointing job loses little by going later.

Deploy it as a function named with the deployment's allowed prefix (default ``osprey-rule-``), handler
``spot_risk.handler``, Python 3.12, no dependencies; see docs/custom-rules.md.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["FLOOR", "RISK_PENALTY", "derived_priority", "handler"]

RISK_PENALTY = 40.0  # points taken off at risk 1.0 (an interruption warning)
FLOOR = 5.0  # never below: the job keeps some capacity to write its checkpoint


def _risk(node_metrics: Any) -> float:
    """The highest risk of any node; nodes without a value count as no warning (EC2 sent none)."""
    risks = [0.0]
    for node in node_metrics if isinstance(node_metrics, list) else []:
        value = node.get("spot_interruption_risk") if isinstance(node, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            risks.append(min(1.0, max(0.0, float(value))))
    return max(risks)


def derived_priority(event: dict[str, Any]) -> float:
    """The priority for the job in ``event``: the running value ``base_priority`` (``current_priority`` when
    it is null: used as a weighted rule, with no built-in rule's data) lowered by the nodes' interruption risk."""
    start = event.get("base_priority")
    if not isinstance(start, int | float) or isinstance(start, bool):
        start = event["current_priority"]
    lowered = float(start) - RISK_PENALTY * _risk(event.get("node_metrics"))
    return round(max(min(float(start), FLOOR), lowered), 2)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point. The answer's plain form; ``{"statusCode": 200, "body": json.dumps(...)}`` (a
    function also served through API Gateway) is accepted too."""
    priority = derived_priority(event)
    print(json.dumps({"job": event.get("job", {}).get("name"), "derived_priority": priority}))
    return {"derived_priority": priority}
