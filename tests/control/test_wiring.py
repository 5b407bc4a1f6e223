"""Given the names that cross a boundary (``osprey_control.wiring``) and the hardware catalog
(``osprey_control.catalog``), then both sides of every boundary agree.

- The in-job runtime (``osprey.runtime``) writes exactly the series the collector and the plan step query:
  same namespace, metric names and dimension values, per backend, from the job environment the SDK's
  annotate functions set and the registry record ingest or discovery builds.
- The job contract, the appliers and the runtime's environment use wiring's keys.
- The catalog holds each instance type once, and every instance type the project names is in it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from osprey import eks as osprey_eks
from osprey import runtime
from osprey.cli import plan as plan_cli
from osprey.local.loads import GPUS_PER_NODE
from osprey_control import catalog, contract, wiring
from osprey_control.backends import (
    DERIVED_PRIORITY_TAG,
    BackendDriver,
    batch,
    driver_for,
    eks,
    sagemaker,
    sagemaker_queue,
    slurm,
)
from osprey_control.catalog import INSTANCE_CATALOG, InstanceType, gpus_for_instance_type
from osprey_control.metrics.queries import SeriesSpec, build_progress_series, build_series, lead_series
from osprey_control.planner import GPUS, INSTANCE_TYPES
from osprey_control.registry import Backend, JobRecord, NodeKind, NodeRef
from osprey_control.steps import plan as plan_step
from osprey_control.wiring import DERIVED_PRIORITY_ANNOTATION
from tests.conftest import REPO_ROOT
from tests.control.metrics.helpers import host, instance, pod, record

# Typed, so mypy checks every front's DRIVER against the protocol (its runtime naming included).
DRIVERS: dict[Backend, BackendDriver] = {
    Backend.SAGEMAKER: sagemaker.DRIVER,
    Backend.SAGEMAKER_QUEUED: sagemaker_queue.DRIVER,
    Backend.BATCH: batch.DRIVER,
    Backend.EKS: eks.DRIVER,
    Backend.SLURM: slurm.DRIVER,
}
SOURCES = [REPO_ROOT / part for part in ("lambdas", "sdk", "infra")]
INSTANCE_TYPE_NAME = re.compile(r"\b(?:ml\.)?[a-z][a-z0-9-]*\.(?:metal|\d*xlarge|large)\b")


def test_the_table_reaches_every_backends_driver() -> None:
    for backend in Backend:
        assert driver_for(backend) is DRIVERS[backend]


def test_the_runtime_and_the_readers_use_wirings_metric_names() -> None:
    assert runtime.DIMENSIONS == wiring.RUNTIME_DIMENSIONS
    assert runtime.DEFAULT_NAMESPACE == wiring.METRICS_NAMESPACE
    emitted = {
        runtime.INTERCONNECT_LATENCY_METRIC,
        runtime.REMAINING_SECONDS_METRIC,
        runtime.STEP_TIME_METRIC,
        runtime.SLOWEST_NODE_SPEED_METRIC,
        runtime.SLOWEST_NODE_INDEX_METRIC,
    }
    job = record(Backend.BATCH, "job-1", [instance("i-1")])
    collected = {spec.metric_name for spec in [*build_series([job])[0], *build_progress_series([job])]}
    planned = {spec.metric_name for spec in plan_step._series([job], wiring.METRICS_NAMESPACE)}
    # The collector reads the latency and the remaining time; the plan step the latency, step time and speeds.
    assert collected & emitted == {wiring.INTERCONNECT_LATENCY_METRIC, wiring.REMAINING_SECONDS_METRIC}
    assert planned == emitted - {wiring.REMAINING_SECONDS_METRIC}


def _kubernetes_env(manifest: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The environment osprey.eks.annotate gives the pod ``pod_name`` of ``manifest``: the downward API's
    fields resolved, ``$(VAR)`` expanded as Kubernetes does (from variables earlier in the list)."""
    fields = {"metadata.namespace": manifest["metadata"]["namespace"], "metadata.name": pod_name}
    [container] = manifest["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {"KUBERNETES_SERVICE_HOST": "10.100.0.1"}
    for entry in container["env"]:
        if "valueFrom" in entry:
            env[entry["name"]] = fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda match: env[match.group(1)], entry["value"])
    return env


