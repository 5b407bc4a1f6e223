"""Given docs/planner.md, when its generated tables are recomputed from the planner and the published data,
then they are exactly what the page shows (so the predicted-vs-published table can never drift)."""

from __future__ import annotations

from tests.planner.doc_tables import DOC, TABLES, render


def test_every_table_is_in_the_doc() -> None:
    text = DOC.read_text()
    for name in TABLES:
        assert f"<!-- generated: {name} -->" in text, name


def test_doc_tables_match_the_code() -> None:
    text = DOC.read_text()
    assert render(text) == text, (
        "docs/planner.md is out of date: run python -m tests.planner.doc_tables --write"
    )
