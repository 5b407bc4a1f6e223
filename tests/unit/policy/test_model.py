"""Given a policy document, when it is validated, then it is accepted with its defaults or rejected with
the field path and what is allowed."""

from __future__ import annotations

import pytest
import yaml

from osprey_control.policy import (
    Aggregation,
    BuiltinRule,
    CustomRuleEntry,
    GangFallback,
    Metric,
    Scaling,
    load_policy_text,
)
from tests.unit.policy.seeds import DESIGN_EXAMPLE, SEED_POLICY, SEED_WITH_CUSTOM


def _errors(text: str) -> list[str]:
    result = load_policy_text(text, "p.yaml")
    assert not result.policies, "expected the document to be rejected"
    return [str(error) for error in result.errors]


def _with(path: str, value: object, base: str = SEED_POLICY) -> str:
    """The seed with one field (dotted path, list indexes as ints) set to ``value``."""
    document = yaml.safe_load(base)
    target = document
    parts = [int(part) if part.isdigit() else part for part in path.split(".")]
    for part in parts[:-1]:
        target = target[part]
    target[parts[-1]] = value
    return yaml.safe_dump(document, sort_keys=False)


def _without(path: str) -> str:
    document = yaml.safe_load(SEED_POLICY)
    target = document
    parts = [int(part) if part.isdigit() else part for part in path.split(".")]
    for part in parts[:-1]:
        target = target[part]
    del target[parts[-1]]
    return yaml.safe_dump(document, sort_keys=False)


def test_seed_policy_validates_verbatim_with_documented_defaults() -> None:
    # Given the seed policy, when it is loaded
    result = load_policy_text(SEED_POLICY, "seed.yaml")
    # Then it is valid, and every field it leaves out has its DESIGN §3 default
    assert result.errors == []
    policy = result.policies[0].policy
    assert policy.name == "training-policy"
    assert policy.metadata.namespace == "training"
    assert policy.metadata.labels == {}
    spec = policy.spec
    assert (spec.max_priority_change, spec.initial_priority, spec.deadband) == (10, 50, 0)
    assert spec.derivation_interval_seconds == 60
    assert spec.co_scheduling.enabled is True
    assert spec.co_scheduling.gang_timeout_seconds == 120
    assert spec.co_scheduling.required_min_workers == 80
    assert spec.co_scheduling.fallback is GangFallback.SERIAL
    first = spec.derivation_rules[0]
    assert isinstance(first, BuiltinRule)
    assert (first.metric, first.scaling, first.weight) == (Metric.GPU_UTILIZATION, Scaling.LINEAR, 0.6)
    assert first.aggregation is Aggregation.MEAN
    assert first.range is None
    assert first.effective_range == (0.0, 100.0)
    assert spec.derivation_rules[2].effective_range == (0.0, 2000.0)  # type: ignore[union-attr]
    assert result.warnings == []


@pytest.mark.parametrize(
    "text", [SEED_WITH_CUSTOM, DESIGN_EXAMPLE], ids=["seed-with-custom", "design-example"]
)
def test_custom_rule_forms_validate_as_stages_with_default_timeout(text: str) -> None:
    result = load_policy_text(text, "seed.yaml")
    assert result.errors == []
    rule = result.policies[0].policy.spec.derivation_rules[3]
    assert isinstance(rule, CustomRuleEntry)
    assert rule.custom.weight is None  # no weight: an ordered stage
    assert rule.custom.timeout_ms == 1000
    assert rule.custom.fallback_priority == 50


def test_missing_optional_sections_take_defaults() -> None:
    text = _without("spec.coScheduling")
    text = yaml.safe_dump({**yaml.safe_load(text), "metadata": {"name": "p"}})
    policy = load_policy_text(text, "p.yaml").policies[0].policy
    assert policy.metadata.namespace == "default"
    assert policy.spec.co_scheduling.enabled is False
    assert policy.spec.co_scheduling.gang_timeout_seconds == 120
    assert policy.spec.co_scheduling.required_min_workers == 100


