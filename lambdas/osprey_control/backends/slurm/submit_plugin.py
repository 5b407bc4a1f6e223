"""New Osprey jobs mid-range at submission: the ``job_submit/lua`` plugin Osprey ships (docs/slurm.md).

Osprey writes a managed job's priority once per cycle. Before that first write, a job has its own Slurm
priority: 1 with AWS ParallelCluster's slurm.conf (no priority weights), the bottom of the range Osprey writes,
so it sits behind every job Osprey has ranked at the moment slurmctld's main scheduler, which runs at
submission, decides whether it starts. The bridge's discovery cannot help there (it polls once a minute, after
that decision), so the fix runs inside slurmctld: ``job_submit.lua``, which slurmctld calls for every
submission before the job exists (its log shows ``_slurm_rpc_submit_batch_job: JobId=N InitPrio=5001``).

The script gives a job that opted in (its comment carries the marker, read as :mod:`.marker` reads it) the
priority Osprey starts it from: ``SlurmPriorityRange.map`` of its ``initial-priority``, else of
:data:`~.applier.START_PRIORITY` (a policy's default ``initialPriority``, 50; ``SlurmPriorityRange.start``, the
range's middle, 5001 of the default 1..10001). The mapping is rendered into the script as a table from the same
:class:`~.applier.SlurmPriorityRange` the applier uses, so the two can never disagree. Jobs without the marker,
held submissions (priority 0) and operator-set priorities are left alone.

:func:`job_submit_lua` renders the script; :func:`install_script` wraps it in the head node's installer (an AWS
ParallelCluster ``OnNodeStart`` custom action, or ``--enable`` on a running cluster); ``osprey slurm
submit-plugin`` prints either.
"""

from __future__ import annotations

from importlib.resources import files

from osprey_control.backends.slurm.applier import (
    DEFAULT_SLURM_PRIORITY_RANGE,
    START_PRIORITY,
    SlurmPriorityRange,
)

__all__ = ["install_script", "job_submit_lua"]

_PER_LINE = 8


def _template(name: str) -> str:
    # Package data beside this module (pyproject.toml), in the Lambda bundle and the wheel alike.
    return files("osprey_control.backends.slurm").joinpath(name).read_text(encoding="utf-8")


def job_submit_lua(priority_range: SlurmPriorityRange = DEFAULT_SLURM_PRIORITY_RANGE) -> str:
    """``job_submit.lua`` for ``priority_range`` (module docstring)."""
    entries = [f"[{p}] = {priority_range.map(p)}," for p in range(101)]
    table = "\n".join(
        "    " + " ".join(entries[start : start + _PER_LINE]) for start in range(0, len(entries), _PER_LINE)
    )
    return (
        _template("job_submit.lua")
        .replace("@RANGE@", f"{priority_range.low}..{priority_range.high}")
        .replace("@PRIORITIES@", table)
        .replace("@DEFAULT@", str(START_PRIORITY))
    )


def install_script(priority_range: SlurmPriorityRange = DEFAULT_SLURM_PRIORITY_RANGE) -> str:
    """The head node's installer (bash) carrying :func:`job_submit_lua` for ``priority_range``."""
    return (
        _template("install_job_submit.sh")
        .replace("@RANGE@", f"{priority_range.low}..{priority_range.high}")
        .replace("@LUA@", job_submit_lua(priority_range).rstrip("\n"))
    )
