"""In-job runtime: read the Osprey environment and report metrics as CloudWatch Embedded Metric Format.

SageMaker, AWS Batch and EKS (Container Insights / Fluent Bit) ship a job's stdout to CloudWatch Logs,
where each EMF line becomes a metric. Nothing here calls AWS.

Metrics (namespace ``/aws/osprey``, or ``OSPREY_METRICS_NAMESPACE``), all printed by the job's *lead process*
only (:func:`is_lead`):

==================================  ==============  ===================================================
metric name                         unit            reported by
==================================  ==============  ===================================================
``InterconnectLatencyMicroseconds``  Microseconds    :func:`report_interconnect_latency` (policy metric
                                                    ``node_interconnect_latency``, and the planner)
``RemainingSeconds``                Seconds         :func:`report_progress`: ``(total - step) x step time``
                                                    (policy metric ``remaining_time``)
``StepTimeSeconds``                 Seconds         :func:`report_step_time` only (the planner's re-plan)
``SlowestNodeSpeed``                None            :func:`report_node_speeds`: the slowest node's speed
                                                    relative to the median rank (1.0 nominal)
``SlowestNodeIndex``                None            :func:`report_node_speeds`: that node's index in
                                                    rank order (the planner's straggler signal)
==================================  ==============  ===================================================

The control plane reads ``RemainingSeconds`` as the policy metric ``remaining_time``, less the time since the
report (docs/design.md §3).

Every line has exactly one dimension set, ``[Backend, JobId, Host]``, so the control plane's collector
queries ``GetMetricData`` MetricStat with exactly these three dimensions:

- ``Backend``: ``sagemaker`` | ``batch`` | ``slurm`` | ``eks`` | ``unknown``.
- ``JobId``: SageMaker: the training job name (``TRAINING_JOB_NAME``); Batch: the job ID
  (``AWS_BATCH_JOB_ID`` without a multi-node ``#<index>`` suffix, i.e. the parent job); Slurm:
  ``<cluster>/<job id>`` (``SLURM_CLUSTER_NAME``, ``SLURM_JOB_ID``; ``osprey.slurm`` also exports it as
  ``OSPREY_JOB_ID``); EKS: ``<namespace>/<job name>`` (``OSPREY_JOB_ID``, set by ``osprey.eks.annotate``); else
  ``unknown``.
- ``Host``: SageMaker: ``current_host`` of ``/opt/ml/input/config/resourceconfig.json`` (``algo-1``, ...),
  else ``SM_CURRENT_HOST``; Batch: ``AWS_BATCH_JOB_NODE_INDEX`` (``0`` for a single-node job); Slurm: the node
  name (``SLURMD_NODENAME``, else ``HOSTNAME``); EKS: the pod
  name (``OSPREY_K8S_POD_NAME``, else ``HOSTNAME``); else ``HOSTNAME`` or ``unknown``.
- ``OSPREY_JOB_ID`` and ``OSPREY_HOST`` override the detected values on every backend.

Cost: each (metric, dimension set) is one CloudWatch custom metric, billed monthly ($0.30), and each series
the control plane reads is one GetMetricData metric per read. Every rank of a synchronous job has the same
progress, step time and collective latency, so every ``report_*`` prints only on the lead process: at most
five series per job whatever its size, on the host the control plane reads (the lead host: Batch node ``0``,
SageMaker ``algo-1``, the first pod). Per-rank speed differs, so :func:`report_node_speeds` takes every
rank's compute time (gathered by a collective) and the lead reports only the slowest node. The collector reads ``InterconnectLatencyMicroseconds`` and
``RemainingSeconds`` (when the job's policy uses them); only the planner reads ``StepTimeSeconds``, so a job
that does not ask to be re-planned need not report it.

The line also carries ``PolicyName`` (from ``OSPREY_PRIORITY_POLICY``) as a plain property (not a
dimension, so it adds no metric cost).

A plan's straggler placement (``stage_nodes``) is applied with :func:`rank_permutation` and
:func:`process_group_ranks` (``osprey.stages``): the same ranks, re-ordered process groups.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from osprey.stages import StageNodesError, process_group_ranks, rank_permutation
from osprey_control import wiring
from osprey_control.contract import ENVIRONMENT, OspreyBlock, from_environment
from osprey_control.planner import node_speeds_from_rank_times
from osprey_control.wiring import (  # public here too; the collector and the plan step query the same constants
    INTERCONNECT_LATENCY_METRIC,
    REMAINING_SECONDS_METRIC,
    SLOWEST_NODE_INDEX_METRIC,
    SLOWEST_NODE_SPEED_METRIC,
    STEP_TIME_METRIC,
)

__all__ = [
    "DEFAULT_NAMESPACE",
    "DIMENSIONS",
    "INTERCONNECT_LATENCY_METRIC",
    "REMAINING_SECONDS_METRIC",
    "RESOURCE_CONFIG_PATH",
    "SLOWEST_NODE_INDEX_METRIC",
    "SLOWEST_NODE_SPEED_METRIC",
    "STEP_TIME_METRIC",
    "StageNodesError",
    "config",
    "emf_record",
    "gather_compute_times",
    "is_lead",
    "job_dimensions",
    "measure_interconnect_latency",
    "process_group_ranks",
    "rank_permutation",
    "report_interconnect_latency",
    "report_node_speeds",
    "report_progress",
    "report_step_time",
]

DEFAULT_NAMESPACE = wiring.METRICS_NAMESPACE
DIMENSIONS = wiring.RUNTIME_DIMENSIONS
_POLICY_VARIABLE = ENVIRONMENT.key("priority_derivation_profile")  # printed as a property of every line
RESOURCE_CONFIG_PATH = Path("/opt/ml/input/config/resourceconfig.json")


def config(environment: Mapping[str, str] | None = None) -> OspreyBlock | None:
    """The job's Osprey settings from its ``OSPREY_*`` environment; None when the job has not opted in."""
    return from_environment(os.environ if environment is None else environment, strict=False)


