"""Replaying a scheduler's own record of past jobs (``osprey simulate --history``; docs/history.md).

Each format has its parser module (``slurm``, ``kueue``, ``batch``, ``sagemaker``, and ``registry`` for
Osprey's own); :func:`read_history` detects the format from the content; :func:`replay_workload` turns a record
into a simulator workload (what it does with running and queued jobs is in :mod:`.replay`);
:func:`replay_record` runs it under schedulers and seeds.

>>> from osprey.simulate.history import read_history, replay_record
>>> record = read_history(Path("sacct.txt"))
>>> replay = replay_record(record, ["slurm", "slurm+osprey"], [0, 1, 2], gpus=None)
"""

from osprey.simulate.history.detect import FORMATS, detect_format, read_history
from osprey.simulate.history.record import HistoryError, PastJob, SchedulerRecord
from osprey.simulate.history.registry import REGISTRY_SCHEDULERS, read_registry, records_from_registry
from osprey.simulate.history.replay import ReplayCounts, replay_workload
from osprey.simulate.history.runs import SPREAD_FIELDS, Replay, replay_record
from osprey.simulate.history.slurm import SACCT_FORMAT

__all__ = [
    "FORMATS",
    "REGISTRY_SCHEDULERS",
    "SACCT_FORMAT",
    "SPREAD_FIELDS",
    "HistoryError",
    "PastJob",
    "Replay",
    "ReplayCounts",
    "SchedulerRecord",
    "detect_format",
    "read_history",
    "read_registry",
    "records_from_registry",
    "replay_record",
    "replay_workload",
]
