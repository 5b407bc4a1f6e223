"""AWS Batch: the JSON of ``aws batch describe-jobs`` (``{"jobs": [...]}``, or a list of such pages).

- GPUs: the ``GPU`` entries of ``resourceRequirements``: a single-node job's ``container`` (or its ECS task's
  containers); a multi-node parallel job's ``nodeProperties.nodeRangeProperties``, each range's GPUs x the
  nodes it targets (``0:3``, ``4:``, ``2``) out of ``numNodes``.
- Times: ``createdAt``, ``startedAt``, ``stoppedAt`` (epoch milliseconds). ``startedAt`` without
  ``stoppedAt``: running; no ``startedAt``: queued (SUBMITTED..STARTING) or, when stopped, never started.
- Team: ``shareIdentifier`` (the fair-share policy's share), else the job queue's name; priority:
  ``schedulingPriority``; limit: ``timeout.attemptDurationSeconds``.
"""

from __future__ import annotations

from typing import Any

from osprey.simulate.history.record import HistoryError, PastJob, dig, item_error, positive_int, require

__all__: list[str] = []


def _pages(document: Any) -> list[Any] | None:
    pages = document if isinstance(document, list) else [document]
    if pages and all(isinstance(page, dict) and isinstance(page.get("jobs"), list) for page in pages):
        return pages
    return None


def looks_like_batch(document: Any) -> bool:
    pages = _pages(document)
    return pages is not None and any(
        isinstance(job, dict) and "jobId" in job for page in pages for job in page["jobs"]
    )


def _gpus(requirements: Any) -> int:
    return sum(
        positive_int(entry.get("value", 0), "resourceRequirements GPU")
        for entry in requirements or []
        if isinstance(entry, dict) and entry.get("type") == "GPU"
    )


def _range_nodes(target: object, nodes: int) -> int:
    """How many of ``nodes`` a ``targetNodes`` range (``0:3``, ``4:``, ``:2``, ``2``) covers."""
    low, colon, high = str(target).partition(":")
    try:
        first = int(low or 0)
        last = nodes - 1 if (colon and not high) else int(high or low)
    except ValueError:
        raise ValueError(f"targetNodes: {target!r} is not a node range (0:3, 4:, 2)") from None
    return max(0, min(last, nodes - 1) - first + 1)


def _job_gpus(job: dict[str, Any], where: str) -> tuple[int, int]:
    """(GPUs over all nodes, nodes)."""
    multi = job.get("nodeProperties")
    if isinstance(multi, dict):
        nodes = positive_int(require(multi, "numNodes", f"{where}.nodeProperties"), "numNodes")
        total = 0
        for index, node_range in enumerate(multi.get("nodeRangeProperties") or []):
            place = f"{where}.nodeProperties.nodeRangeProperties[{index}]"
            per_node = _gpus(dig(node_range, "container.resourceRequirements"))
            total += per_node * _range_nodes(require(node_range, "targetNodes", place), nodes)
        return total, max(1, nodes)
    containers = dig(job, "ecsProperties.taskProperties") or []
    gpus = _gpus(dig(job, "container.resourceRequirements"))
    for task in containers:
        for container in dig(task, "containers") or []:
            gpus += _gpus(dig(container, "resourceRequirements"))
    return gpus, 1


def _millis(job: dict[str, Any], name: str) -> float | None:
    value = job.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: {value!r} is not epoch milliseconds")
    return float(value) / 1000.0


def _job(job: Any, where: str) -> PastJob:
    if not isinstance(job, dict):
        raise ValueError("not a job object")
    job_id = str(require(job, "jobId", where))
    require(job, "createdAt", where)
    gpus, nodes = _job_gpus(job, where)
    queue = str(job.get("jobQueue") or "default").rsplit("/", 1)[-1]
    timeout = dig(job, "timeout.attemptDurationSeconds")
    return PastJob(
        job_id=str(job.get("jobName") or job_id) + f" ({job_id})",
        submit=_millis(job, "createdAt") or 0.0,
        start=_millis(job, "startedAt"),
        end=_millis(job, "stoppedAt"),
        gpus=gpus,
        nodes=nodes,
        limit_s=float(positive_int(timeout, "timeout.attemptDurationSeconds")) if timeout else None,
        team=str(job.get("shareIdentifier") or queue),
        priority_class=positive_int(job.get("schedulingPriority") or 0, "schedulingPriority"),
        state=str(job.get("status") or ""),
    )


def read_batch(document: Any, source: str) -> list[PastJob]:
    """The jobs of ``describe-jobs`` pages; :class:`HistoryError` naming the page, job and field."""
    pages = _pages(document)
    if pages is None:
        raise HistoryError(f'{source}: missing field jobs (describe-jobs output is {{"jobs": [...]}})')
    jobs = []
    for page_index, page in enumerate(pages):
        for index, job in enumerate(page["jobs"]):
            where = f"jobs[{index}]" if len(pages) == 1 else f"[{page_index}].jobs[{index}]"
            try:
                jobs.append(_job(job, where))
            except ValueError as error:
                raise item_error(source, where, error) from None
    return jobs