def _sagemaker_host(environment: Mapping[str, str], resource_config: Path) -> str | None:
    try:
        host = json.loads(resource_config.read_text()).get("current_host")
    except (OSError, ValueError, AttributeError):
        host = None
    return str(host) if host else environment.get("SM_CURRENT_HOST")


def job_dimensions(
    environment: Mapping[str, str] | None = None, *, resource_config: Path | None = None
) -> dict[str, str]:
    """``{"Backend", "JobId", "Host"}`` for the current process (rules in the module docstring)."""
    env = os.environ if environment is None else environment
    resource_config = resource_config or RESOURCE_CONFIG_PATH
    if "TRAINING_JOB_NAME" in env or "SM_CURRENT_HOST" in env or resource_config.exists():
        backend = "sagemaker"
        job_id = env.get("TRAINING_JOB_NAME")
        host = _sagemaker_host(env, resource_config)
    elif "AWS_BATCH_JOB_ID" in env:
        backend = "batch"
        job_id = env["AWS_BATCH_JOB_ID"].split("#", 1)[0]
        host = env.get("AWS_BATCH_JOB_NODE_INDEX", "0")
    elif "SLURM_JOB_ID" in env:
        backend = "slurm"
        cluster = env.get("SLURM_CLUSTER_NAME")
        job_id = f"{cluster}/{env['SLURM_JOB_ID']}" if cluster else None
        host = env.get("SLURMD_NODENAME") or env.get("HOSTNAME")
    elif "KUBERNETES_SERVICE_HOST" in env:
        backend = "eks"
        job_id = None
        host = env.get(wiring.RUNTIME_POD_NAME_VARIABLE) or env.get("HOSTNAME")
    else:
        backend, job_id, host = "unknown", None, env.get("HOSTNAME")
    job_id = env.get(wiring.RUNTIME_JOB_ID_VARIABLE) or job_id or "unknown"
    host = env.get(wiring.RUNTIME_HOST_VARIABLE) or host or "unknown"
    return dict(zip(DIMENSIONS, (backend, job_id, host), strict=True))


def _flag(text: str) -> bool | None:
    lowered = text.strip().lower()
    return True if lowered in ("1", "true", "yes") else False if lowered in ("0", "false", "no") else None


def is_lead(environment: Mapping[str, str] | None = None, *, resource_config: Path | None = None) -> bool:
    """Whether this process reports the job's series (latency, remaining time, step time): one per job.

    ``OSPREY_LEAD`` (``true``/``false``) decides when set; else global rank 0 (``RANK``, set by torchrun and
    the launchers of every backend); else, without a rank, the lead host: Batch node index 0, Slurm task 0, the first
    SageMaker host in ``resourceconfig.json``. When none of these can be known the process reports (a
    duplicate series costs money, a missing one loses the signal).
    """
    env = os.environ if environment is None else environment
    forced = _flag(env.get("OSPREY_LEAD", ""))
    if forced is not None:
        return forced
    rank = env.get("RANK", "").strip()
    if rank:
        return rank == "0"
    if "AWS_BATCH_JOB_ID" in env:
        return env.get("AWS_BATCH_JOB_NODE_INDEX", "0") == "0"
    if "SLURM_PROCID" in env:  # srun without a launcher that sets RANK: Slurm's own task rank
        return env["SLURM_PROCID"].strip() == "0"
    try:
        resource = json.loads((resource_config or RESOURCE_CONFIG_PATH).read_text())
        hosts = sorted(str(host) for host in resource.get("hosts") or ())
        current = str(resource.get("current_host") or "")
    except (OSError, ValueError, AttributeError):
        return True
    return not hosts or not current or current == hosts[0]


