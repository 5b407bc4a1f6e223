"""``osprey local``: bring the embedded AWS up with the control plane and a fleet, run cycles, read decisions.

:func:`bring_up` (in the process that keeps the server): start :class:`osprey.local.server.LocalAws`, create
the synthesized template's resources in it (:func:`osprey.local.deploy.deploy_template`), seed the simulated
fleet and start its gangs' watches (:mod:`osprey.local.gangs`), write the :class:`LocalState` file. Every other
command runs in any process and only needs that file:
:func:`run_cycle` publishes the next tick of metrics, starts one execution of the deployed cycle state machine,
waits for it and returns the decisions the registry recorded.

Two ways to deploy: :func:`bring_up_with_cdk` runs ``npx cdk bootstrap`` and ``npx cdk deploy`` against the
embedded endpoint and then re-creates the state machine where moto executes it (:mod:`osprey.local.cdk`);
:func:`bring_up` creates the synthesized template's resources directly, with the token resolution the
end-to-end test uses (faster, no Node.js). Both end with the same ``/osprey/config`` (docs/local.md).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from osprey.checkout import find_checkout
from osprey.local.cdk import ACCOUNT, cdk_deploy, make_executable, published_config
from osprey.local.deploy import LocalDeployment, deploy_template
from osprey.local.fleet import DEFAULT_JOBS, KUEUE_API, SimulatedFleet, batch_share
from osprey.local.gangs import GANG_TIMEOUT_SECONDS, schedule_ready, start_watches
from osprey.local.kubernetes import LocalKubernetes
from osprey.local.loads import EKS_CLUSTER, EKS_NAMESPACE, SeededJob
from osprey.local.rules import deploy_demo_rule
from osprey.local.server import LocalAws, endpoint_client
from osprey.views import decision_inputs, gang_details
from osprey_control.gang.store import GangStore
from osprey_control.registry import aliases
from osprey_control.wiring import DERIVED_PRIORITY_TAG

__all__ = [
    "LocalState",
    "bring_up",
    "bring_up_with_cdk",
    "read_decisions",
    "run_cycle",
    "state_path",
    "synthesize",
]

# The deployment watches the local EKS cluster (its discovery step joins the cycle), as `-c` would set it.
LOCAL_CONTEXT: dict[str, Any] = {"osprey:eksClusters": EKS_CLUSTER}
CYCLE_TIMEOUT_SECONDS = 120.0


def state_path() -> Path:
    """``$OSPREY_LOCAL_STATE``, else ``~/.osprey/local.json``."""
    configured = os.environ.get("OSPREY_LOCAL_STATE")
    return Path(configured) if configured else Path.home() / ".osprey" / "local.json"


def cloud_assembly_dir(path: Path) -> Path:
    """Where ``osprey local up`` has ``npx cdk deploy`` write its cloud assembly: ``<state file>.cdk.out`` next to
    the state file. Never a directory named ``cdk.out``: every assembly holds a file of that name, so a
    ``cdk.out/cdk.out`` directory and ``npx cdk synth`` into ``cdk.out`` would break each other (EISDIR/EEXIST)."""
    return path.with_name(f"{path.stem}.cdk.out")


@dataclass
class LocalState:
    endpoint: str
    pid: int
    state_machine_arn: str
    table_name: str
    shards: int
    functions: dict[str, str]
    jobs: list[SeededJob]
    skipped_resources: list[str] = field(default_factory=list)
    kubernetes_url: str = ""
    gang_state_machine_arn: str = ""
    gang_timeout: int = 0  # seconds, the gangs' gang_timeout (0: no gangs seeded)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data["jobs"] = [job.to_dict() for job in self.jobs]
        path.write_text(json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> LocalState:
        data = json.loads(path.read_text())
        data["jobs"] = [SeededJob(**job) for job in data["jobs"]]
        return cls(**data)

    def client(self, service: str) -> Any:
        return endpoint_client(service, self.endpoint)


def synthesize(context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Osprey app's template, synthesized in this process (the repo's ``infra/app.py``); by default with
    the local EKS cluster configured (:data:`LOCAL_CONTEXT`)."""
    infra = str(find_checkout() / "infra")
    if infra not in sys.path:
        sys.path.insert(0, infra)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk  # noqa: PLC0415

    from app import build_app  # noqa: PLC0415 - infra/app.py is not an installed package

    # cdk-nag does not change the template; skipping it saves several seconds per `osprey local up`.
    app = cdk.App(context=LOCAL_CONTEXT if context is None else context)
    template: dict[str, Any] = build_app(app, nag=False).synth().get_stack_by_name("Osprey").template
    return template


