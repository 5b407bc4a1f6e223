"""Given the Osprey CDK app, when it is synthesized with the shipped or a user's configuration, then the
template holds what a deployment needs (properties, not counts), least privilege is expressed as IAM conditions,
and a bad configuration fails synth naming the field and its context key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from osprey_control.guard import Model
from osprey_control.metrics import pool_bound_ms
from osprey_infra.config import CONTEXT_KEYS, ConfigError, ControlPlaneConfig
from osprey_infra.stack import OspreyStack
from tests.conftest import REPO_ROOT


def _template(**config: Any) -> Template:
    stack = OspreyStack(
        cdk.App(),
        "Test",
        policy_paths=[REPO_ROOT / "policies"],
        config=ControlPlaneConfig.build(config),
    )
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def template() -> Template:
    return _template()


def _statements(template: Template, role_fragment: str) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy")
    return [
        statement
        for logical_id, policy in policies.items()
        if role_fragment in logical_id
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def test_registry_table_has_keys_active_index_ttl_and_protection(template: Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
            "GlobalSecondaryIndexes": [
                Match.object_like({"IndexName": "active-jobs"}),
                Match.object_like(
                    {"IndexName": "apply-pending", "Projection": {"ProjectionType": "KEYS_ONLY"}}
                ),
            ],
            "TimeToLiveSpecification": Match.object_like({"Enabled": True}),
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "DeletionProtectionEnabled": True,
        },
    )


def test_every_function_runs_python_3_12_or_newer_on_the_powertools_layer(template: Template) -> None:
    functions = template.find_resources("AWS::Lambda::Function")
    handlers = {f["Properties"]["Handler"] for f in functions.values()}
    assert {
        "osprey_handlers.ingest.handler",
        "osprey_handlers.derive.handler",
        "osprey_handlers.apply.handler",
        "osprey_handlers.lease.handler",
    } <= handlers
    for function in functions.values():
        runtime = function["Properties"]["Runtime"]
        assert runtime.startswith("python3.")
        assert int(runtime.split(".")[1]) >= 12
        layer = json.dumps(function["Properties"]["Layers"])
        assert ":017000801446:layer:AWSLambdaPowertoolsPythonV3-" in layer


def test_events_reach_the_ingest_queue_with_a_dead_letter_queue(template: Template) -> None:
    patterns = [
        rule["Properties"]["EventPattern"]["detail-type"]
        for rule in template.find_resources("AWS::Events::Rule").values()
    ]
    detail_types = {name for pattern in patterns for name in pattern}
    assert detail_types == {
        "SageMaker Training Job State Change",
        "Batch Job State Change",
        "Batch Service Job State Change",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
    }
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {"RedrivePolicy": Match.object_like({"maxReceiveCount": 5}), "SqsManagedSseEnabled": True},
    )
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"FunctionResponseTypes": ["ReportBatchItemFailures"]}
    )


def test_schedule_fires_every_minute_and_sub_minute_runs_an_inner_loop() -> None:
    # Given the default 60 s and a 20 s interval
    default = _template()
    fast = _template(cycle_interval_seconds=20)
    # Then the default starts one cycle a minute with no loop input
    default.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {"ScheduleExpression": "rate(1 minute)", "Target": Match.object_like({"Input": "{}"})},
    )
    # And 20 s still fires once a minute, asking the state machine for three cycles 20 s apart
    fast.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "Target": Match.object_like({"Input": json.dumps({"cycles": 3, "intervalSeconds": 20})}),
        },
    )
    assert _template(cycle_interval_seconds=300).find_resources(
        "AWS::Scheduler::Schedule",
        {"Properties": {"ScheduleExpression": "rate(5 minutes)"}},
    )


def _definitions(template: Template) -> dict[str, dict[str, Any]]:
    """Each state machine's definition by its comment, tokens replaced by a placeholder."""
    found = {}
    for machine in template.find_resources("AWS::StepFunctions::StateMachine").values():
        definition = json.loads(
            "".join(
                part if isinstance(part, str) else "ARN"
                for part in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
            )
        )
        found[definition["Comment"]] = definition
    return found


