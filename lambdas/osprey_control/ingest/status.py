"""Backend statuses → :class:`JobStatus` (the table is repeated in docs/registry.md).

SageMaker training jobs (``TrainingJobStatus`` / ``SecondaryStatus``): a terminal primary status decides
(Completed → SUCCEEDED, Failed → FAILED, Stopped → STOPPED); otherwise the secondary status does:

==========================================================================================  ===========
SecondaryStatus                                                                             JobStatus
==========================================================================================  ===========
Pending                                                                                     PENDING
Starting, LaunchingMLInstances, PreparingTrainingStack, Downloading, DownloadingTrainingImage,  STARTING
Restarting, Interrupted (managed spot: capacity lost, the job waits to restart)
Training, Uploading, Updating, Stopping (still holds its instances)                         RUNNING
Completed / Failed / Stopped, MaxRuntimeExceeded, MaxWaitTimeExceeded                        SUCCEEDED / FAILED / STOPPED
unknown, with InProgress / Stopping                                                         STARTING / RUNNING
==========================================================================================  ===========

AWS Batch jobs: SUBMITTED, PENDING, RUNNABLE → PENDING; STARTING → STARTING; RUNNING → RUNNING; SUCCEEDED;
FAILED. AWS Batch service jobs add SCHEDULED (handed to SageMaker, instances being provisioned) → STARTING.
"""

from __future__ import annotations

from osprey_control.registry.model import JobStatus

__all__ = ["BATCH_STATUS", "SERVICE_JOB_STATUS", "UnknownStatusError", "batch_status", "sagemaker_status"]

_P, _S, _R = JobStatus.PENDING, JobStatus.STARTING, JobStatus.RUNNING

_SAGEMAKER_TERMINAL = {
    "Completed": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
    "Stopped": JobStatus.STOPPED,
}
_SAGEMAKER_SECONDARY = {
    "Pending": _P,
    "Starting": _S,
    "LaunchingMLInstances": _S,
    "PreparingTrainingStack": _S,
    "Downloading": _S,
    "DownloadingTrainingImage": _S,
    "Restarting": _S,
    "Interrupted": _S,
    "Training": _R,
    "Uploading": _R,
    "Updating": _R,
    "Stopping": _R,
    "Completed": JobStatus.SUCCEEDED,
    "Failed": JobStatus.FAILED,
    "Stopped": JobStatus.STOPPED,
    "MaxRuntimeExceeded": JobStatus.STOPPED,
    "MaxWaitTimeExceeded": JobStatus.STOPPED,
}
_SAGEMAKER_PRIMARY_DEFAULT = {"InProgress": _S, "Stopping": _R}

BATCH_STATUS: dict[str, JobStatus] = {
    "SUBMITTED": _P,
    "PENDING": _P,
    "RUNNABLE": _P,
    "STARTING": _S,
    "RUNNING": _R,
    "SUCCEEDED": JobStatus.SUCCEEDED,
    "FAILED": JobStatus.FAILED,
}
SERVICE_JOB_STATUS: dict[str, JobStatus] = {**BATCH_STATUS, "SCHEDULED": _S}


class UnknownStatusError(ValueError):
    """A status this version of Osprey does not know (the event is reported and skipped)."""


def sagemaker_status(primary: str, secondary: str | None) -> JobStatus:
    terminal = _SAGEMAKER_TERMINAL.get(primary)
    if terminal is not None:
        return terminal
    if secondary in _SAGEMAKER_SECONDARY:
        return _SAGEMAKER_SECONDARY[secondary]
    if primary in _SAGEMAKER_PRIMARY_DEFAULT:
        return _SAGEMAKER_PRIMARY_DEFAULT[primary]
    allowed = ", ".join([*_SAGEMAKER_PRIMARY_DEFAULT, *_SAGEMAKER_TERMINAL])
    raise UnknownStatusError(f"unknown TrainingJobStatus {primary!r}; expected one of {allowed}")


def batch_status(status: str, *, service: bool = False) -> JobStatus:
    table = SERVICE_JOB_STATUS if service else BATCH_STATUS
    try:
        return table[status]
    except KeyError:
        kind = "service job" if service else "job"
        raise UnknownStatusError(
            f"unknown AWS Batch {kind} status {status!r}; expected one of {', '.join(table)}"
        ) from None