def emf_record(
    metrics: Mapping[str, tuple[float, str]],
    *,
    environment: Mapping[str, str] | None = None,
    timestamp_ms: int | None = None,
    resource_config: Path | None = None,
) -> dict[str, Any]:
    """One EMF document for ``{metric name: (value, unit)}`` with the job's dimensions."""
    if not metrics or len(metrics) > 100:
        raise ValueError("an EMF directive holds 1 to 100 metrics")
    for name, (value, _unit) in metrics.items():
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    env = os.environ if environment is None else environment
    dimensions = job_dimensions(env, resource_config=resource_config)
    record: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": env.get(wiring.METRICS_NAMESPACE_VARIABLE) or DEFAULT_NAMESPACE,
                    "Dimensions": [list(DIMENSIONS)],
                    "Metrics": [{"Name": name, "Unit": unit} for name, (_value, unit) in metrics.items()],
                }
            ],
        },
        **dimensions,
    }
    policy = env.get(_POLICY_VARIABLE)
    if policy:
        record["PolicyName"] = policy
    record.update({name: float(value) for name, (value, _unit) in metrics.items()})
    return record


def _emit(metrics: Mapping[str, tuple[float, str]], stream: TextIO | None) -> dict[str, Any]:
    """Build the document and print it on the lead process only (:func:`is_lead`)."""
    record = emf_record(metrics)
    if not is_lead():
        return record  # built (and validated) the same, but the lead process reports the job's value
    out = stream if stream is not None else sys.stdout
    # One JSON document per line: the CloudWatch agent / Logs EMF parser splits on newlines.
    out.write(json.dumps(record, separators=(",", ":")) + "\n")
    out.flush()
    return record


def report_interconnect_latency(microseconds: float, *, stream: TextIO | None = None) -> dict[str, Any]:
    """Print one EMF line with ``InterconnectLatencyMicroseconds`` on the lead process; returns the document.

    Only the lead process (:func:`is_lead`) prints, like the other reports. The measurement
    (:func:`measure_interconnect_latency`) is a collective: an ``all_reduce`` completes on every rank at the
    same moment, so every rank measures the same latency and one series per job carries it, instead of one
    custom metric per host. The control plane applies that value to the whole job (the policy metric
    ``node_interconnect_latency`` and the planner's network latency). Every rank may call it.
    """
    if microseconds < 0:
        raise ValueError(f"latency must be >= 0 microseconds, got {microseconds!r}")
    return _emit({INTERCONNECT_LATENCY_METRIC: (microseconds, "Microseconds")}, stream)


def report_step_time(seconds: float, *, stream: TextIO | None = None) -> dict[str, Any]:
    """Print one EMF line with ``StepTimeSeconds`` on the lead process (:func:`is_lead`); returns it.

    Only the planner reads it (it infers the network bandwidth from the step time), so a job that asks to be
    re-planned (``osprey.request_planning``) calls it; :func:`report_progress` does not print it.
    """
    if seconds < 0:
        raise ValueError(f"step time must be >= 0 seconds, got {seconds!r}")
    return _emit({STEP_TIME_METRIC: (seconds, "Seconds")}, stream)


def report_node_speeds(
    rank_compute_seconds: Sequence[float], gpus_per_node: int, *, stream: TextIO | None = None
) -> dict[str, Any]:
    """Print one EMF line with ``SlowestNodeSpeed`` and ``SlowestNodeIndex`` on the lead process; returns it.

    ``rank_compute_seconds``: every rank's compute time per step (forward + backward + optimizer, without
    the time spent waiting in collectives), in rank order, e.g. from :func:`gather_compute_times`. A rank's
    speed is the median rank's time over its own and a node's that of its slowest rank; only the slowest
    node is reported (two series per job, whatever its size), which is the straggler the planner places off
    the critical pipeline stage. Every rank may call it.
    """
    speeds = node_speeds_from_rank_times(list(rank_compute_seconds), gpus_per_node)
    slowest = min(range(len(speeds)), key=speeds.__getitem__)
    return _emit(
        {
            SLOWEST_NODE_SPEED_METRIC: (min(1.0, speeds[slowest]), "None"),
            SLOWEST_NODE_INDEX_METRIC: (float(slowest), "None"),
        },
        stream,
    )