@pytest.mark.parametrize(
    ("text", "path", "fragment"),
    [
        # wrong types
        (_with("spec.derivationRules.0.weight", "0.6"), "spec.derivationRules[0].weight", "valid number"),
        (_with("spec.derivationRules.0.weight", True), "spec.derivationRules[0].weight", "valid number"),
        (_with("spec.initialPriority", 50.5), "spec.initialPriority", "an integer 0..100"),
        (_with("spec.coScheduling.enabled", "true"), "spec.coScheduling.enabled", "true or false"),
        (_with("metadata.labels", {"team": 7}), "metadata.labels.team", "string"),
        (_with("spec.derivationRules", "gpu"), "spec.derivationRules", "valid list"),
        # out-of-range weights and priorities
        (_with("spec.derivationRules.1.weight", 0), "spec.derivationRules[1].weight", "(0, 1000]"),
        (_with("spec.derivationRules.1.weight", -1), "spec.derivationRules[1].weight", "(0, 1000]"),
        (_with("spec.derivationRules.1.weight", 1000.5), "spec.derivationRules[1].weight", "(0, 1000]"),
        (_with("spec.derivationRules.1.weight", float("inf")), "spec.derivationRules[1].weight", "finite"),
        (_with("spec.derivationRules.0.maxPriority", 101), "spec.derivationRules[0].maxPriority", "[0, 100]"),
        (
            _with("spec.derivationRules.0.minPriority", -0.1),
            "spec.derivationRules[0].minPriority",
            "[0, 100]",
        ),
        (
            _with("spec.derivationRules.0.minPriority", float("nan")),
            "spec.derivationRules[0].minPriority",
            "finite",
        ),
        (_with("spec.maxPriorityChange", 0), "spec.maxPriorityChange", "an integer 1..100"),
        (_with("spec.maxPriorityChange", 101), "spec.maxPriorityChange", "an integer 1..100"),
        (_with("spec.deadband", 101), "spec.deadband", "0..100"),
        (_with("spec.derivationIntervalSeconds", 5), "spec.derivationIntervalSeconds", "10..86400"),
        (
            _with("spec.coScheduling.gangTimeoutSeconds", 0),
            "spec.coScheduling.gangTimeoutSeconds",
            "1..86400",
        ),
        (
            _with("spec.coScheduling.requiredMinWorkers", 101),
            "spec.coScheduling.requiredMinWorkers",
            "1..100",
        ),
        (_with("spec.coScheduling.fallback", "retry"), "spec.coScheduling.fallback", "serial, requeue, fail"),
        # minPriority > maxPriority
        (
            _with("spec.derivationRules.0.minPriority", 100.5),
            "spec.derivationRules[0].minPriority",
            "[0, 100]",
        ),
        (
            _with("spec.derivationRules.2.minPriority", 60),
            "spec.derivationRules[2].maxPriority",
            "must be >= minPriority",
        ),
        # ranges
        (_with("spec.derivationRules.0.range", [100, 0]), "spec.derivationRules[0].range", "lo < hi"),
        (
            _with("spec.derivationRules.0.range", [0]),
            "spec.derivationRules[0].range[1]",
            "two finite numbers",
        ),
        (_with("spec.derivationRules.0.range", [0, "x"]), "spec.derivationRules[0].range[1]", "valid number"),
        # unknown metric, scaling, aggregation
        (
            _with("spec.derivationRules.0.metric", "gpu_util"),
            "spec.derivationRules[0].metric",
            "did you mean",
        ),
        (
            _with("spec.derivationRules.0.scaling", "exp"),
            "spec.derivationRules[0].scaling",
            "linear, logarithmic",
        ),
        (
            _with("spec.derivationRules.0.aggregation", "p99"),
            "spec.derivationRules[0].aggregation",
            "mean, min, max",
        ),
        # identity
        (_with("apiVersion", "osprey.aws/v2"), "apiVersion", "osprey.aws/v1"),
        (_with("kind", "Policy"), "kind", "PriorityDerivationPolicy"),
        (_with("metadata.name", "Training_Policy"), "metadata.name", "DNS-1123"),
        (_with("metadata.name", "a" * 64), "metadata.name", "DNS-1123"),
        (_with("metadata.name", "-lead"), "metadata.name", "DNS-1123"),
        # missing fields
        (_without("spec.derivationRules.0.weight"), "spec.derivationRules[0].weight", "required"),
        (_without("spec.derivationRules.0.scaling"), "spec.derivationRules[0].scaling", "required"),
        (_without("metadata.name"), "metadata.name", "required"),
        (_without("spec"), "spec", "required"),
        (_without("apiVersion"), "apiVersion", "required"),
        # unknown fields
        (
            _with("spec.derivationRules.0.wieght", 1),
            "spec.derivationRules[0].wieght",
            "did you mean 'weight'",
        ),
        (_with("spec.maxPriorityChnage", 1), "spec.maxPriorityChnage", "did you mean 'maxPriorityChange'"),
        (_with("status", {}), "status", "unknown field"),
        (_with("spec.coScheduling.timeout", 3), "spec.coScheduling.timeout", "unknown field"),
        # rule lists
        (_with("spec.derivationRules", []), "spec.derivationRules", "at least 1"),
        (
            _with(
                "spec.derivationRules",
                [dict(yaml.safe_load(SEED_POLICY)["spec"]["derivationRules"][0]) for _ in range(33)],
            ),
            "spec.derivationRules",
            "at most 32",
        ),
        (
            _with("spec.derivationRules.0", {"weight": 1}),
            "spec.derivationRules[0]",
            "exactly one of 'metric'",
        ),
        (_with("spec.derivationRules.0", "gpu_utilization"), "spec.derivationRules[0]", "exactly one of"),
    ],
)
def test_malformed_policy_is_rejected_with_field_path_and_allowed_values(
    text: str, path: str, fragment: str
) -> None:
    errors = _errors(text)
    matching = [error for error in errors if error.startswith(f"p.yaml: {path}: ")]
    assert matching, f"no error at {path}: {errors}"
    assert any(fragment in error for error in matching), matching


