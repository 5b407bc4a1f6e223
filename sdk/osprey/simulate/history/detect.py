"""Which scheduler wrote a record, from its content (never its file name), and reading it whole."""

from __future__ import annotations

import json
from pathlib import Path

from osprey.simulate.history.batch import looks_like_batch, read_batch
from osprey.simulate.history.kueue import looks_like_workloads, read_workloads
from osprey.simulate.history.record import HistoryError, SchedulerRecord
from osprey.simulate.history.sagemaker import documents, looks_like_training_jobs, read_training_jobs
from osprey.simulate.history.slurm import looks_like_sacct, read_sacct

__all__ = ["FORMATS", "detect_format", "read_history"]

# format -> the native scheduler model it replays through
FORMATS = {"slurm": "slurm", "kueue": "kueue", "batch": "fairshare", "sagemaker": "sagemaker-queue"}
_EXPECTED = (
    "sacct -P output with its header line, kubectl get workloads -A -o json, aws batch describe-jobs JSON, "
    "or aws sagemaker describe-training-job JSON"
)


def detect_format(text: str) -> str | None:
    """``slurm``, ``kueue``, ``batch``, ``sagemaker``, or None when the text is none of them."""
    if looks_like_sacct(text):
        return "slurm"
    values = documents(text)
    if not values:
        return None
    if len(values) == 1 and looks_like_workloads(values[0]):
        return "kueue"
    if len(values) == 1 and looks_like_batch(values[0]):
        return "batch"
    if looks_like_batch(values):
        return "batch"
    if looks_like_training_jobs(values):
        return "sagemaker"
    return None


def read_history(path: Path) -> SchedulerRecord:
    """The record in ``path``; :class:`HistoryError` for an unknown format or a missing column or field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise HistoryError(f"cannot read {path}: {error}") from None
    source = str(path)
    kind = detect_format(text)
    notes: tuple[str, ...] = ()
    if kind == "slurm":
        jobs = read_sacct(text, source)
    elif kind == "kueue":
        jobs = read_workloads(json.loads(text), source)
    elif kind == "batch":
        values = documents(text) or []
        jobs = read_batch(values[0] if len(values) == 1 else values, source)
    elif kind == "sagemaker":
        unknown: set[str] = set()
        jobs = read_training_jobs(documents(text) or [], source, unknown)
        if unknown:
            notes = (f"instance types not in the catalogue, taken as no GPUs: {', '.join(sorted(unknown))}",)
    else:
        raise HistoryError(f"{source}: not a record this command reads; expected {_EXPECTED}")
    return SchedulerRecord(
        kind, FORMATS[kind], source, tuple(sorted(jobs, key=lambda job: job.submit)), notes
    )
