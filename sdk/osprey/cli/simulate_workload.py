"""What ``osprey simulate --workload`` (and ``--tenants``) name, built and checked, and the command's two exits:
1 for a workload or file it could not use, 2 for a wrong command line (docs/cli.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import typer

from osprey.cli.errors import usage_exit
from osprey.simulate import (
    SCHEDULERS,
    TENANT_SCHEDULERS,
    TRACE_DIR,
    SimulationError,
    Workload,
    family_workload,
    homogeneous_nodes,
    llm_workload,
    read_alibaba,
    read_job_csv,
    seed_workload,
)
from osprey.simulate.cohort import check_cohort
from osprey.simulate.tenant_draw import draw_tenants
from osprey.simulate.tenants import load_tenants

__all__ = ["build_workload", "fail", "parse_schedulers", "usage", "with_tenants"]

DRAWN = "drawn"  # --tenants drawn: quotas drawn for the workload's teams
WORKLOADS = ("alibaba", "llm", "seed", "family:SEED")
FAMILY_PREFIX = "family:"
DEFAULT_GPUS = {"llm": 1024, "seed": 64, "file": 64}


def fail(message: str) -> NoReturn:
    """The command ran and could not finish (a workload or record it could not use): exit 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def usage(message: str) -> NoReturn:
    """The command line is wrong (an option's value, options that exclude each other): exit 2 (docs/cli.md)."""
    raise usage_exit([message])


def parse_schedulers(text: str, *, tenants: bool = False) -> list[str]:
    """The ``--schedulers`` names; the shared-cluster ones only with a tenants file (``tenants``)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    allowed = (*SCHEDULERS, *TENANT_SCHEDULERS)
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        usage(f"--schedulers: unknown {', '.join(unknown) or '(none given)'}; allowed: {', '.join(allowed)}")
    needing = [name for name in names if name in TENANT_SCHEDULERS]
    if needing and not tenants:
        usage(
            f"--schedulers: {', '.join(needing)} model teams with quotas: give --tenants FILE.yaml "
            "(docs/multi-tenant.md)"
        )
    return list(dict.fromkeys(names))


def _family(workload: str, gpus: int | None) -> Workload:
    """``family:SEED``: one draw of the workload family (its cluster is part of the draw, so no --gpus)."""
    text = workload.removeprefix(FAMILY_PREFIX)
    # Digits only: int() would also take "+5", " 5" and "1_000", which then name the same draw as "5".
    if not re.fullmatch(r"-?[0-9]+", text):
        usage(
            f"--workload: {workload!r}: the family seed must be a whole number (family:SEED, e.g. family:1000); "
            f"allowed: {', '.join(WORKLOADS)} or an existing .csv file"
        )
    if gpus is not None:
        usage(f"--gpus: {workload} draws its own cluster (32-2,048 GPUs); leave --gpus out")
    return family_workload(int(text))


def build_workload(
    workload: str, gpus: int | None, seed: int, jobs: int, load: float, limit: int | None
) -> Workload:
    """The workload a ``--workload`` value names; exits 1 naming the flag on bad input."""
    if gpus is not None and gpus < 1:
        usage(f"--gpus: must be a positive number of GPUs, got {gpus}")
    try:
        if workload == "alibaba":
            if gpus is not None and gpus < 8:
                usage("--gpus: the Alibaba trace has 8-GPU tasks; give at least 8 GPUs")
            if not (TRACE_DIR / "alibaba_openb2023_gpu_replay.csv").is_file():
                fail(f"--workload alibaba: the trace is not in {TRACE_DIR}")
            built = read_alibaba(gpus=gpus, seed=seed, limit=limit)
        elif workload == "llm":
            if jobs < 1:
                usage(f"--jobs: must be at least 1, got {jobs}")
            if not 0 < load <= 10:
                usage(f"--load: must be in (0, 10], got {load}")
            built = llm_workload(seed=seed, jobs=jobs, gpus=gpus or DEFAULT_GPUS["llm"], load=load)
        elif workload == "seed":
            built = seed_workload(gpus or DEFAULT_GPUS["seed"])
        elif workload.startswith(FAMILY_PREFIX):
            built = _family(workload, gpus)
        else:
            path = Path(workload)
            if path.suffix.lower() != ".csv" or not path.is_file():
                usage(
                    f"--workload: {workload!r} is not one of {', '.join(WORKLOADS)} or an existing .csv file"
                )
            built = read_job_csv(path, homogeneous_nodes(gpus or DEFAULT_GPUS["file"]))
    except SimulationError as error:
        fail(f"--workload: {error}")
    except OSError as error:
        fail(f"--workload: cannot read {workload}: {error}")
    try:
        built.validate()
    except SimulationError as error:
        # A job that cannot fit is the cluster's size (--gpus); anything else is the workload's own.
        fail(f"{'--gpus' if 'nodes' in str(error) else '--workload'}: {error}")
    return built


def with_tenants(built: Workload, path: Path, seed: int, schedulers: Sequence[str]) -> Workload:
    """``built`` shared by the teams of the tenants file at ``path``, or by quotas drawn for its teams from
    ``seed`` when ``path`` is ``drawn`` (:mod:`osprey.simulate.tenant_draw`); exits 1 naming the field on bad
    input, and, when ``schedulers`` include a cohort, on a job its team could never hold, before anything runs."""
    try:
        tenants = draw_tenants(built, seed) if str(path) == DRAWN else load_tenants(path)
        tenants.check(built)
        if any(name in TENANT_SCHEDULERS for name in schedulers):
            check_cohort(tenants, built)
    except SimulationError as error:
        fail(f"--tenants {path}: {error}")
    return replace(built, tenants=tenants)
