"""Given hostile or odd input (found in review), when it is loaded, then it is refused with a located error
and never escapes as a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from osprey_control.policy import load_policy_files, load_policy_text
from tests.unit.policy.seeds import SEED_POLICY


def _errors(text: str | bytes) -> list[str]:
    result = load_policy_text(text, "p.yaml")
    assert result.policies == []
    return [str(error) for error in result.errors]


@pytest.mark.parametrize(
    "text",
    [
        SEED_POLICY.replace("name: training-policy", "name: p\x01"),
        "# a comment with a NUL \x00\n" + SEED_POLICY,
    ],
    ids=["control-character", "nul-in-comment"],
)
def test_control_characters_are_not_valid_yaml(text: str) -> None:
    [error] = _errors(text)
    assert "not valid YAML" in error


def test_integer_with_too_many_digits_is_out_of_range() -> None:
    [error] = _errors(SEED_POLICY.replace("weight: 0.6", "weight: " + "9" * 5000))
    assert error.startswith("p.yaml: (document): value out of range")


@pytest.mark.parametrize("literal", ["0x" + "f" * 4000, ":".join(["59"] * 3000)], ids=["hex", "sexagesimal"])
def test_huge_integer_literals_are_rejected_without_printing_them(literal: str) -> None:
    errors = _errors(SEED_POLICY.replace("weight: 0.6", f"weight: {literal}"))
    assert any(e.startswith("p.yaml: spec.derivationRules[0].weight: ") for e in errors), errors
    assert all(len(e) < 400 for e in errors)


def test_merge_keys_are_refused_as_such() -> None:
    text = SEED_POLICY.replace(
        "  namespace: training\n", "  namespace: training\n  labels:\n    <<: {a: b}\n"
    )
    [error] = _errors(text)
    assert "merge keys (<<) are not allowed" in error


def test_complex_key_location_is_given_once() -> None:
    [error] = _errors("? [a, b]\n: c\n")
    assert error == "p.yaml: line 1, column 3: mapping keys must be strings"


def test_range_whose_width_overflows_is_rejected() -> None:
    text = SEED_POLICY.replace(
        "    scaling: linear\n", "    scaling: linear\n    range: [-1.0e+308, 1.0e+308]\n"
    )
    errors = _errors(text)
    assert any("spec.derivationRules[0].range: " in e and "too wide" in e for e in errors), errors


def test_label_errors_say_what_is_allowed() -> None:
    text = SEED_POLICY.replace("  namespace: training\n", "  namespace: training\n  labels: {a: 1}\n")
    [error] = _errors(text)
    assert error.startswith("p.yaml: metadata.labels.a: ")
    assert "allowed: a mapping of string keys to string values" in error


def test_fifo_is_not_a_policy_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    result = load_policy_files([fifo])
    assert [e.message for e in result.errors] == ["not a regular file or directory"]


def test_unreadable_path_is_an_error_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    original = Path.is_dir

    def is_dir(self: Path) -> bool:
        if self == locked:
            raise PermissionError(13, "Permission denied")
        return original(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    result = load_policy_files([locked])
    assert [str(e) for e in result.errors] == [f"{locked}: (file): cannot read: Permission denied"]
