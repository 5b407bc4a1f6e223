"""Given the synthesized cycle state machine run in moto with the real handlers, when one cycle runs over N and
then 3N jobs (every job changing priority and applied, the case where per-job records used to travel), then no
state's input or output is any larger: the states carry counts, shard numbers and bounded samples, and the
jobs to apply are read from the registry (issue 14, payload safety). One registry shard, so that the number of
shards, which the payload does depend on, is the same in both runs."""

from __future__ import annotations

from typing import Any

import pytest

from osprey_control.registry.dynamodb import JobRegistry
from tests.infra.e2e.fleet import Fleet
from tests.infra.e2e.harness import deployed, synthesized_template

JOBS = 3
# Counts gain a digit (9 -> 27 jobs); a per-job record would add well over 100 bytes per job.
DIGITS_SLACK = 16


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return synthesized_template({"osprey:registryShards": "1"})


def _cycle_over(template: dict[str, Any], jobs: int) -> dict[str, int]:
    with deployed(template) as cycle:
        variables = cycle.client("lambda").get_function_configuration(FunctionName=cycle.function("derive"))
        registry = JobRegistry(
            variables["Environment"]["Variables"]["OSPREY_TABLE_NAME"],
            client=cycle.client("dynamodb"),
            shards=1,
        )
        fleet = Fleet(registry, cycle.client("batch"), cycle.client("cloudwatch"), cycle.service_jobs)
        fleet.create_queues(cycle.client("iam"))
        for index in range(jobs):
            fleet.batch_job(f"job{index}", gpu=90, memory_bandwidth=60)
        execution = cycle.run("cycle-1")
        assert execution.status == "SUCCEEDED", execution
        assert execution.output["apply"]["applied"] == jobs  # every job derived, pending and applied
        return execution.state_bytes


def test_no_state_grows_with_the_number_of_jobs(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # Given the same deployment over N jobs and over 3N jobs, when one cycle runs over each
    small = _cycle_over(template, JOBS)
    large = _cycle_over(template, 3 * JOBS)

    # Then the same states ran, and none carried more than a few digits more
    assert set(small) == set(large)
    grown = {
        state: (small[state], large[state]) for state in small if large[state] > small[state] + DIGITS_SLACK
    }
    assert grown == {}, f"state bytes grew with the number of jobs: {grown}"
