"""The shared parser (``osprey_control.contract``): every form reads back into the same model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from osprey_control.contract import (
    OspreyBlock,
    OspreyBlockError,
    batch_scheduling_priority,
    from_environment,
    from_kubernetes,
    from_tags,
    parse_block,
    recognise_job,
    tag_list,
    to_environment,
    to_kubernetes,
    to_tags,
)

policy_names = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
blocks = st.builds(
    OspreyBlock,
    priority_derivation_profile=policy_names,
    co_schedule=st.none() | st.booleans(),
    gang_timeout=st.none() | st.integers(1, 86400),
    required_min_workers=st.none() | st.integers(1, 100),
    initial_priority=st.none() | st.integers(0, 100),
    expected_runtime=st.none() | st.integers(1, 30 * 86400),
)


@given(blocks)
def test_given_any_valid_block_when_written_in_any_form_then_it_reads_back_equal(block: OspreyBlock) -> None:
    assert from_environment(to_environment(block)) == block
    assert from_tags(to_tags(block)) == block
    assert from_tags(tag_list(to_tags(block))) == block
    assert from_kubernetes(*to_kubernetes(block)) == block


@given(st.integers(0, 99))
def test_given_priorities_when_mapped_to_batch_then_the_mapping_is_linear_and_increasing(
    priority: int,
) -> None:
    assert batch_scheduling_priority(priority) < batch_scheduling_priority(priority + 1)
    assert abs(batch_scheduling_priority(priority) - priority * 99.99) <= 0.5


def test_given_the_range_ends_when_mapped_to_batch_then_they_are_0_and_9999() -> None:
    assert (batch_scheduling_priority(0), batch_scheduling_priority(100)) == (0, 9999)
    with pytest.raises(ValueError, match=r"0\.\.100"):
        batch_scheduling_priority(101)


def test_given_the_table_of_design_5_when_writing_then_the_keys_and_values_are_exact() -> None:
    block = parse_block(
        {
            "co_schedule": False,
            "gang_timeout": 60,
            "priority_derivation_profile": "p",
            "required_min_workers": 80,
            "initial_priority": 0,
            "expected_runtime": 7200,
        }
    )
    assert to_environment(block) == {
        "OSPREY_ENABLED": "1",
        "OSPREY_PRIORITY_POLICY": "p",
        "OSPREY_CO_SCHEDULE": "false",
        "OSPREY_GANG_TIMEOUT": "60",
        "OSPREY_MIN_WORKERS": "80",
        "OSPREY_INITIAL_PRIORITY": "0",
        "OSPREY_EXPECTED_RUNTIME": "7200",
    }
    assert to_tags(block) == {
        "osprey:enabled": "true",
        "osprey:policy": "p",
        "osprey:co-schedule": "false",
        "osprey:gang-timeout": "60",
        "osprey:min-workers": "80",
        "osprey:initial-priority": "0",
        "osprey:expected-runtime": "7200",
    }
    labels, annotations = to_kubernetes(block)
    assert labels == {"osprey.aws/enabled": "true", "osprey.aws/policy": "p"}
    assert set(annotations) == {
        "osprey.aws/co-schedule", "osprey.aws/gang-timeout", "osprey.aws/min-workers", "osprey.aws/initial-priority",
        "osprey.aws/expected-runtime",
    }  # fmt: skip
    assert annotations["osprey.aws/expected-runtime"] == "7200"


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_GANG_TIMEOUT": "2m"}, "OSPREY_GANG_TIMEOUT"),
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_CO_SCHEDULE": "yes"}, "true or false"),
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_MIN_WORKER": "5"}, "'OSPREY_MIN_WORKERS'"),
        ({"OSPREY_ENABLED": "1"}, "OSPREY_PRIORITY_POLICY: required key is missing"),
        ({"OSPREY_ENABLED": "yes"}, "OSPREY_ENABLED: invalid value 'yes'"),
        ({"OSPREY_PRIORITY_POLICY": "p"}, "set OSPREY_ENABLED=1"),
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_INITIAL_PRIORITY": "101"}, "0..100"),
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_EXPECTED_RUNTIME": "0"},
         "OSPREY_EXPECTED_RUNTIME: Input should be greater than or equal to 1 (got '0'); allowed: an integer number "
         "of seconds 1..2592000 (30 days)"),
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_EXPECTED_RUNTIME": "2h"},
         "OSPREY_EXPECTED_RUNTIME: invalid value '2h'; allowed: an integer number of seconds 1..2592000"),
        ({"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_EXPECTED_RUNTIM": "60"},
         "'OSPREY_EXPECTED_RUNTIME'"),
    ],
)  # fmt: skip
def test_given_a_bad_environment_when_read_then_the_error_names_the_variable(
    environment: dict[str, str], expected: str
) -> None:
    with pytest.raises(OspreyBlockError) as raised:
        from_environment(environment)
    assert expected in str(raised.value)


def test_given_runtime_and_control_plane_keys_when_read_then_they_are_not_unknown_keys() -> None:
    environment = {"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "p", "OSPREY_METRICS_NAMESPACE": "/x"}
    assert from_environment(environment) == parse_block({"priority_derivation_profile": "p"})
    tags = {"osprey:enabled": "true", "osprey:policy": "p", "osprey:derived-priority": "63"}
    assert from_tags(tags) == parse_block({"priority_derivation_profile": "p"})


def test_given_disabled_or_absent_opt_in_when_read_then_the_job_is_not_managed() -> None:
    assert from_environment({"OSPREY_ENABLED": "0", "OSPREY_PRIORITY_POLICY": "p"}) is None
    assert from_environment({"PATH": "/bin"}) is None
    assert from_tags([{"Key": "team", "Value": "x"}]) is None


def test_given_tags_and_environment_when_recognising_a_job_then_tags_win_and_environment_is_the_fallback() -> (
    None
):
    environment = {"OSPREY_ENABLED": "1", "OSPREY_PRIORITY_POLICY": "from-env", "OSPREY_FUTURE": "x"}
    tags = {"osprey:enabled": "true", "osprey:policy": "from-tags"}
    assert recognise_job(tags=tags, environment=environment) == parse_block(
        {"priority_derivation_profile": "from-tags"}
    )
    found = recognise_job(tags={"team": "x"}, environment=environment)
    assert found == parse_block({"priority_derivation_profile": "from-env"})
    assert recognise_job() is None


@pytest.mark.parametrize("value", [None, [], "text", 3])
def test_given_a_block_that_is_not_a_mapping_when_parsed_then_it_says_so(value: Any) -> None:
    with pytest.raises(OspreyBlockError, match="osprey: must be a mapping"):
        parse_block(value)


def test_given_labels_and_annotations_that_disagree_when_read_then_it_is_an_error() -> None:
    with pytest.raises(OspreyBlockError, match="disagree"):
        from_kubernetes({"osprey.aws/enabled": "true", "osprey.aws/policy": "a"}, {"osprey.aws/policy": "b"})


@pytest.mark.parametrize("value", [0, -5, 30 * 86400 + 1, 3600.0, "3600", True])
def test_given_a_bad_expected_runtime_when_parsed_then_the_error_names_the_key_and_the_range(
    value: Any,
) -> None:
    # Given: a block whose expected_runtime is out of range or of the wrong type
    block = {"priority_derivation_profile": "p", "expected_runtime": value}

    # When / Then
    with pytest.raises(OspreyBlockError) as raised:
        parse_block(block, path="distribution.torch_distributed.osprey")
    assert "distribution.torch_distributed.osprey.expected_runtime:" in str(raised.value)
    assert "1..2592000" in str(raised.value)


def test_given_an_expected_runtime_tag_when_recognising_a_job_then_the_block_carries_it() -> None:
    block = recognise_job(
        tags={"osprey:enabled": "true", "osprey:policy": "p", "osprey:expected-runtime": "5400"}
    )
    assert block is not None
    assert block.expected_runtime == 5400