def gather_compute_times(seconds: float) -> list[float] | None:
    """Every rank's ``seconds`` (its own compute time per step), in rank order, via
    ``torch.distributed.all_gather_object``; None without torch or an initialised process group. A
    collective: every rank must call it."""
    try:
        import torch.distributed as dist  # noqa: PLC0415 - optional and heavy
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, float(seconds))
    return [float(value) for value in gathered]


class _ProgressClock:
    """This process's step time for :func:`report_progress`: its previous (step, monotonic seconds) and the
    last seconds per step it knew.

    Kept per process because any rank may be the one that prints; a lock because a user may report from a
    callback thread. ``time.monotonic`` so a wall-clock jump (NTP) never makes a negative step time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._previous: tuple[float, float] | None = None
        self._known: float | None = None

    def step_time(self, step: float, now: float, given: float | None = None) -> float | None:
        """Seconds per step: ``given`` when set, else measured since the previous report, else the last one
        known (the step did not advance: a restart from a checkpoint measures afresh from here). None before
        anything is known (the first call without ``given``). Then remember this report."""
        with self._lock:
            previous, self._previous = self._previous, (step, now)
            if given is not None:
                self._known = given
            elif previous is not None and step > previous[0]:
                self._known = max(0.0, now - previous[1]) / (step - previous[0])
            return self._known

    def reset(self) -> None:
        with self._lock:
            self._previous = None
            self._known = None


_PROGRESS_CLOCK = _ProgressClock()


def _finite_number(name: str, value: object) -> float:
    # bool is an int subclass: report_progress(True, 10) is a bug in the caller, not step 1.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def report_progress(
    step: float,
    total_steps: float,
    step_time_s: float | None = None,
    *,
    stream: TextIO | None = None,
) -> dict[str, Any] | None:
    """Print one EMF line with ``RemainingSeconds`` = ``(total_steps - step) x step time`` (unit Seconds).

    ``step``: steps done so far (>= 0; beyond ``total_steps`` is allowed and reads as nothing left, so an
    overshooting loop never crashes on its metrics); ``total_steps``: steps the job will run (> 0);
    ``step_time_s``: seconds per step (>= 0). Without ``step_time_s`` the time per step since this process's
    previous call is used (wall time / steps advanced), so calling it every N steps is enough; when the step
    did not advance (a restart from a checkpoint) the last step time this process knew is used.

    With no step time known yet (the first call without ``step_time_s``) nothing is printed and None is
    returned: the remaining time cannot be estimated, and the control plane keeps using the job's time budget
    (or the last ``RemainingSeconds`` it read). The step time itself is not printed; a job that asks to be
    re-planned reports it with :func:`report_step_time`.

    Call it at least once per collection window (5 minutes by default), otherwise the control plane falls
    back to the job's time budget. Every rank may call it; only the lead process prints (:func:`is_lead`).
    Returns the document (built on every rank).
    """
    done = _finite_number("step", step)
    total = _finite_number("total_steps", total_steps)
    if done < 0:
        raise ValueError(f"step must be >= 0, got {step!r}")
    if total <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps!r}")
    given = None if step_time_s is None else _finite_number("step_time_s", step_time_s)
    if given is not None and given < 0:
        raise ValueError(f"step_time_s must be >= 0 seconds, got {step_time_s!r}")
    # Always advance the clock (validation passed), so a later call without step_time_s measures from here.
    seconds_per_step = _PROGRESS_CLOCK.step_time(done, time.monotonic(), given)
    if seconds_per_step is None:
        return None
    remaining = max(0.0, total - done) * seconds_per_step
    return _emit({REMAINING_SECONDS_METRIC: (remaining, "Seconds")}, stream)


def measure_interconnect_latency(*, iterations: int = 10, warmup: int = 2, elements: int = 1) -> float | None:
    """Median wall time in microseconds of a tiny ``torch.distributed.all_reduce``.

    Returns None when torch is not installed, ``torch.distributed`` is unavailable, or no process group
    is initialised. The tensor is on the current CUDA device for the NCCL backend (the interconnect that
    matters), on CPU otherwise. Every rank must call it, like any collective.
    """
    try:
        # torch is optional (not a dependency) and heavy: import it only when measuring.
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    on_gpu = dist.get_backend() == "nccl" and torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    tensor = torch.ones(elements, device=device)
    samples: list[float] = []
    for index in range(warmup + iterations):
        if on_gpu:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(tensor)
        if on_gpu:
            torch.cuda.synchronize(device)
        elapsed = (time.perf_counter() - start) * 1e6
        if index >= warmup:
            samples.append(elapsed)
    return float(statistics.median(samples))
