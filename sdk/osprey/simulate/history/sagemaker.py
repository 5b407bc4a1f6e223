"""SageMaker: the JSON of ``aws sagemaker describe-training-job`` results (one object, a list of them, or one
per line).

- GPUs: ``ResourceConfig.InstanceCount`` x the GPUs of ``ResourceConfig.InstanceType`` in the project's
  instance catalogue (:data:`osprey_control.catalog.INSTANCE_CATALOG`); heterogeneous clusters
  (``ResourceConfig.InstanceGroups``) sum their groups. A type not in the catalogue (a CPU instance) counts
  as no GPUs: such a job is not replayed, and the notes name the type.
- Times: ``CreationTime``, ``TrainingStartTime``, ``TrainingEndTime`` (ISO 8601 as the AWS CLI prints them,
  or epoch seconds as the API sends them).
- Limit: ``StoppingCondition.MaxRuntimeInSeconds``. Team: the execution role's name (``RoleArn``), the one
  identity every training job carries and teams usually have one of; the queue's share identifier is on the
  Batch service job, not here.
"""

from __future__ import annotations

import json
from typing import Any

from osprey.simulate.history.record import (
    HistoryError,
    PastJob,
    dig,
    item_error,
    parse_time,
    positive_int,
    require,
)
from osprey_control.catalog import gpus_for_instance_type

__all__: list[str] = []


def documents(text: str) -> list[Any] | None:
    """One JSON value, or one per line (JSON lines); None when it is neither."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None


def _results(values: list[Any]) -> list[Any] | None:
    flat = [item for value in values for item in (value if isinstance(value, list) else [value])]
    if flat and all(isinstance(item, dict) and "TrainingJobName" in item for item in flat):
        return flat
    return None


def looks_like_training_jobs(values: list[Any]) -> bool:
    return _results(values) is not None


def _gpus(config: Any, where: str, unknown: set[str]) -> tuple[int, int]:
    groups = dig(config, "InstanceGroups") or [config]
    gpus = hosts = 0
    for group in groups:
        kind = str(require(group, "InstanceType", f"{where}.ResourceConfig"))
        count = positive_int(require(group, "InstanceCount", f"{where}.ResourceConfig"), "InstanceCount")
        per_host = gpus_for_instance_type(kind)
        if per_host is None:
            unknown.add(kind)
            continue
        gpus += per_host * count
        hosts += count
    return gpus, max(1, hosts)


def _time(job: dict[str, Any], name: str) -> float | None:
    value = job.get(name)
    return None if value is None else parse_time(value, name)


def read_training_jobs(values: list[Any], source: str, unknown: set[str]) -> list[PastJob]:
    """The training jobs; the instance types not in the catalogue are added to ``unknown``."""
    results = _results(values)
    if results is None:
        raise HistoryError(f"{source}: missing field TrainingJobName (describe-training-job output)")
    jobs = []
    for index, job in enumerate(results):
        where = f"[{index}] {job['TrainingJobName']}"
        try:
            require(job, "CreationTime", where)
            config = require(job, "ResourceConfig", where)
            gpus, hosts = _gpus(config, where, unknown)
            limit = dig(job, "StoppingCondition.MaxRuntimeInSeconds")
            role = str(job.get("RoleArn") or "default").rsplit("/", 1)[-1]
            jobs.append(
                PastJob(
                    job_id=str(job["TrainingJobName"]),
                    submit=parse_time(job["CreationTime"], "CreationTime"),
                    start=_time(job, "TrainingStartTime"),
                    end=_time(job, "TrainingEndTime"),
                    gpus=gpus,
                    nodes=hosts,
                    limit_s=float(positive_int(limit, "StoppingCondition.MaxRuntimeInSeconds"))
                    if limit
                    else None,
                    team=role,
                    state=str(job.get("TrainingJobStatus") or ""),
                )
            )
        except ValueError as error:
            raise item_error(source, where, error) from None
    return jobs