def _cases(tmp_path: Path) -> dict[Backend, tuple[dict[str, str], JobRecord, Path]]:
    """Per backend: the lead process's environment, the registry record of its job, its resourceconfig.json."""
    sagemaker_config = tmp_path / "resourceconfig.json"
    sagemaker_config.write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}))
    absent = tmp_path / "absent.json"
    hosts = [host(f"train-1/algo-{n}", gpus=8) for n in (1, 2)]
    queued_hosts = [host(f"train-q/algo-{n}", gpus=8) for n in (1, 2)]
    manifest = osprey_eks.annotate(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "ddp", "namespace": "ml"},
            "spec": {"template": {"spec": {"containers": [{"name": "trainer", "image": "train"}]}}},
        },
        priority_derivation_profile="training-policy",
    )
    return {
        Backend.SAGEMAKER: (
            {"TRAINING_JOB_NAME": "train-1"},
            record(Backend.SAGEMAKER, "train-1", hosts),
            sagemaker_config,
        ),
        Backend.SAGEMAKER_QUEUED: (
            {"TRAINING_JOB_NAME": "train-q"},
            # The registry keys a queued job by its Batch service job id; the training job is its name.
            record(Backend.SAGEMAKER_QUEUED, "4c1d2e9a-service-job", queued_hosts, name="train-q"),
            sagemaker_config,
        ),
        Backend.BATCH: (
            {"AWS_BATCH_JOB_ID": "job-1#0", "AWS_BATCH_JOB_NODE_INDEX": "0"},
            record(Backend.BATCH, "job-1", [instance("i-0a"), instance("i-0b")]),
            absent,
        ),
        Backend.EKS: (
            _kubernetes_env(manifest, "ddp-0"),
            record(Backend.EKS, "ml/ddp", [pod("ddp-0"), pod("ddp-1")], cluster="training"),
            absent,
        ),
        Backend.SLURM: (
            # What Slurm sets in every job step; the runtime builds "<cluster>/<job id>", the registry's id.
            {
                "SLURM_JOB_ID": "42",
                "SLURM_CLUSTER_NAME": "hpc",
                "SLURMD_NODENAME": "gpu-st-p4d-1",
                "SLURM_PROCID": "0",
            },
            record(
                Backend.SLURM,
                "hpc/42",
                [NodeRef(node_id="gpu-st-p4d-1", kind=NodeKind.INSTANCE, instance_id="i-1")],
            ),
            absent,
        ),
    }


def _key(spec: SeriesSpec) -> tuple[str, str, dict[str, str]]:
    return spec.namespace, spec.metric_name, dict(spec.dimensions)


@pytest.mark.parametrize(
    "backend",
    [
        Backend.SAGEMAKER,
        Backend.SAGEMAKER_QUEUED,
        Backend.BATCH,
        Backend.EKS,
        Backend.SLURM,
    ],
)
def test_the_collector_and_the_plan_step_query_what_the_runtime_writes(
    backend: Backend, tmp_path: Path
) -> None:
    # Given the lead process's environment and the registry record of the same job
    environment, job, resource_config = _cases(tmp_path)[backend]
    # When the runtime builds its EMF record and the collector and the plan step build their queries
    written = runtime.emf_record(
        {
            wiring.INTERCONNECT_LATENCY_METRIC: (12.0, "Microseconds"),
            wiring.REMAINING_SECONDS_METRIC: (600.0, "Seconds"),
            wiring.STEP_TIME_METRIC: (1.5, "Seconds"),
        },
        environment=environment,
        resource_config=resource_config,
    )
    [directive] = written["_aws"]["CloudWatchMetrics"]
    [dimension_set] = directive["Dimensions"]
    dimensions = {name: written[name] for name in dimension_set}
    runtime_series = {
        (directive["Namespace"], metric["Name"], json.dumps(dimensions, sort_keys=True))
        for metric in directive["Metrics"]
    }
    specs, problems = build_series([job])
    queried = [
        *(spec for spec in specs if spec.namespace == wiring.METRICS_NAMESPACE),
        *build_progress_series([job]),
        *lead_series([job], "step_time", wiring.STEP_TIME_METRIC),
    ]
    # Then every runtime series a reader queries is one the runtime writes, on the lead host
    assert not problems
    assert len(queried) == 3
    for spec in queried:
        namespace, name, dims = _key(spec)
        assert (namespace, name, json.dumps(dims, sort_keys=True)) in runtime_series, (spec, dimensions)
    assert DRIVERS[backend].runtime.lead_host(job) == dimensions["Host"]