def _custom(**fields: object) -> str:
    rule = {
        "custom": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:osprey-x", "fallbackPriority": 50}
    }
    rule["custom"].update(fields)
    return _with("spec.derivationRules.3", rule, base=SEED_WITH_CUSTOM)


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:lambda:us-east-1:123456789012:function:*",
        "arn:aws:lambda:us-east-1:123456789012:function:osprey-*",
        "arn:aws:lambda:us-east-1:12345678901:function:osprey-x",
        "arn:aws:lambda:us-east-1:123456789012:layer:osprey-x",
        "arn:aws:s3:::bucket",
        "osprey-x",
        "arn:aws:lambda:*:123456789012:function:osprey-x",
        "arn:aws:lambda:us-east-1:123456789012:function:osprey-x:*",
    ],
)
def test_bad_custom_rule_arn_is_rejected(arn: str) -> None:
    errors = _errors(_custom(arn=arn))
    assert any(
        e.startswith("p.yaml: spec.derivationRules[3].custom.arn: ") and "Lambda function ARN" in e
        for e in errors
    )


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:lambda:us-east-1:123456789012:function:osprey-x",
        "arn:aws:lambda:eu-central-1:123456789012:function:osprey-x:7",
        "arn:aws:lambda:us-west-2:123456789012:function:osprey-x:live",
        "arn:aws:lambda:us-west-2:123456789012:function:osprey-x:$LATEST",
        "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:osprey-x",
        "arn:aws-cn:lambda:cn-north-1:123456789012:function:osprey_x",
    ],
)
def test_valid_custom_rule_arns_are_accepted(arn: str) -> None:
    result = load_policy_text(_custom(arn=arn), "p.yaml")
    assert result.errors == []


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"timeoutMs": 5}, "custom.timeoutMs", "10..30000"),
        ({"timeoutMs": 30001}, "custom.timeoutMs", "10..30000"),
        ({"fallbackPriority": 100.1}, "custom.fallbackPriority", "[0, 100]"),
        ({"weight": 0}, "custom.weight", "(0, 1000]"),
        ({"fallback": 3}, "custom.fallback", "did you mean 'fallbackPriority'"),
    ],
)
def test_bad_custom_rule_fields_are_rejected(fields: dict[str, object], path: str, fragment: str) -> None:
    errors = _errors(_custom(**fields))
    assert any(e.startswith(f"p.yaml: spec.derivationRules[3].{path}: ") and fragment in e for e in errors), (
        errors
    )


