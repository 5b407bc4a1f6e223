"""The price table ``osprey cost`` multiplies by: us-east-1 on-demand list prices, as data in one place.

Each :class:`Price` names its page. The figures were written down from those pages (not fetched by a script)
on :data:`PRICES_DATE`; re-check them, or use the AWS Pricing Calculator, before relying on a total. Free tiers
are ignored everywhere (they are per account, shared with whatever else runs there).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

__all__ = ["PRICES", "PRICES_DATE", "SOURCES"]

PRICES_DATE = "2026-12-03"
PRICES_REGION = "us-east-1"

SOURCES: dict[str, str] = {
    "stepfunctions": "https://aws.amazon.com/step-functions/pricing/",
    "lambda": "https://aws.amazon.com/lambda/pricing/",
    "cloudwatch": "https://aws.amazon.com/cloudwatch/pricing/",
    "dynamodb": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "sqs": "https://aws.amazon.com/sqs/pricing/",
    "scheduler": "https://aws.amazon.com/eventbridge/pricing/",
}


@dataclass(frozen=True, slots=True)
class Price:
    """``usd`` per ``per`` units of ``unit``: e.g. $0.025 per 1,000 state transitions."""

    usd: Decimal
    per: int
    unit: str
    source: str

    @property
    def unit_price(self) -> float:
        return float(self.usd) / self.per


def _price(usd: str, per: int, unit: str, source: str) -> Price:
    return Price(Decimal(usd), per, unit, SOURCES[source])


PRICES: dict[str, Price] = {
    "sfn_standard_transition": _price("0.025", 1_000, "state transitions", "stepfunctions"),
    "sfn_express_request": _price("1.00", 1_000_000, "requests", "stepfunctions"),
    "sfn_express_gb_second": _price("0.00001667", 1, "GB-seconds", "stepfunctions"),
    "lambda_request": _price("0.20", 1_000_000, "requests", "lambda"),
    "lambda_gb_second_x86_64": _price("0.0000166667", 1, "GB-seconds", "lambda"),
    "lambda_gb_second_arm64": _price("0.0000133334", 1, "GB-seconds", "lambda"),
    "cw_get_metric_data": _price("0.01", 1_000, "metrics requested", "cloudwatch"),
    "cw_put_metric_data": _price("0.01", 1_000, "requests", "cloudwatch"),
    "cw_logs_ingestion": _price("0.50", 1, "GB ingested", "cloudwatch"),
    "cw_dashboard": _price("3.00", 1, "dashboard-months", "cloudwatch"),
    "cw_alarm_metric": _price("0.10", 1, "alarm metric-months", "cloudwatch"),
    "dynamodb_write": _price("0.625", 1_000_000, "write request units", "dynamodb"),
    "dynamodb_read": _price("0.125", 1_000_000, "read request units", "dynamodb"),
    "sqs_request": _price("0.40", 1_000_000, "requests", "sqs"),
    "scheduler_invocation": _price("1.00", 1_000_000, "invocations", "scheduler"),
}

# Custom metrics (EMF and PutMetricData alike), per metric-month, by tier: (metrics in the tier or None for
# the rest, $ each). The tiers count every custom metric of the account together.
CUSTOM_METRIC_TIERS: tuple[tuple[int | None, Decimal], ...] = (
    (10_000, Decimal("0.30")),
    (240_000, Decimal("0.10")),
    (750_000, Decimal("0.05")),
    (None, Decimal("0.02")),
)


def custom_metric_tiers(metrics: int) -> list[tuple[int, Decimal]]:
    """How ``metrics`` metric-months split over :data:`CUSTOM_METRIC_TIERS`: (count, $ each) per tier used."""
    parts: list[tuple[int, Decimal]] = []
    left = metrics
    for size, usd in CUSTOM_METRIC_TIERS:
        if left <= 0:
            break
        take = left if size is None else min(left, size)
        parts.append((take, usd))
        left -= take
    return parts
