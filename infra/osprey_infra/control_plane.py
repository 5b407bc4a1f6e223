"""``OspreyControlPlane``: the whole control plane as one reusable construct (embed it in your own app).

It composes, and only composes: the registry, the policies, one function per step (each with its own role),
the cycle state machine, the gang watch, event ingestion, the schedule, the dashboard and alarms, one construct
per backend (:mod:`osprey_infra.backends`), and ``/osprey/config`` (where the SDK and CLI find the deployment).
Who may do what is granted where it is needed: the steps' shared grants in :mod:`osprey_infra.permissions`
(each function the DynamoDB calls its code makes, metrics, policies, custom rules), each backend's in its
construct (its API calls; writes only to resources tagged ``osprey:enabled=true``). Every construct is a
module below this one; none imports it.

The policies are checked at synth, custom rule ARNs included: a rule the deployment could not invoke (name
outside ``allowed_rule_prefix``, another account or region) fails the synth naming its file and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from osprey_control.metrics import DEFAULT_EVERY_N_CYCLES
from osprey_control.wiring import (
    ALLOWED_RULE_PREFIX_VARIABLE,
    CONFIG_PARAMETER,
    CONFIG_PARAMETER_VARIABLE,
    CYCLE_SECONDS_VARIABLE,
    EVERY_N_CYCLES_VARIABLE,
    HISTORY_RETENTION_VARIABLE,
    LEASE_SECONDS_VARIABLE,
    METRICS_NAMESPACE_VARIABLE,
    PER_JOB_METRICS_VARIABLE,
    POLICY_PREFIX,
    POLICY_PREFIX_VARIABLE,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)
from osprey_infra.backends.batch import BatchBackend
from osprey_infra.backends.eks import EksBackend
from osprey_infra.backends.grantees import BackendFunctionInputs, BackendGrantees
from osprey_infra.backends.sagemaker import SageMakerBackend
from osprey_infra.backends.sagemaker_queue import QueueSettings, SageMakerQueueBackend
from osprey_infra.backends.slurm import SlurmBridge
from osprey_infra.config import ControlPlaneConfig
from osprey_infra.cycle_schedule import CycleSchedule
from osprey_infra.cycle_state_machine import CycleStateMachine
from osprey_infra.event_ingestion import EventIngestion
from osprey_infra.function import LAMBDAS_DIR, OspreyFunction, powertools_layer_arn
from osprey_infra.gangs import GangWatch
from osprey_infra.observability import Observability
from osprey_infra.permissions import grant_config_read, grant_steps
from osprey_infra.planning import Planning
from osprey_infra.policy_store import PolicyStore, rule_allow_list
from osprey_infra.registry_table import RegistryTable
from osprey_infra.state_machines import EXPRESS_MAX_SECONDS

__all__ = ["CONFIG_PARAMETER", "OspreyControlPlane"]

# The cycle is an Express workflow: five minutes at most. The lease lasts as long, so a cycle the timeout cut
# short (Finish never ran) holds it no longer than it could have run.
CYCLE_TIMEOUT_SECONDS = EXPRESS_MAX_SECONDS
# The collect function's memory: one vCPU, for the guard's lookahead (docs/performance.md, The guard).
COLLECT_MEMORY_MB = 1769


class OspreyControlPlane(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy_paths: Sequence[str | Path],
        config: ControlPlaneConfig | None = None,
        deploy_environment: cdk.Environment | None = None,
    ) -> None:
        """``deploy_environment``: where an environment-agnostic stack will be deployed, when known (the app
        passes the CDK CLI's account and region); only the custom-rule check at synth uses it."""
        super().__init__(scope, construct_id)
        self.config = config = config or ControlPlaneConfig()
        self.registry = RegistryTable(self, "Registry", retain=config.retain_registry)
        self.rule_allow_list = rule_allow_list(
            cdk.Stack.of(self), config.allowed_rule_prefix, deploy_environment
        )
        self.policies = PolicyStore(
            self, "Policies", policy_paths=policy_paths, allowed_rules=self.rule_allow_list
        )
        table = self.registry.table

        # policy/bundled links to policies/ for the wheel; the functions read policies from SSM instead, and a
        # policy edit must not change the code asset (and redeploy every function).
        code = lambda_.Code.from_asset(
            str(LAMBDAS_DIR), exclude=["**/__pycache__", "**/*.pyc", "osprey_control/policy/bundled"]
        )
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self, "Powertools", powertools_layer_arn(config.powertools_layer_version)
        )
        common = {
            TABLE_NAME_VARIABLE: table.table_name,
            REGISTRY_SHARDS_VARIABLE: str(config.registry_shards),
            METRICS_NAMESPACE_VARIABLE: config.metrics_namespace,
            "POWERTOOLS_METRICS_NAMESPACE": config.metrics_namespace,
        }

        def function(
            construct_id: str,
            module: str,
            description: str,
            *,
            timeout: int = 60,
            memory_size: int = 512,
            environment: Mapping[str, str] | None = None,
        ) -> OspreyFunction:
            made = OspreyFunction(
                self,
                construct_id,
                handler_module=module,
                description=description,
                environment={**common, **(environment or {})},
                layer=layer,
                code=code,
                timeout_seconds=timeout,
                memory_size=memory_size,
            )
            return made

        self.ingest = function(
            "Ingest",
            "ingest",
            "Osprey: job and instance events → registry",
            timeout=60,
            # The policies' coScheduling decides which jobs are gangs.
            environment={
                HISTORY_RETENTION_VARIABLE: str(config.history_retention_days),
                POLICY_PREFIX_VARIABLE: POLICY_PREFIX,
            },
        )
        self.lease = function(
            "Lease",
            "lease",
            "Osprey: take the cycle lease",
            timeout=30,
            environment={LEASE_SECONDS_VARIABLE: str(CYCLE_TIMEOUT_SECONDS)},
        )
        self.shards = function(
            "Shards",
            "shards",
            "Osprey: plan the cycle's shards",
            timeout=60,
        )
        self.collect = function(
            "Collect",
            "collect",
            "Osprey: read the cycle's metrics once for every shard",
            timeout=60,
            # One whole vCPU (Lambda gives CPU in proportion to memory, a vCPU at 1,769 MB): the guard runs each
            # pool forward here, and LOOKAHEAD_LIMITS (osprey_control.metrics.guard) was measured on one core.
            memory_size=COLLECT_MEMORY_MB,
            environment={
                EVERY_N_CYCLES_VARIABLE: str(DEFAULT_EVERY_N_CYCLES),
                POLICY_PREFIX_VARIABLE: POLICY_PREFIX,
                CYCLE_SECONDS_VARIABLE: str(config.cycle_interval_seconds),
            },
        )
        # Derive and apply watch their remaining time and stop before it (docs/control-plane.md, Liveness);
        # two minutes each keeps a whole cycle inside the Express workflow's five.
        self.derive = function(
            "Derive",
            "derive",
            "Osprey: derive priorities for one shard (metrics from the collect step)",
            timeout=120,
            # Each job's CloudWatch series read on one cycle in N, reused from its last decision otherwise
            # (docs/metrics-and-actuation.md, Cadence); the cycle interval numbers the cycles.
            environment={
                EVERY_N_CYCLES_VARIABLE: str(DEFAULT_EVERY_N_CYCLES),
                POLICY_PREFIX_VARIABLE: POLICY_PREFIX,
                ALLOWED_RULE_PREFIX_VARIABLE: config.allowed_rule_prefix,
                PER_JOB_METRICS_VARIABLE: str(config.per_job_metrics).lower(),
                CYCLE_SECONDS_VARIABLE: str(config.cycle_interval_seconds),
            },
        )
        # Apply and the gang watch read the shadow/enforce mode from /osprey/config every invocation: switching a
        # backend to enforce is a change of that parameter, not of code (docs/deploy.md, Shadow mode).
        self.apply = function(
            "Apply",
            "apply",
            "Osprey: apply changed priorities to the backends",
            timeout=120,
            environment={CONFIG_PARAMETER_VARIABLE: CONFIG_PARAMETER},
        )
        self.finish = function("Finish", "finish", "Osprey: cycle metrics and lease release", timeout=30)
        self.gangs = GangWatch(
            self,
            "Gangs",
            table=table,
            environment={**common, CONFIG_PARAMETER_VARIABLE: CONFIG_PARAMETER},
            layer=layer,
            code=code,
        )
        for reader in (self.apply, self.gangs.watch):
            grant_config_read(reader, CONFIG_PARAMETER)
        unknown = sorted(set(config.policy_modes) - set(self.policies.parameters))
        if unknown:  # a policy applied at run time (osprey policy apply) is not known here: warn, never fail
            cdk.Annotations.of(self).add_warning_v2(
                "osprey:policyModes",
                f"osprey:policyModes names {', '.join(unknown)}, which this app does not deploy; the setting "
                "applies once a policy of that name is applied",
            )
        self.gangs.allow_start(self.ingest.function)  # ingest registers jobs from events, gangs among them
        self.planning = Planning(self, "Planning", table=table, environment=common, layer=layer, code=code)
        grant_steps(
            table,
            ingest=self.ingest,
            lease=self.lease,
            shards=self.shards,
            collect=self.collect,
            derive=self.derive,
            apply=self.apply,
            finish=self.finish,
            policy_prefix=POLICY_PREFIX,
            allowed_rule_prefix=config.allowed_rule_prefix,
        )
        self._compose_backends(table=table, environment=common, layer=layer, code=code)

        self.cycle = CycleStateMachine(
            self,
            "Cycle",
            lease=self.lease.function,
            shards=self.shards.function,
            collect=self.collect.function,
            derive=self.derive.function,
            apply=self.apply.function,
            finish=self.finish.function,
            plan_parallelism=self.planning.plan.function,
            eks_discovery=self.eks.discovery.function if self.eks else None,
            timeout=cdk.Duration.seconds(CYCLE_TIMEOUT_SECONDS),
        )
        self.events = EventIngestion(self, "Events", ingest=self.ingest.function, ingest_timeout_seconds=60)
        self.schedule = CycleSchedule(
            self,
            "Schedule",
            state_machine=self.cycle.state_machine,
            minutes=config.schedule_minutes,
            cycles_per_execution=config.cycles_per_execution,
            interval_seconds=config.cycle_interval_seconds,
        )
        self.observability = Observability(
            self,
            "Observability",
            namespace=config.metrics_namespace,
            per_job_metrics=config.per_job_metrics,
            state_machine=self.cycle.state_machine,
            dead_letter_queue=self.events.dead_letter_queue,
            functions={role: made.function for role, made in self.functions().items()},
            cycle_interval_seconds=config.cycle_interval_seconds,
            stale_after_minutes=config.stale_after_minutes,
            failure_alarm_periods=config.failure_alarm_periods,
            alarm_email=config.alarm_email,
        )
        self.config_parameter = ssm.StringParameter(
            self,
            "Config",
            parameter_name=CONFIG_PARAMETER,
            description="Where the Osprey SDK and CLI find this deployment",
            string_value=cdk.Stack.of(self).to_json_string(self._published_config()),
        )

    def _compose_backends(
        self,
        *,
        table: dynamodb.ITable,
        environment: Mapping[str, str],
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
    ) -> None:
        """One construct per backend, each granting ingest, apply and the gang watch what its code calls.

        SageMaker's and Batch's reads are granted whichever backends are on (ingest records every event
        EventBridge delivers); ``backends`` decides their writes. The others exist only when configured."""
        config = self.config
        grantees = BackendGrantees(ingest=self.ingest, apply=self.apply, gangs=self.gangs)
        # A backend pinned to shadow (osprey:shadowOnlyBackends) gets no write permission at all.
        self.sagemaker = SageMakerBackend(
            self,
            "SageMaker",
            grantees=grantees,
            enabled="sagemaker" in config.backends and config.writes("sagemaker"),
        )
        # Service jobs are SageMaker training jobs too: the queued backend is on with sagemaker. The construct
        # keeps the id the queue's resources always had.
        self.sagemaker_queue: SageMakerQueueBackend | None = None
        if "sagemaker" in config.backends:
            queue = (
                QueueSettings(config.sagemaker_queue_name, config.sagemaker_queue_max_instances)
                if config.sagemaker_queue
                else None
            )
            self.sagemaker_queue = SageMakerQueueBackend(
                self, "SageMakerQueue", grantees=grantees, queue=queue, writes=config.writes("sagemaker")
            )
        self.batch = BatchBackend(
            self, "Batch", grantees=grantees, enabled="batch" in config.backends and config.writes("batch")
        )
        # What the backends with functions of their own (EKS discovery, the Slurm bridge) build them from.
        inputs = BackendFunctionInputs(grantees, table, environment, layer, code, POLICY_PREFIX)
        self.eks: EksBackend | None = None
        if "eks" in config.backends and config.eks_clusters:
            # The id the discovery function had as this construct's own child: its logical IDs stay.
            self.eks = EksBackend(
                self,
                "EksDiscovery",
                clusters=config.eks_clusters,
                namespaces=config.eks_namespaces,
                inputs=inputs,
                writes=config.writes("eks"),
            )
        # Slurm (context osprey:slurm): the bridge into the cluster's VPC; apply invokes it (docs/slurm.md).
        self.slurm: SlurmBridge | None = None
        if config.slurm is not None:
            self.slurm = SlurmBridge(
                self,
                "Slurm",
                config=config.slurm,
                inputs=inputs,
                writes=config.writes("slurm"),
            )

    def functions(self) -> dict[str, OspreyFunction]:
        named = {
            "ingest": self.ingest,
            "lease": self.lease,
            "shards": self.shards,
            "collect": self.collect,
            "derive": self.derive,
            "apply": self.apply,
            "finish": self.finish,
            "gangWatch": self.gangs.watch,
            "plan": self.planning.plan,
        }
        if self.eks is not None:
            named["eksDiscovery"] = self.eks.discovery
        return named

    def _published_config(self) -> dict[str, object]:
        config = self.config
        return {
            "stackName": cdk.Stack.of(self).stack_name,
            "region": cdk.Aws.REGION,
            "account": cdk.Aws.ACCOUNT_ID,
            "allowedRulePrefix": config.allowed_rule_prefix,
            "tableName": self.registry.table.table_name,
            "registryShards": config.registry_shards,
            "cycleStateMachineArn": self.cycle.state_machine.state_machine_arn,
            "gangStateMachineArn": self.gangs.state_machine.state_machine_arn,
            "ingestQueueUrl": self.events.queue.queue_url,
            "deadLetterQueueUrl": self.events.dead_letter_queue.queue_url,
            "metricsNamespace": config.metrics_namespace,
            "dashboardName": self.observability.dashboard.dashboard_name,
            "policyPrefix": POLICY_PREFIX,
            "backends": sorted(config.backends),
            # Read by the apply step and the gang watch every invocation (osprey_control.steps.mode).
            "mode": config.modes.to_config(),
            "eksClusters": list(config.eks_clusters),
            "sagemakerQueue": self.sagemaker_queue.queue_name if self.sagemaker_queue else None,
            "functions": {role: made.function.function_name for role, made in self.functions().items()},
        }
