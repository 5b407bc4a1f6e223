"""``--since`` of ``osprey history`` and ``osprey policy replay``: durations and times, and a bad one is one line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from osprey.cli.errors import TargetError
from osprey.cli.history import parse_since
from osprey.cli.main import app

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", NOW - timedelta(seconds=90)),
        ("30m", NOW - timedelta(minutes=30)),
        ("24h", NOW - timedelta(hours=24)),
        ("7d", NOW - timedelta(days=7)),
        ("2026-12-04T10:00:00Z", datetime(2026, 12, 4, 10, tzinfo=UTC)),
        ("2026-12-04T10:00:00", datetime(2026, 12, 4, 10, tzinfo=UTC)),
    ],
)
def test_since_reads_durations_and_times(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


def test_a_bad_since_is_one_line_naming_the_option_exit_2() -> None:
    with pytest.raises(TargetError, match="--since"):
        parse_since("yesterday", NOW)
    for command in (["history", "any-job"], ["policy", "replay", "policies/training-policy.yaml"]):
        result = CliRunner().invoke(app, [*command, "--since", "yesterday"])
        assert result.exit_code == 2  # a malformed option value: a usage error (docs/cli.md, Exit codes)
        assert result.stderr.strip().splitlines() == [
            "error: --since: 'yesterday' is neither a duration (90s, 30m, 24h, 7d) nor a time (2026-12-04T10:00:00Z)"
        ]