def _eks_cluster(aws: LocalAws, config: dict[str, Any]) -> LocalKubernetes | None:
    """When the deployment watches the local EKS cluster: create it in moto with the local Kubernetes API
    server as its endpoint (moto's own endpoint does not answer)."""
    if EKS_CLUSTER not in config.get("eksClusters", []):
        return None
    from moto.eks.models import eks_backends  # noqa: PLC0415 - this is the server's process

    kubernetes = aws.kubernetes = LocalKubernetes().start()
    aws.client("eks").create_cluster(
        name=EKS_CLUSTER, roleArn=f"arn:aws:iam::{ACCOUNT}:role/osprey-local-eks", resourcesVpcConfig={}
    )
    cluster = eks_backends[ACCOUNT][aws.region].clusters[EKS_CLUSTER]
    cluster.endpoint = kubernetes.url
    # A PEM's base64, as EKS returns it (moto's is random text); unused for a loopback http:// server.
    cluster.certificate_authority = {"data": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()}
    return kubernetes


def _start_gangs(
    aws: LocalAws, config: dict[str, Any], kubernetes: LocalKubernetes, jobs: list[SeededJob], timeout: int
) -> int:
    """Start the gangs' watches, then let their pods turn Ready (the watch starts only for a starting job).
    A deployment without a gang watch state machine (a template from before it) leaves the gangs unwatched."""
    gangs = [job for job in jobs if job.gang_workers]
    if not gangs or not config.get("gangStateMachineArn"):
        return 0
    started = start_watches(aws.client, config, EKS_CLUSTER, [job.label for job in gangs])
    missing = {job.label for job in gangs} - set(started)
    if missing:
        raise RuntimeError(f"no gang watch started for {sorted(missing)}")
    for job in gangs:
        schedule_ready(kubernetes, EKS_NAMESPACE, job.label, job.gang_ready, timeout)
    return len(gangs)


def _seed_and_save(
    aws: LocalAws, path: Path, config: dict[str, Any], skipped: list[str], gang_timeout: int
) -> LocalState:
    table, shards = str(config["tableName"]), int(config["registryShards"])
    kubernetes = _eks_cluster(aws, config)
    # The custom rule and the example policy that calls it, before the fleet's jobs under that policy.
    deploy_demo_rule(aws.client, aws.runtime, config, region=aws.region, account=ACCOUNT)
    jobs = SimulatedFleet(aws.client, table, shards).seed(
        DEFAULT_JOBS, kubernetes, gang_timeout=gang_timeout, ingest_function=config["functions"]["ingest"]
    )
    gangs = 0
    if kubernetes is not None:
        gangs = _start_gangs(aws, config, kubernetes, jobs, gang_timeout)
    state = LocalState(
        endpoint=aws.endpoint,
        pid=os.getpid(),
        state_machine_arn=str(config["cycleStateMachineArn"]),
        table_name=table,
        shards=shards,
        functions=dict(config["functions"]),
        jobs=jobs,
        skipped_resources=skipped,
        kubernetes_url=kubernetes.url if kubernetes is not None else "",
        gang_state_machine_arn=str(config.get("gangStateMachineArn") or ""),
        gang_timeout=gang_timeout if gangs else 0,
    )
    state.save(path)
    return state


def bring_up(
    aws: LocalAws, template: dict[str, Any], path: Path, *, gang_timeout: int = GANG_TIMEOUT_SECONDS
) -> LocalState:
    """Create ``template``'s resources in the running ``aws`` directly, seed the fleet, write the state file."""
    deployment: LocalDeployment = deploy_template(template, aws.client)
    config = published_config(aws.client)
    if config["cycleStateMachineArn"] != deployment.state_machine_arn():
        raise RuntimeError("/osprey/config names another state machine than the one deployed")
    if config.get("gangStateMachineArn") not in (None, deployment.state_machine_arn("Gang")):
        raise RuntimeError("/osprey/config names another gang watch state machine than the one deployed")
    skipped = sorted({deployment.types[logical] for logical in deployment.skipped})
    return _seed_and_save(aws, path, config, skipped, gang_timeout)


def bring_up_with_cdk(
    aws: LocalAws, path: Path, log: Callable[[str], None] = print, *, gang_timeout: int = GANG_TIMEOUT_SECONDS
) -> LocalState:
    """``npx cdk bootstrap`` and ``npx cdk deploy`` the real app into ``aws``, make its state machines
    executable, seed the fleet, write the state file (see :mod:`osprey.local.cdk`)."""
    cdk_deploy(aws.endpoint, find_checkout(), cloud_assembly_dir(path), context=LOCAL_CONTEXT, log=log)
    log("making the state machines executable, seeding the simulated fleet ...")
    make_executable(aws.client)
    config = published_config(aws.client)
    arns = {m["stateMachineArn"] for m in aws.client("stepfunctions").list_state_machines()["stateMachines"]}
    for key in ("cycleStateMachineArn", "gangStateMachineArn"):
        if key in config and config[key] not in arns:
            raise RuntimeError(f"the deployed state machine {config[key]} ({key}) is not executable")
    # moto's CloudFormation skips the schedule (docs/design.md §9): cycles run when `osprey local cycle` starts one.
    return _seed_and_save(aws, path, config, ["AWS::Scheduler::Schedule"], gang_timeout)


@dataclass(frozen=True)
class CycleResult:
    execution: str
    status: str
    tick: int
    loads: dict[str, tuple[float, float | None]]  # (GPU %, memory bandwidth % or None where not published)
    decisions: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution": self.execution,
            "status": self.status,
            "tick": self.tick,
            "loads": {label: {"gpu": gpu, "memoryBandwidth": bw} for label, (gpu, bw) in self.loads.items()},
            "decisions": self.decisions,
        }


