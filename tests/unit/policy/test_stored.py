"""Given a value read from a policy's SSM parameter, when it is parsed, then a valid policy comes back and
anything else (too large, too deep, not JSON, against the schema, misnamed) is one StoredPolicyError naming the
parameter and the field, raised before the JSON decoder can recurse or allocate without bound."""

from __future__ import annotations

import json
import time

import pytest

from osprey_control.policy import (
    StoredPolicyError,
    load_policies,
    parse_stored_policy,
    policy_parameter_value,
)
from osprey_control.policy.stored import MAX_JSON_NESTING, json_nesting_error
from tests.conftest import REPO_ROOT

SOURCE = "ssm:/osprey/policies/training-policy"


def _stored() -> str:
    return policy_parameter_value(load_policies([REPO_ROOT / "policies/training-policy.yaml"])[0])


def test_a_stored_policy_round_trips() -> None:
    assert parse_stored_policy(_stored(), "training-policy", SOURCE).name == "training-policy"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[" * 4096, "(document): nesting deeper than 32 levels (character 33)"),
        ("{" * 33, "(document): nesting deeper than 32 levels"),
        ('{"a":' * 1000, "(document): nesting deeper than 32 levels"),
        ("[" * 9000, "(document): 9000 bytes; a stored policy is at most 8192"),
        ("é" * 4097, "(document): 8194 bytes"),  # the limit is SSM's, in bytes, not characters
        ('{"a": ' + "9" * 5000 + "}", "(document): not JSON: Exceeds the limit"),
        ("", "(document): not JSON"),
        ("null", "(document): a policy document must be a mapping"),
    ],
    ids=["brackets", "braces", "objects", "oversize", "multibyte", "long-integer", "empty", "null"],
)
def test_malformed_values_are_refused_with_the_parameter_named(value: str, message: str) -> None:
    with pytest.raises(StoredPolicyError) as refused:
        parse_stored_policy(value, "training-policy", SOURCE)
    assert str(refused.value).startswith(f"{SOURCE}: {message}")


def test_schema_errors_name_each_field_after_the_parameter_and_are_capped() -> None:
    document = json.loads(_stored())
    document["spec"]["derivationRules"] = [{"metric": "nope", "weight": -1, "colour": "red"}] * 8
    with pytest.raises(StoredPolicyError) as refused:
        parse_stored_policy(json.dumps(document), "training-policy", SOURCE)
    text = str(refused.value)
    assert text.startswith(f"{SOURCE}: spec.derivationRules[0].metric: invalid value (got 'nope')")
    assert text.count(SOURCE) == 1
    assert text.count("; spec.derivationRules[") == 4  # five shown
    assert text.endswith("more")


def test_a_policy_stored_under_another_name_is_refused() -> None:
    with pytest.raises(StoredPolicyError, match=r"metadata.name: 'training-policy' does not match"):
        parse_stored_policy(_stored(), "other", "ssm:/osprey/policies/other")


def test_nesting_counts_brackets_outside_strings_only() -> None:
    inside = json.dumps({"note": "[" * 100 + '\\"{' * 50})
    assert json_nesting_error(inside) is None
    assert json_nesting_error("[" * MAX_JSON_NESTING + "]" * MAX_JSON_NESTING) is None
    assert json_nesting_error("[" * (MAX_JSON_NESTING + 1)) is not None


def test_the_worst_value_ssm_can_hold_is_refused_quickly() -> None:
    started = time.perf_counter()
    for value in ("[" * 8192, '"' + "\\" * 8190 + '"', "[" * 32 + "1," * 4000):
        with pytest.raises(StoredPolicyError):
            parse_stored_policy(value, "training-policy", SOURCE)
    assert time.perf_counter() - started < 0.5
