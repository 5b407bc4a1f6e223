"""The cycle state machine (Express, JSONPath): lease → [EKS discovery] → shard plan → metric collection →
Map over shards (derive) → apply → plan parallelism → finish, then optionally again after a wait for
sub-minute cycles.

Express, not Standard: a Standard workflow bills each state transition ($25 per million, about $25 a month
for a 60 s cycle at 64 nodes), an Express one bills its requests and duration (well under $1 a month for the
same cycle). What Express gives up does not apply here (docs/decisions.md, Express cycle): the cycle runs for
seconds, not the five-minute Express limit; it uses no ``.sync`` or task-token integration; at-least-once
execution is made safe by the lease and its fencing token. The shards run in an inline Map: its items are
shard numbers (bytes, not the 256 KiB input limit), an Express execution has no 25,000-event history limit,
and :data:`MAX_SHARD_CONCURRENCY` is under the inline Map's 40, so none of the reasons to use a Distributed Map
holds, and it would need a Standard parent.

Every Task retries Lambda's transient errors with backoff and catches everything else: a failed shard becomes
a report with ``failed: true`` (the other shards still apply), a failed EKS discovery or metric collection is
noted and the cycle goes on (each shard then reads its own metrics), and any other failure still runs
``Finish`` (metrics, lease release) before the execution fails.

Metrics are read once per cycle, by ``CollectMetrics``, for every shard: ``ceil(series / 500)`` GetMetricData
calls in all instead of that many per shard. Each shard's values are stored in the registry under the lease
token, where its derive finds them (docs/control-plane.md, Collection).

Payload: every state carries counts, shard numbers and bounded failure samples, never per-job records (a
state over 256 KiB fails with ``States.DataLimitExceeded``, which no Catch handles, so Finish would not run
and the lease would stay held). The jobs to apply are found by the apply step in the registry's
``apply-pending`` index; sizes per state are in docs/control-plane.md (Payload).

Fencing: AcquireLease's ``token`` and ``expiresAt`` (two numbers) go to collect, every derive shard, apply and
the plan step: their writes are conditional on the token, and each step's deadline ends at the lease's expiry at
the latest, so no backend write of this execution can still run when the next one takes the lease
(docs/control-plane.md, Fencing).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from osprey_infra.state_machines import invoke, state_machine

__all__ = ["CycleStateMachine"]

MAX_SHARD_CONCURRENCY = 16


class CycleStateMachine(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        lease: lambda_.IFunction,
        shards: lambda_.IFunction,
        collect: lambda_.IFunction,
        derive: lambda_.IFunction,
        apply: lambda_.IFunction,
        finish: lambda_.IFunction,
        plan_parallelism: lambda_.IFunction,
        eks_discovery: lambda_.IFunction | None,
        timeout: cdk.Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        failed = sfn.Pass(
            self,
            "MarkFailed",
            parameters={"outcome": "failed", "error.$": "$.error"},
            result_path="$.finish",
        )
        # "error" must be present for Finish's "error.$" path; CDK drops None values, so it is an empty object.
        succeeded = sfn.Pass(
            self, "MarkSucceeded", parameters={"outcome": "succeeded", "error": {}}, result_path="$.finish"
        )
        finish_task = invoke(
            self,
            "Finish",
            finish,
            payload=sfn.TaskInput.from_object(
                {
                    "owner.$": "$$.Execution.Name",
                    "startedAt.$": "$$.Execution.StartTime",
                    "outcome.$": "$.finish.outcome",
                    "error.$": "$.finish.error",
                    # The whole state, for FailedShards / FailedJobs: "$.shards" alone would be a runtime error
                    # on the paths that fail before the Map (a missing path is not null in JSONPath).
                    "cycle.$": "$",
                }
            ),
            result_path="$.finished",
        )
        failed.next(finish_task)
        succeeded.next(finish_task)
        finish_task.add_catch(
            sfn.Fail(self, "FinishFailed", error="Osprey.FinishFailed"), result_path="$.error"
        )

        def catch_to_failed(task: sfn.TaskStateBase) -> sfn.TaskStateBase:
            task.add_catch(failed, errors=["States.ALL"], result_path="$.error")
            return task

        acquire = invoke(
            self,
            "AcquireLease",
            lease,
            payload=sfn.TaskInput.from_object({"owner.$": "$$.Execution.Name"}),
            result_path="$.lease",
        )
        acquire.add_catch(
            sfn.Fail(self, "LeaseUnavailable", error="Osprey.LeaseUnavailable"), result_path="$.error"
        )
        plan = catch_to_failed(
            invoke(self, "PlanShards", shards, payload=sfn.TaskInput.from_object({}), result_path="$.plan")
        )
        apply_task = catch_to_failed(
            invoke(
                self,
                "ApplyPriorities",
                apply,
                payload=sfn.TaskInput.from_object(
                    {"shards.$": "$.shards", "token.$": "$.lease.token", "expiresAt.$": "$.lease.expiresAt"}
                ),
                result_path="$.apply",
            )
        )
        plan_task = invoke(
            self,
            "PlanParallelism",
            plan_parallelism,
            payload=sfn.TaskInput.from_object(
                {"token.$": "$.lease.token", "expiresAt.$": "$.lease.expiresAt"}
            ),
            result_path="$.planning",
        )
        # Re-planning is advisory: its failure is noted and the cycle (priorities already applied) succeeds.
        plan_task.add_catch(succeeded, errors=["States.ALL"], result_path="$.planningError")
        apply_task.next(plan_task)
        plan_task.next(succeeded)

        derive_map = self._shard_map(derive)
        derive_map.add_catch(failed, errors=["States.ALL"], result_path="$.error")
        derive_map.next(apply_task)
        collect_task = invoke(
            self,
            "CollectMetrics",
            collect,
            payload=sfn.TaskInput.from_object(
                {"shards.$": "$.plan.shards", "token.$": "$.lease.token", "expiresAt.$": "$.lease.expiresAt"}
            ),
            result_path="$.collect",
        )
        # Without a stored collection each shard reads its own metrics: more GetMetricData calls, same values.
        collect_task.add_catch(derive_map, errors=["States.ALL"], result_path="$.collectError")
        collect_task.next(derive_map)
        plan.next(collect_task)

        after_lease: sfn.IChainable = plan
        if eks_discovery is not None:
            discover = invoke(
                self,
                "DiscoverEksJobs",
                eks_discovery,
                payload=sfn.TaskInput.from_object({}),
                result_path="$.eks",
            )
            # A cluster that cannot be reached only delays its jobs' new registrations; the cycle goes on.
            discover.add_catch(plan, errors=["States.ALL"], result_path="$.eksError")
            discover.next(plan)
            after_lease = discover

        held = sfn.Succeed(
            self, "SkippedLeaseHeld", comment="Another cycle holds the lease; this one does nothing."
        )
        acquire.next(
            sfn.Choice(self, "LeaseAcquired")
            .when(sfn.Condition.boolean_equals("$.lease.acquired", True), after_lease)
            .otherwise(held)
        )

        done = sfn.Succeed(self, "CycleSucceeded")
        again = sfn.Pass(
            self,
            "NextCycle",
            parameters={
                "cycles.$": "States.MathAdd($.cycles, -1)",
                "intervalSeconds.$": "$.intervalSeconds",
            },
        )
        wait = sfn.Wait(self, "WaitForNextCycle", time=sfn.WaitTime.seconds_path("$.intervalSeconds"))
        wait.next(again)
        again.next(acquire)
        finish_task.next(
            sfn.Choice(self, "CycleOutcome")
            .when(
                sfn.Condition.string_equals("$.finish.outcome", "failed"),
                sfn.Fail(
                    self, "CycleFailed", error="Osprey.CycleFailed", cause="see the Finish state's input"
                ),
            )
            # Sub-minute cycles: the schedule starts one execution a minute with {"cycles": N, "intervalSeconds": S}.
            .when(
                sfn.Condition.and_(
                    sfn.Condition.is_present("$.cycles"), sfn.Condition.number_greater_than("$.cycles", 1)
                ),
                wait,
            )
            .otherwise(done)
        )

        invoked = [lease, shards, collect, derive, apply, finish, plan_parallelism]
        if eks_discovery is not None:
            invoked.append(eks_discovery)
        self.log_group, self.state_machine = state_machine(
            self,
            acquire,
            timeout=timeout,
            comment="Osprey priority cycle",
            invokes=invoked,
            kind=sfn.StateMachineType.EXPRESS,
        )

    def _shard_map(self, derive: lambda_.IFunction) -> sfn.Map:
        state_id = "DeriveShards"
        map_state = sfn.Map(
            self,
            state_id,
            items_path="$.plan.shards",
            # In the item selector "$" is the Map state's input, so each shard gets the lease's token.
            item_selector={
                "shard.$": "$$.Map.Item.Value",
                "token.$": "$.lease.token",
                "expiresAt.$": "$.lease.expiresAt",
            },
            max_concurrency=MAX_SHARD_CONCURRENCY,
            result_path="$.shards",
        )
        # An object payload: TaskInput.from_json_path_at("$") renders `"Parameters": "$"`, which ASL rejects.
        derive_shard = invoke(
            self,
            f"{state_id}Shard",
            derive,
            payload=sfn.TaskInput.from_object(
                {"shard.$": "$.shard", "token.$": "$.token", "expiresAt.$": "$.expiresAt"}
            ),
        )
        # One shard's failure is that shard's: report it and let the other shards' changes be applied. Only the
        # error's name: its Cause (up to 32 KiB, a stack trace) times every shard failing at once would pass the
        # payload limit; the cause stays in the execution history (TaskFailed) and the derive function's logs.
        derive_shard.add_catch(
            sfn.Pass(
                self,
                f"{state_id}ShardFailed",
                parameters={"shard.$": "$.shard", "failed": True, "error": {"Error.$": "$.error.Error"}},
            ),
            errors=["States.ALL"],
            result_path="$.error",
        )
        map_state.item_processor(derive_shard)
        return map_state