def _workload_priority(state: LocalState, job: SeededJob) -> str:
    namespace, name = job.native_id.split("/", 1)
    url = f"{state.kubernetes_url}/apis/{KUEUE_API}/namespaces/{namespace}/workloads/job-{name}"
    with urllib.request.urlopen(url, timeout=10) as response:
        workload = json.loads(response.read())
    return f"workload priority {workload['spec'].get('priority')}"


def _backend_values(state: LocalState) -> tuple[dict[str, str], dict[str, float]]:
    """What each backend holds now, by native job id: share weightFactor (Batch), schedulingPriority (queued
    SageMaker), the derived-priority tag (direct SageMaker); and each Batch job's fair share of its queue,
    (1/weightFactor) over the sum for the fleet's Batch jobs (a lower weightFactor gets more)."""
    batch = state.client("batch")
    values: dict[str, str] = {}
    arns = [item["arn"] for item in batch.list_scheduling_policies().get("schedulingPolicies", [])]
    weights: dict[str, float] = {}
    if arns:
        for policy in batch.describe_scheduling_policies(arns=arns)["schedulingPolicies"]:
            for entry in (policy.get("fairsharePolicy") or {}).get("shareDistribution") or []:
                weights[entry["shareIdentifier"]] = entry.get("weightFactor")
    for job in state.jobs:
        if job.backend == "batch":
            weight = weights.get(batch_share(job.label))
            values[job.native_id] = "-" if weight is None else f"weightFactor {weight}"
        elif job.backend == "eks":
            values[job.native_id] = _workload_priority(state, job)
        elif job.backend == "sagemaker":
            sagemaker = state.client("sagemaker")
            arn = sagemaker.describe_training_job(TrainingJobName=job.native_id)["TrainingJobArn"]
            tags = {tag["Key"]: tag["Value"] for tag in sagemaker.list_tags(ResourceArn=arn).get("Tags", [])}
            tag = tags.get(DERIVED_PRIORITY_TAG)
            values[job.native_id] = "-" if tag is None else f"tag {DERIVED_PRIORITY_TAG}={tag}"
        else:
            priority = batch.describe_service_job(jobId=job.native_id).get("schedulingPriority")
            values[job.native_id] = f"schedulingPriority {priority}"
    inverse = {
        job.native_id: 1.0 / weight
        for job in state.jobs
        if job.backend == "batch" and (weight := weights.get(batch_share(job.label)))
    }
    total = sum(inverse.values())
    return values, {native_id: value / total for native_id, value in inverse.items()}


def read_decisions(state: LocalState) -> list[dict[str, Any]]:
    """Every fleet job's last decision as the registry holds it, what its backend holds, and its gang watch."""
    fleet = SimulatedFleet(state.client, state.table_name, state.shards)
    by_label = {job.label: job for job in state.jobs}
    on_backend, shares = _backend_values(state)
    records = sorted(fleet.registry.list_active(), key=lambda r: r.name)
    gangs = GangStore(state.table_name, fleet.registry.client).load_many(record.key for record in records)
    decisions = []
    for record in records:
        decision = record.last_decision or {}
        # The fleet knows a job by what it submitted (an EKS job's namespace/name); the registry's id also names
        # the cluster and the uid (osprey_control.registry.identity).
        fleet_id = next((alias for alias in aliases(record.backend, record.native_id, record.name)
                         if alias in on_backend), record.native_id)  # fmt: skip
        decisions.append(
            {
                "job": record.name,
                "backend": record.backend.value,
                "id": record.native_id,
                "previous": decision.get("previous"),
                "priority": record.applied_priority,
                "target": decision.get("target"),
                "reason": decision.get("reason"),
                "onBackend": on_backend.get(fleet_id),
                # The load behind the priority: each metric the policy's rules read, as the engine saw it.
                "inputs": decision_inputs(decision),
                "share": shares.get(fleet_id),
                "gang": gang_details(gangs.get(record.key)),
                "simulated": record.name in by_label,
            }
        )
    return decisions


def run_cycle(state: LocalState, timeout: float = CYCLE_TIMEOUT_SECONDS) -> CycleResult:
    """Publish the next tick of metrics, run one cycle execution to its end, return what it decided."""
    sfn = state.client("stepfunctions")
    tick = len(sfn.list_executions(stateMachineArn=state.state_machine_arn)["executions"])
    loads = SimulatedFleet(state.client, state.table_name, state.shards).publish(state.jobs, tick)
    name = f"local-{tick:04d}-{uuid.uuid4().hex[:8]}"
    arn = sfn.start_execution(stateMachineArn=state.state_machine_arn, name=name, input="{}")["executionArn"]
    deadline = time.monotonic() + timeout
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        if time.monotonic() > deadline:
            raise TimeoutError(f"cycle {name} still running after {timeout:.0f} s")
        time.sleep(0.1)
    return CycleResult(name, str(described["status"]), tick, loads, read_decisions(state))
