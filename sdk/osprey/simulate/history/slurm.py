"""Slurm: ``sacct -a -P -X --format=JobIDRaw,JobName,User,Account,Partition,Submit,Start,End,Timelimit,NNodes,
AllocTRES,ReqTRES,State`` (pipe-separated, the header line first; ``-X``: one line per job allocation).

- GPUs: ``gres/gpu=N`` in ``AllocTRES`` (what the job held), else in ``ReqTRES`` (a pending job holds nothing);
  with typed GPUs only (``gres/gpu:a100=8``) their sum. No GPU term: a CPU job, not replayed.
- Team: ``Account`` (Slurm's fair-share tree is accounts), else ``User``.
- ``Timelimit``: ``[D-]HH:MM:SS``, ``MM:SS`` or ``MM``; ``UNLIMITED``, ``Partition_Limit`` and ``INVALID``
  declare no limit of the job's own.
- Job steps (``40112.batch``, ``40112.0``: ``sacct`` without ``-X``) are skipped: the job's own line counts.
- ``Start`` ``Unknown`` or ``None``: not started (pending); ``End`` ``Unknown``: still running. ``sacct``
  prints local times without a zone: they are read as UTC, which only shifts every job alike.
"""

from __future__ import annotations

import re

from osprey.simulate.history.record import HistoryError, PastJob, parse_time, positive_int

__all__ = ["SACCT_FORMAT"]

SACCT_FORMAT = (
    "JobIDRaw,JobName,User,Account,Partition,Submit,Start,End,Timelimit,NNodes,AllocTRES,ReqTRES,State"
)
REQUIRED = ("JobIDRaw", "Submit", "Start", "End", "Timelimit", "NNodes", "AllocTRES", "ReqTRES", "State")
_NO_TIME = {"", "unknown", "none", "n/a"}
_NO_LIMIT = {"", "unlimited", "partition_limit", "invalid", "none"}
_GPU_TERM = re.compile(r"gres/gpu(?::[^=,]+)?=(\d+)")
_LIMIT = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def looks_like_sacct(text: str) -> bool:
    header = text.lstrip().split("\n", 1)[0]
    return "|" in header and any(name in header.split("|") for name in ("JobIDRaw", "JobID"))


def gpus_in_tres(tres: str) -> int | None:
    """GPUs of a TRES string (``cpu=64,mem=500G,node=1,billing=64,gres/gpu=8``); None when it names none."""
    untyped = re.search(r"gres/gpu=(\d+)", tres)
    if untyped:
        return int(untyped.group(1))
    typed = [int(found) for found in _GPU_TERM.findall(tres)]
    return sum(typed) if typed else None


def parse_limit(text: str) -> float | None:
    """``Timelimit`` in seconds; None for no limit of the job's own."""
    value = text.strip()
    if value.lower() in _NO_LIMIT:
        return None
    found = _LIMIT.fullmatch(value)
    if not found:
        raise ValueError(f"Timelimit: {text!r} is not [D-]HH:MM:SS, MM:SS, MM, UNLIMITED or Partition_Limit")
    days, first, second, third = found.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # HH:MM:SS
        hours, minutes, seconds = int(first), int(second), int(third)
    elif second is not None:  # MM:SS
        hours, minutes, seconds = 0, int(first), int(second)
    else:  # MM
        hours, minutes, seconds = 0, int(first), 0
    total = 86400 * int(days or 0) + 3600 * hours + 60 * minutes + seconds
    return float(total) if total > 0 else None


def _time(text: str, field: str) -> float | None:
    return None if text.strip().lower() in _NO_TIME else parse_time(text.strip(), field)


def read_sacct(text: str, source: str) -> list[PastJob]:
    """The jobs of ``sacct -P`` output; :class:`HistoryError` naming the missing column or the bad line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise HistoryError(f"{source}: empty sacct output")
    header = [name.strip() for name in lines[0].split("|")]
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise HistoryError(
            f"{source}: sacct output lacks column(s) {', '.join(missing)}; "
            f"run sacct -a -P -X --format={SACCT_FORMAT}"
        )
    jobs: list[PastJob] = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) < len(header):
            raise HistoryError(f"{source}: line {number}: {len(cells)} fields, the header has {len(header)}")
        row = dict(zip(header, (cell.strip() for cell in cells), strict=False))
        if "." in row["JobIDRaw"]:
            continue  # a job step (40112.batch, 40112.0: sacct without -X): its job has its own line
        try:
            job_id = row["JobIDRaw"] or f"line-{number}"
            gpus = gpus_in_tres(row["AllocTRES"]) or gpus_in_tres(row["ReqTRES"]) or 0
            team = row.get("Account") or row.get("User") or "default"
            jobs.append(
                PastJob(
                    job_id=job_id,
                    submit=parse_time(row["Submit"], "Submit"),
                    start=_time(row["Start"], "Start"),
                    end=_time(row["End"], "End"),
                    gpus=gpus,
                    nodes=max(1, positive_int(row["NNodes"] or 1, "NNodes")),
                    limit_s=parse_limit(row["Timelimit"]),
                    team=team,
                    state=row["State"].split(" ", 1)[0],  # "CANCELLED by 1001"
                )
            )
        except ValueError as error:
            raise HistoryError(f"{source}: line {number}: {error}") from None
    return jobs