def test_custom_rule_without_fallback_is_rejected() -> None:
    rule = {"custom": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:osprey-x"}}
    errors = _errors(_with("spec.derivationRules.3", rule, base=SEED_WITH_CUSTOM))
    assert any("spec.derivationRules[3].custom.fallbackPriority: required" in e for e in errors)


def test_rule_with_both_metric_and_custom_is_rejected() -> None:
    rule = {"metric": "gpu_utilization", "custom": {"arn": "x", "fallbackPriority": 1}}
    errors = _errors(_with("spec.derivationRules.0", rule))
    assert errors == [
        "p.yaml: spec.derivationRules[0]: a rule must have exactly one of 'metric' (built-in rule) or 'custom'; "
        "allowed: a list of 1 to 32 rules, each a built-in rule ({metric, weight, scaling, minPriority, "
        "maxPriority}) or a custom rule ({custom: {arn, fallbackPriority}})"
    ]


def test_every_error_is_reported_not_only_the_first() -> None:
    text = _with("spec.derivationRules.0.weight", -1)
    text = _with("spec.derivationRules.1.scaling", "cubic", base=text)
    errors = _errors(text)
    assert len(errors) == 2


@pytest.mark.parametrize("value", [1.5, 1.75, 10.0, "10", True])
def test_max_priority_change_must_be_an_integer(value: object) -> None:
    # Given a policy whose maxPriorityChange is fractional, a float spelling of an integer, a string or a bool
    # When it is validated
    errors = _errors(_with("spec.maxPriorityChange", value))
    # Then it is rejected at that field, saying an integer 1..100 is allowed (DESIGN §3: a fractional limit
    # made rounding overshoot it)
    assert errors == [
        f"p.yaml: spec.maxPriorityChange: Input should be a valid integer (got {value!r}); "
        "allowed: an integer 1..100"
    ]


@pytest.mark.parametrize("value", [1, 37, 100])
def test_integer_max_priority_change_is_accepted(value: int) -> None:
    policy = load_policy_text(_with("spec.maxPriorityChange", value), "p.yaml").policies[0].policy
    assert policy.spec.max_priority_change == value
    assert isinstance(policy.spec.max_priority_change, int)


@pytest.mark.parametrize(
    ("metric", "default_range"),
    [
        (Metric.ATTAINED_SERVICE, (0.0, 1000.0)),
        (Metric.REMAINING_TIME, (0.0, 259200.0)),
        (Metric.REQUESTED_GPUS, (1.0, 4096.0)),
    ],
)
def test_job_level_signals_are_built_in_metrics_with_their_default_ranges(
    metric: Metric, default_range: tuple[float, float]
) -> None:
    # Given a rule on one of the job-level signals of DESIGN §3, when it is validated
    rule = {"metric": metric.value, "weight": 1, "scaling": "inverse", "minPriority": 0, "maxPriority": 100}
    result = load_policy_text(_with("spec.derivationRules", [rule]), "p.yaml")
    # Then it is accepted, job level, with the documented default range
    assert result.errors == []
    parsed = result.policies[0].policy.spec.derivation_rules[0]
    assert isinstance(parsed, BuiltinRule)
    assert parsed.metric is metric
    assert metric.job_level
    assert parsed.effective_range == default_range


def test_exactly_the_job_signals_are_job_level() -> None:
    assert {metric.value for metric in Metric if metric.job_level} == {
        "queue_wait",
        "attained_service",
        "remaining_time",
        "requested_gpus",
        "reservation",
    }
