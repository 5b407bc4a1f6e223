"""Given a policy's ``spec.guard``, when it is validated and compiled, then its defaults are the documented ones,
its bounds and unknown fields are errors naming the field path, and the compiled policy carries what the
collect step's guard reads; several policies in one pool merge towards standing down more readily."""

from __future__ import annotations

import pytest
import yaml

from osprey_control.derivation import compile_policy
from osprey_control.guard import GuardSettings
from osprey_control.metrics import guard_settings
from osprey_control.policy import load_policy_text
from tests.unit.policy.seeds import SEED_POLICY


def _with_guard(guard: object, name: str = "training-policy") -> str:
    document = yaml.safe_load(SEED_POLICY)
    document["metadata"]["name"] = name
    document["spec"]["guard"] = guard
    return yaml.safe_dump(document, sort_keys=False)


def _errors(text: str) -> list[str]:
    result = load_policy_text(text, "p.yaml")
    assert not result.policies, "expected the document to be rejected"
    return [str(error) for error in result.errors]


def test_a_policy_without_guard_gets_the_documented_defaults() -> None:
    # Given the seed policy, which says nothing about the guard
    policy = load_policy_text(SEED_POLICY, "p.yaml").policies[0].policy
    # Then the guard is on, looks 6 hours ahead over 3 draws and tolerates 0.2 % less goodput
    guard = policy.spec.guard
    assert (guard.enabled, guard.horizon_seconds, guard.samples, guard.goodput_tolerance) == (
        True,
        21600,
        3,
        0.002,
    )
    # And the compiled policy converts to exactly the guard's own defaults (what the simulator runs)
    compiled = compile_policy(policy)
    assert guard_settings([compiled]) == GuardSettings()


def test_the_guards_fields_reach_the_compiled_policy() -> None:
    text = _with_guard({"enabled": True, "horizonSeconds": 3600, "samples": 5, "goodputTolerance": 0.01})
    compiled = compile_policy(load_policy_text(text, "p.yaml").policies[0].policy)
    settings = guard_settings([compiled])
    assert settings is not None
    assert (settings.horizon_s, settings.samples, settings.goodput_tolerance) == (3600.0, 5, 0.01)


@pytest.mark.parametrize(
    ("guard", "path", "fragment"),
    [
        ({"horizonSeconds": 599}, "spec.guard.horizonSeconds", "600..86400"),
        ({"horizonSeconds": 86401}, "spec.guard.horizonSeconds", "600..86400"),
        ({"horizonSeconds": 3600.0}, "spec.guard.horizonSeconds", "integer"),
        ({"samples": 0}, "spec.guard.samples", "1..10"),
        ({"samples": 11}, "spec.guard.samples", "1..10"),
        ({"goodputTolerance": 0.06}, "spec.guard.goodputTolerance", "0..0.05"),
        ({"goodputTolerance": -0.001}, "spec.guard.goodputTolerance", "0..0.05"),
        ({"goodputTolerance": "0.01"}, "spec.guard.goodputTolerance", "valid number"),
        ({"enabled": "yes"}, "spec.guard.enabled", "true or false"),
        ({"horizon": 3600}, "spec.guard.horizon", "did you mean 'horizonSeconds'"),
        ({"sample": 3}, "spec.guard.sample", "did you mean 'samples'"),
        ("on", "spec.guard", "a mapping with optional enabled, horizonSeconds"),
    ],
)
def test_a_bad_guard_setting_is_rejected_with_its_field_path(guard: object, path: str, fragment: str) -> None:
    errors = _errors(_with_guard(guard))
    matching = [error for error in errors if error.startswith(f"p.yaml: {path}: ")]
    assert matching, f"no error at {path}: {errors}"
    assert any(fragment in error for error in matching), matching


def test_a_misspelt_reservation_field_is_rejected_with_a_suggestion() -> None:
    document = yaml.safe_load(SEED_POLICY)
    document["spec"]["reservation"] = {"capacityGPUs": 64}
    errors = _errors(yaml.safe_dump(document))
    assert any("spec.reservation.capacityGPUs" in e and "did you mean 'capacityGpus'" in e for e in errors)


def test_policies_sharing_a_pool_merge_towards_standing_down() -> None:
    # Given two policies in one pool with different guard settings
    first = _with_guard({"horizonSeconds": 3600, "samples": 2, "goodputTolerance": 0.01}, name="first")
    second = _with_guard({"horizonSeconds": 7200, "samples": 4, "goodputTolerance": 0.001}, name="second")
    compiled = [
        compile_policy(load_policy_text(text, "p.yaml").policies[0].policy) for text in (first, second)
    ]
    # When their settings are merged
    merged = guard_settings(compiled)
    # Then the pool gets the longest horizon, the most samples and the smallest tolerance
    assert merged == GuardSettings(horizon_s=7200.0, samples=4, goodput_tolerance=0.001)


def test_one_policy_disabling_the_guard_disables_it_for_the_pool() -> None:
    on = compile_policy(load_policy_text(_with_guard({}, name="on"), "p.yaml").policies[0].policy)
    off = compile_policy(
        load_policy_text(_with_guard({"enabled": False}, name="off"), "p.yaml").policies[0].policy
    )
    assert guard_settings([on]) is not None
    assert guard_settings([on, off]) is None
    assert guard_settings([]) is None