def test_the_contract_and_the_appliers_use_wirings_keys() -> None:
    assert contract.TAGS.enabled_key == wiring.ENABLED_TAG
    assert contract.KUBERNETES.enabled_key == wiring.ENABLED_KUBERNETES
    assert contract.ENVIRONMENT.enabled_key == wiring.ENABLED_ENV
    for form, prefix in (
        (contract.TAGS, wiring.TAG_PREFIX),
        (contract.KUBERNETES, wiring.KUBERNETES_PREFIX),
        (contract.ENVIRONMENT, wiring.ENVIRONMENT_PREFIX),
    ):
        assert all(key.startswith(prefix) for key in form.keys), form.name
    # What Osprey writes itself is never read back as part of the block.
    assert DERIVED_PRIORITY_TAG == wiring.DERIVED_PRIORITY_TAG in contract.TAGS.ignored
    assert DERIVED_PRIORITY_ANNOTATION == wiring.DERIVED_PRIORITY_ANNOTATION in contract.KUBERNETES.ignored
    assert {
        wiring.METRICS_NAMESPACE_VARIABLE,
        wiring.RUNTIME_JOB_ID_VARIABLE,
        wiring.RUNTIME_HOST_VARIABLE,
        wiring.RUNTIME_POD_NAMESPACE_VARIABLE,
        wiring.RUNTIME_POD_NAME_VARIABLE,
    } == contract.RUNTIME_ENVIRONMENT


def test_wiring_spells_each_name_once() -> None:
    values = [value for name in wiring.__all__ if isinstance(value := getattr(wiring, name), str)]
    # A name may serve twice only where one string is two sides' name for one thing (the dimension JobId:
    # the runtime's and the control plane's per-job series; Host: the runtime's and SageMaker's).
    repeated = {value for value in values if values.count(value) > 1}
    assert repeated <= {"JobId", "Host"}, repeated


def test_the_catalog_holds_each_instance_type_once() -> None:
    assert len(INSTANCE_CATALOG) == len(catalog._ENTRIES)
    with pytest.raises(ValueError, match="twice"):
        catalog._by_name([InstanceType("p4d.24xlarge", 8), InstanceType("p4d.24xlarge", 8)])
    with pytest.raises(ValueError, match="not in GPUS"):
        catalog._by_name([InstanceType("p9.huge", 8, "Z100")])
    assert all(entry.gpu in GPUS for entry in INSTANCE_CATALOG.values() if entry.gpu is not None)


def test_the_planners_presets_are_the_catalogs_figures() -> None:
    for name, preset in INSTANCE_TYPES.items():
        entry = INSTANCE_CATALOG[name]
        assert (preset.gpu, preset.gpus_per_node, preset.network_gbits, preset.price_per_gpu_hour) == (
            entry.gpu,
            entry.gpus,
            entry.network_gbits,
            entry.price_per_gpu_hour,
        )
    assert GPUS is catalog.GPUS
    # The CLI's --instance-type help names exactly the planner's presets.
    help_text = Path(plan_cli.__file__).read_text()
    assert set(INSTANCE_TYPE_NAME.findall(help_text)) == set(INSTANCE_TYPES)


def test_every_instance_type_the_project_names_is_in_the_catalog() -> None:
    named = {
        match
        for root in SOURCES
        for path in root.rglob("*.py")
        if path.name != "catalog.py"
        for match in INSTANCE_TYPE_NAME.findall(path.read_text())
    }
    assert named  # the planner, the CLI, osprey.local and the docstrings name some
    assert {name for name in named if gpus_for_instance_type(name) is None} == set()
    # osprey.local's SageMaker job runs on ml.p4d.24xlarge with GPUS_PER_NODE GPUs per host.
    assert gpus_for_instance_type("ml.p4d.24xlarge") == GPUS_PER_NODE
    assert gpus_for_instance_type(None) is None
