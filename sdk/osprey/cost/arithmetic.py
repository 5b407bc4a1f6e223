"""Numbers that carry their own arithmetic: ``q(320, "series") * q(43_200, "cycles")`` is 13,824,000 and reads
``320 series x 43,200 cycles`` (with the multiplication sign). A cost line's figure and its arithmetic string come from one expression, so they
cannot disagree. Labels hold no digits and no operator (multiplication sign, ``/ + ( )``), so stripping them leaves an evaluable formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

__all__: list[str] = []

TIMES = "\u00d7"  # the multiplication sign


def format_number(value: float | int | Decimal) -> str:
    """``1,234,567`` for whole numbers, else up to ten decimals without trailing zeros (never exponents)."""
    if isinstance(value, Decimal):
        value = float(value) if value != value.to_integral_value() else int(value)
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.10f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class Amount:
    value: float
    text: str
    precedence: int = 0  # 0 an atom, 1 a product or quotient, 2 a sum

    def _wrap(self, above: int) -> str:
        return f"({self.text})" if self.precedence >= above else self.text

    def __mul__(self, other: Amount) -> Amount:
        return Amount(self.value * other.value, f"{self._wrap(2)} {TIMES} {other._wrap(2)}", 1)

    def __truediv__(self, other: Amount) -> Amount:
        return Amount(self.value / other.value, f"{self._wrap(2)} / {other._wrap(1)}", 1)

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.value + other.value, f"{self.text} + {other.text}", 2)


def q(value: float | int | Decimal, label: str = "") -> Amount:
    """A quantity with a unit label (no digits in it)."""
    if any(character.isdigit() or character in TIMES + "/+()" for character in label):
        raise ValueError(f"a label may hold no digits or operators: {label!r}")
    text = format_number(value)
    return Amount(float(value), f"{text} {label}" if label else text)


def money(usd: Decimal) -> Amount:
    return Amount(float(usd), f"${usd}")  # as the price table writes it: $0.30, $0.025
