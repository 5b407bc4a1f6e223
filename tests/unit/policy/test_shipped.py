"""Given the shipped policies and JSON Schema, then they are valid, consistent and what editors will see."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from osprey_control.policy import (
    BuiltinRule,
    CustomRuleEntry,
    Metric,
    load_policy_files,
    load_policy_text,
    policy_json_schema,
)
from tests.conftest import REPO_ROOT
from tests.unit.policy.seeds import SEED_POLICY, SEED_WITH_CUSTOM

POLICY_DIR = REPO_ROOT / "policies"
EXAMPLE_DIR = POLICY_DIR / "examples"  # shipped, not deployed by default (placeholder ARNs)
SCHEMA_FILE = POLICY_DIR / "priority-derivation-policy.schema.json"
SHIPPED = sorted(POLICY_DIR.glob("*.yaml")) + sorted(EXAMPLE_DIR.glob("*.yaml"))


def test_shipped_policies_form_one_valid_set_without_warnings() -> None:
    result = load_policy_files([POLICY_DIR, EXAMPLE_DIR])
    assert result.errors == []
    assert result.warnings == []
    # Every shipped file contributes its policy, and the four the docs describe are among them.
    assert len(result.by_name()) >= len(SHIPPED)
    assert {"aging-policy", "inference-policy", "spot-aware-policy", "training-policy"} <= set(
        result.by_name()
    )


def test_training_policy_is_the_seed_with_a_deadband() -> None:
    # The shipped training policy is the DESIGN §3 seed plus deadband 3 (its comment says why: metric noise
    # churned priorities); everything else is the seed's.
    shipped = load_policy_files([POLICY_DIR / "training-policy.yaml"]).policies[0].policy
    seed = load_policy_text(SEED_POLICY, "seed").policies[0].policy
    assert shipped.spec.deadband == 3
    assert shipped.model_copy(update={"spec": shipped.spec.model_copy(update={"deadband": 0.0})}) == seed


def test_shipped_policies_cover_latency_spot_custom_and_aging() -> None:
    policies = load_policy_files([POLICY_DIR, EXAMPLE_DIR]).by_name()

    def metrics(name: str) -> set[Metric]:
        return {r.metric for r in policies[name].spec.derivation_rules if isinstance(r, BuiltinRule)}

    inference_rules = [
        r for r in policies["inference-policy"].spec.derivation_rules if isinstance(r, BuiltinRule)
    ]
    heaviest = max(inference_rules, key=lambda rule: rule.weight)
    assert heaviest.metric is Metric.NODE_INTERCONNECT_LATENCY
    assert Metric.SPOT_INTERRUPTION_RISK in metrics("spot-aware-policy")
    assert any(isinstance(r, CustomRuleEntry) for r in policies["spot-aware-policy"].spec.derivation_rules)
    assert Metric.QUEUE_WAIT in metrics("aging-policy")


def test_shipped_schema_file_is_current() -> None:
    # The file editors load must match what `osprey policy schema` prints; regenerate with
    # `osprey policy schema > policies/priority-derivation-policy.schema.json`.
    assert json.loads(SCHEMA_FILE.read_text()) == policy_json_schema()


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_policy_points_editors_at_the_schema_and_satisfies_it(path: Path) -> None:
    text = path.read_text()
    relative = "./" if path.parent == POLICY_DIR else "../"  # examples/ is one level down
    assert text.splitlines()[0] == f"# yaml-language-server: $schema={relative}{SCHEMA_FILE.name}"
    jsonschema.Draft202012Validator(policy_json_schema()).validate(yaml.safe_load(text))


def test_schema_rejects_what_the_model_rejects() -> None:
    validator = jsonschema.Draft202012Validator(policy_json_schema())
    good = yaml.safe_load(SEED_WITH_CUSTOM)
    assert list(validator.iter_errors(good)) == []
    bad = yaml.safe_load(SEED_POLICY)
    bad["spec"]["derivationRules"][0]["weight"] = 0
    bad["spec"]["derivationRules"][1]["colour"] = "red"
    bad["spec"]["derivationRules"].append({"metric": "gpu_utilization", "custom": {}})
    assert len(list(validator.iter_errors(bad))) >= 3


def test_schema_describes_fields_for_editors() -> None:
    rule = policy_json_schema()["$defs"]["BuiltinRule"]["properties"]
    assert rule["weight"]["description"] == "a finite number in (0, 1000]"
    assert rule["weight"]["exclusiveMinimum"] == 0
    assert rule["weight"]["maximum"] == 1000


def test_shipped_schema_offers_the_job_level_signals_and_an_integer_max_priority_change() -> None:
    # Given the schema file editors load
    schema = json.loads(SCHEMA_FILE.read_text())
    # Then the job-level signals of DESIGN §3 are metrics an editor completes
    metrics = schema["$defs"]["Metric"]["enum"]
    assert {"attained_service", "remaining_time", "requested_gpus"} <= set(metrics)
    assert metrics == [metric.value for metric in Metric]
    # And maxPriorityChange is an integer 1..100, so an editor flags 1.5 as the validator does
    limit = schema["$defs"]["PolicySpec"]["properties"]["maxPriorityChange"]
    assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == ("integer", 1, 100, 10)
    assert limit["description"] == "an integer 1..100"
    validator = jsonschema.Draft202012Validator(schema)
    document = yaml.safe_load(SEED_POLICY)
    document["spec"]["maxPriorityChange"] = 1.5
    assert [error.json_path for error in validator.iter_errors(document)] == ["$.spec.maxPriorityChange"]