def test_every_task_of_every_state_machine_retries(template: Template) -> None:
    definitions = _definitions(template)
    assert set(definitions) == {
        "Osprey priority cycle",
        "Osprey gang watch: one execution per co-scheduled job",
    }
    for comment, definition in definitions.items():
        tasks = {n: s for n, s in _all_states(definition).items() if s["Type"] == "Task"}
        assert tasks, comment
        for name, state in tasks.items():
            assert state.get("Retry"), f"{comment}: {name} has no Retry"


def test_cycle_state_machine_takes_the_lease_maps_shards_and_plans_after_applying(template: Template) -> None:
    definition = _definitions(template)["Osprey priority cycle"]
    states = _all_states(definition)
    assert any(state["Type"] == "Map" for state in states.values())
    first = definition["States"][definition["StartAt"]]
    assert first["Type"] == "Task"
    assert "Lease" in definition["StartAt"]
    assert states["ApplyPriorities"]["Next"] == "PlanParallelism"
    # Re-planning is advisory: a failure still ends in the succeeded path (Finish releases the lease).
    assert states["PlanParallelism"]["Catch"][0]["Next"] == states["PlanParallelism"]["Next"]


def test_the_cycle_is_an_express_workflow_that_fits_its_five_minutes_and_the_gang_watch_stays_standard(
    template: Template,
) -> None:
    # Given the synthesized control plane
    machines = template.find_resources("AWS::StepFunctions::StateMachine").values()
    kinds = {
        ("cycle" if "Osprey priority cycle" in json.dumps(machine) else "gang"): machine["Properties"].get(
            "StateMachineType"
        )
        for machine in machines
    }
    # Then the per-minute cycle is Express (billed per request and duration, not per transition) and the
    # long-running gang watch is Standard
    assert kinds == {"cycle": "EXPRESS", "gang": "STANDARD"}
    cycle = _definitions(template)["Osprey priority cycle"]
    assert cycle["TimeoutSeconds"] <= 300
    states = _all_states(cycle)
    # An inline Map only (a Distributed Map needs a Standard parent), after one collection for every shard
    modes = {
        state.get("ItemProcessor", {}).get("ProcessorConfig", {}).get("Mode", "INLINE")
        for state in states.values()
    }
    assert modes == {"INLINE"}
    assert states["PlanShards"]["Next"] == "CollectMetrics"
    assert states["CollectMetrics"]["Next"] == "DeriveShards"
    # A failed collection only costs calls: the shards then read their own metrics
    assert states["CollectMetrics"]["Catch"][0]["Next"] == "DeriveShards"
    # And no step's Lambda can outlive the workflow: derive and apply stop on their own before 120 s
    timeouts = {
        function["Properties"]["Handler"].split(".")[1]: function["Properties"]["Timeout"]
        for function in template.find_resources("AWS::Lambda::Function").values()
        if function["Properties"].get("Handler", "").startswith("osprey_handlers.")
    }
    for step in ("lease", "shards", "collect", "derive", "apply", "plan", "finish"):
        assert timeouts[step] <= 120, (step, timeouts[step])


def test_the_collect_function_has_the_whole_vcpu_the_guards_lookahead_limits_were_measured_on(
    template: Template,
) -> None:
    # Given the function that runs the guard (Lambda gives one vCPU at 1,769 MB, a fraction below it)
    (collect,) = [
        function
        for function in template.find_resources("AWS::Lambda::Function").values()
        if function["Properties"].get("Handler") == "osprey_handlers.collect.handler"
    ]
    # Then it has that vCPU, and a 10,000-job Kueue pool fits its time (osprey_control.metrics.guard)
    assert collect["Properties"]["MemorySize"] >= 1769
    assert pool_bound_ms(Model.KUEUE, 10_000) < 1000 * collect["Properties"]["Timeout"]


def test_a_cycle_cut_short_by_its_timeout_holds_the_lease_no_longer_than_the_timeout(
    template: Template,
) -> None:
    # Given the cycle's timeout (after which Finish, which releases the lease, never runs)
    timeout = _definitions(template)["Osprey priority cycle"]["TimeoutSeconds"]
    # Then the lease the cycle takes expires by itself at that same moment, so the next cycles resume
    (lease,) = [
        function
        for function in template.find_resources("AWS::Lambda::Function").values()
        if function["Properties"].get("Handler") == "osprey_handlers.lease.handler"
    ]
    assert int(lease["Properties"]["Environment"]["Variables"]["OSPREY_LEASE_SECONDS"]) == timeout


