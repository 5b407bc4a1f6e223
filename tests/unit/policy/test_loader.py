"""Given policy files, when they are loaded as a set, then hostile or malformed YAML is refused safely and
every problem names its file and location."""

from __future__ import annotations

from pathlib import Path

import pytest

from osprey_control.policy import (
    MAX_FILE_BYTES,
    PolicyValidationError,
    load_policies,
    load_policy_files,
    load_policy_text,
)
from tests.unit.policy.seeds import SEED_POLICY


def _only_error(text: str | bytes) -> str:
    result = load_policy_text(text, "p.yaml")
    assert result.policies == []
    assert len(result.errors) == 1, result.errors
    return str(result.errors[0])


def test_non_yaml_is_rejected_with_its_position() -> None:
    error = _only_error("apiVersion: [osprey\nkind: x\n")
    assert error.startswith("p.yaml: line ")
    assert "not valid YAML" in error


def test_duplicate_keys_are_rejected_with_the_field_path() -> None:
    text = SEED_POLICY.replace("    weight: 0.6\n", "    weight: 0.6\n    weight: 0.7\n")
    assert _only_error(text).startswith("p.yaml: spec.derivationRules[0].weight: duplicate key 'weight'")


def test_duplicate_top_level_key_is_rejected() -> None:
    assert "duplicate key 'kind'" in _only_error(SEED_POLICY + "kind: PriorityDerivationPolicy\n")


def test_anchors_and_aliases_are_rejected() -> None:
    text = SEED_POLICY.replace("  namespace: training\n", "  namespace: &ns training\n  labels: {a: *ns}\n")
    assert "anchors (&ns) are not allowed" in _only_error(text)


def test_billion_laughs_is_refused_without_expanding() -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    error = _only_error("\n".join(lines))
    assert "are not allowed" in error


@pytest.mark.parametrize(
    "value",
    [
        "!!python/object/apply:os.system [echo pwned]",
        "!!python/name:os.system",
        "!Ref Something",
        "!!binary aGk=",
    ],
)
def test_language_and_custom_tags_are_rejected(value: str) -> None:
    text = SEED_POLICY.replace("  namespace: training\n", f"  namespace: {value}\n")
    assert "explicit YAML tags" in _only_error(text)


def test_oversized_file_is_rejected_before_parsing() -> None:
    error = _only_error(SEED_POLICY + "#" * MAX_FILE_BYTES)
    assert f"at most {MAX_FILE_BYTES} are allowed" in error


def test_deep_nesting_is_rejected() -> None:
    assert "nesting deeper than" in _only_error("a: " + "[" * 5000 + "]" * 5000)


def test_non_utf8_is_rejected() -> None:
    assert "not UTF-8" in _only_error(b"apiVersion: \xff\xfe\n")


def test_keys_must_be_strings() -> None:
    text = SEED_POLICY.replace("  namespace: training\n", "  namespace: training\n  labels: {1: x}\n")
    assert "mapping keys must be strings" in _only_error(text)


def test_dates_stay_strings_so_errors_are_about_the_value() -> None:
    text = SEED_POLICY.replace(
        "  namespace: training\n", "  namespace: training\n  labels: {since: 2026-01-01}\n"
    )
    assert load_policy_text(text, "p.yaml").policies[0].policy.metadata.labels == {"since": "2026-01-01"}


@pytest.mark.parametrize(("text", "found"), [("- a\n- b\n", "a list"), ("just a string\n", "a string")])
def test_non_mapping_document_is_rejected(text: str, found: str) -> None:
    assert _only_error(text) == (
        f"p.yaml: (document): a policy document must be a mapping (apiVersion, kind, metadata, spec), found {found}"
    )


def test_empty_file_is_rejected() -> None:
    assert _only_error("# nothing here\n") == "p.yaml: (file): no policy document found in the file"


def test_several_documents_per_file_are_loaded_and_numbered_in_errors() -> None:
    second = SEED_POLICY.replace("name: training-policy", "name: other").replace("weight: 0.6", "weight: -1")
    third = SEED_POLICY.replace("name: training-policy", "name: third")
    result = load_policy_text(SEED_POLICY + "---\n" + second + "---\n" + third + "---\n", "multi.yaml")
    assert [p.policy.name for p in result.policies] == ["training-policy", "third"]
    assert [str(e).split(": ")[0:2] for e in result.errors] == [
        ["multi.yaml#2", "spec.derivationRules[0].weight"]
    ]


def test_two_policies_with_one_name_in_a_set_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SEED_POLICY)
    (tmp_path / "b.yml").write_text(SEED_POLICY)
    result = load_policy_files([tmp_path])
    assert [p.source for p in result.policies] == [str(tmp_path / "a.yaml")]
    assert [str(e) for e in result.errors] == [
        f"{tmp_path / 'b.yml'}: metadata.name: policy name 'training-policy' is already defined in "
        f"{tmp_path / 'a.yaml'}; names must be unique"
    ]


def test_directories_contribute_only_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SEED_POLICY)
    (tmp_path / "notes.txt").write_text("not a policy")
    (tmp_path / "schema.json").write_text("{}")
    assert [p.name for p in load_policies([tmp_path])] == ["training-policy"]


def test_missing_path_and_empty_directory_are_errors(tmp_path: Path) -> None:
    result = load_policy_files([tmp_path / "missing.yaml", tmp_path])
    assert [e.message for e in result.errors] == [
        "no such file or directory",
        "no *.yaml or *.yml files found",
    ]


def test_weights_not_summing_to_one_warn_but_validate() -> None:
    result = load_policy_text(SEED_POLICY.replace("weight: 0.6", "weight: 6"), "p.yaml")
    assert result.errors == []
    assert [str(w) for w in result.warnings] == [
        "p.yaml: spec.derivationRules: warning: weights sum to 6.4, not 1; they are normalised, "
        "so each rule counts weight/6.4"
    ]


def test_load_policies_raises_with_every_issue(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(SEED_POLICY.replace("weight: 0.6", "weight: 0"))
    with pytest.raises(PolicyValidationError) as raised:
        load_policies([tmp_path / "bad.yaml"])
    assert len(raised.value.issues) == 1
    assert "spec.derivationRules[0].weight" in str(raised.value)