def test_gang_watch_loops_on_the_step_and_waits_the_seconds_it_returns(template: Template) -> None:
    definition = _definitions(template)["Osprey gang watch: one execution per co-scheduled job"]
    states = definition["States"]
    assert definition["StartAt"] == "WatchStep"
    assert states["WatchStep"]["Next"] == "WatchDone"
    assert states["WaitForWorkers"]["SecondsPath"] == "$.step.waitSeconds"
    assert states["WaitForWorkers"]["Next"] == "WatchStep"
    assert states["WatchDone"]["Choices"][0]["Variable"] == "$.step.done"


def test_ingest_may_start_gang_watches_and_knows_where(template: Template) -> None:
    functions = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "osprey_handlers.ingest.handler"}}
    )
    ((_, ingest),) = functions.items()
    variables = ingest["Properties"]["Environment"]["Variables"]
    assert "OSPREY_GANG_STATE_MACHINE_ARN" in variables
    assert variables["OSPREY_POLICY_PREFIX"] == "/osprey/policies"
    policies = template.find_resources("AWS::IAM::Policy")
    actions = {
        action
        for policy in policies.values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert "states:StartExecution" in actions
    assert "sagemaker:StopTrainingJob" in actions


def _all_states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, state in definition.get("States", {}).items():
        found[name] = state
        for nested in ("Iterator", "ItemProcessor"):
            if nested in state:
                found.update(_all_states(state[nested]))
        for branch in state.get("Branches", []):
            found.update(_all_states(branch))
    return found


def test_mutations_are_conditioned_on_the_osprey_enabled_tag(template: Template) -> None:
    mutating = {"sagemaker:AddTags", "batch:UpdateServiceJob", "batch:UpdateSchedulingPolicy"}
    statements = [s for s in _statements(template, "Apply") if _actions(s) & mutating]
    assert {action for s in statements for action in _actions(s)} == mutating
    for statement in statements:
        assert statement["Condition"]["StringEquals"] == {"aws:ResourceTag/osprey:enabled": "true"}


def test_custom_rules_may_be_invoked_only_under_the_allowed_prefix_in_this_account() -> None:
    template = _template(allowed_rule_prefix="team-a-rule-")
    invokes = [s for s in _statements(template, "Derive") if "lambda:InvokeFunction" in _actions(s)]
    assert len(invokes) == 1
    resource = json.dumps(invokes[0]["Resource"])
    assert '":function:team-a-rule-*"' in resource
    assert '"Ref": "AWS::AccountId"' in resource


def test_config_parameter_tells_the_sdk_where_the_stack_is(template: Template) -> None:
    parameters = template.find_resources("AWS::SSM::Parameter")
    (config,) = [p for p in parameters.values() if p["Properties"]["Name"] == "/osprey/config"]
    value = json.dumps(config["Properties"]["Value"])
    for key in ("tableName", "cycleStateMachineArn", "ingestQueueUrl", "metricsNamespace", "policyPrefix"):
        assert key in value


@pytest.mark.parametrize(
    ("values", "field", "context_key"),
    [
        ({"cycle_interval_seconds": 45}, "cycle_interval_seconds", "osprey:cycleIntervalSeconds"),
        ({"cycle_interval_seconds": 90}, "cycle_interval_seconds", "osprey:cycleIntervalSeconds"),
        ({"backends": []}, "backends", "osprey:backends"),
        ({"backends": ["slurm"]}, "backends", "osprey:backends"),
        ({"allowed_rule_prefix": "rules/*"}, "allowed_rule_prefix", "osprey:allowedRulePrefix"),
        ({"alarm_email": "not-an-address"}, "alarm_email", "osprey:alarmEmail"),
        ({"registry_shards": 0}, "registry_shards", "osprey:registryShards"),
    ],
)
def test_bad_configuration_names_the_field_and_context_key(
    values: dict[str, Any], field: str, context_key: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        ControlPlaneConfig.build(values)
    message = str(raised.value)
    assert field in message
    assert context_key in message


def test_context_strings_are_parsed_like_cdk_dash_c_values() -> None:
    context = {
        "osprey:backends": "sagemaker,batch",
        "osprey:cycleIntervalSeconds": "30",
        "osprey:perJobMetrics": "true",
    }
    config = ControlPlaneConfig.from_context(context.get)
    assert config.backends == frozenset({"sagemaker", "batch"})
    assert config.cycle_interval_seconds == 30
    assert config.cycles_per_execution == 2
    assert config.per_job_metrics is True


def test_unknown_configuration_field_is_refused() -> None:
    with pytest.raises(ConfigError, match="cycle_seconds"):
        ControlPlaneConfig.build({"cycle_seconds": 60})


def test_every_task_payload_is_an_object_and_finish_always_gets_an_error_field(template: Template) -> None:
    # ASL (and moto) reject a Task whose Parameters is a string such as "$"; Finish reads "$.finish.error" on
    # every path, so the success path must set it (CDK drops None values from Pass parameters).
    for definition in _definitions(template).values():
        for name, state in _all_states(definition).items():
            if state["Type"] == "Task":
                assert isinstance(state.get("Parameters"), dict), name
    states = _all_states(_definitions(template)["Osprey priority cycle"])
    # The lease's fencing token and its expiry reach collect, every derive shard (through the Map's item
    # selector), apply and the plan step.
    lease = {"token.$": "$.lease.token", "expiresAt.$": "$.lease.expiresAt"}
    assert states["DeriveShardsShard"]["Parameters"] == {
        "shard.$": "$.shard",
        "token.$": "$.token",
        "expiresAt.$": "$.expiresAt",
    }
    assert states["DeriveShards"]["ItemSelector"] == {"shard.$": "$$.Map.Item.Value", **lease}
    assert states["ApplyPriorities"]["Parameters"] == {"shards.$": "$.shards", **lease}
    assert states["CollectMetrics"]["Parameters"] == {"shards.$": "$.plan.shards", **lease}
    assert states["PlanParallelism"]["Parameters"] == lease
    assert states["MarkSucceeded"]["Parameters"] == {"outcome": "succeeded", "error": {}}
    assert states["MarkFailed"]["Parameters"] == {"outcome": "failed", "error.$": "$.error"}


def _bad_policy_dir(tmp_path: Path) -> Path:
    from tests.unit.policy.seeds import SEED_POLICY  # noqa: PLC0415 - only these two tests need it

    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "bad.yaml").write_text(SEED_POLICY.replace("weight: 0.3", "weight: 0"))
    return directory


def test_the_app_entry_point_fails_synth_on_an_invalid_policy_with_its_field_path(tmp_path: Path) -> None:
    # What `cdk synth` runs (cdk.json "app"), with the context the CLI passes in CDK_CONTEXT_JSON.
    policies = _bad_policy_dir(tmp_path)
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"osprey:policyDir": str(policies)}),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
    }
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert f"{policies / 'bad.yaml'}: spec.derivationRules[1].weight: " in done.stderr


@pytest.mark.skipif(
    not (REPO_ROOT / "node_modules" / ".bin" / "cdk").exists(), reason="the CDK CLI is not installed (npm ci)"
)
def test_npx_cdk_synth_fails_on_an_invalid_policy_with_its_field_path(tmp_path: Path) -> None:
    policies = _bad_policy_dir(tmp_path)
    done = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "-q", "--no-notices", "-o", str(tmp_path / "cdk.out"),
         "-c", f"osprey:policyDir={policies}"],
        cwd=REPO_ROOT,
        env={**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"{policies / 'bad.yaml'}: spec.derivationRules[1].weight: " in done.stdout + done.stderr


def test_every_context_key_is_documented_in_the_deploy_guide() -> None:
    guide = (REPO_ROOT / "docs" / "deploy.md").read_text()
    missing = [key for key in ("osprey:policyDir", *CONTEXT_KEYS.values()) if f"`{key}`" not in guide]
    assert missing == []
