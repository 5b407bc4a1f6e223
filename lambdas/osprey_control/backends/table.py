"""The one table that maps each :class:`~osprey_control.registry.Backend` to its package.

Each package is imported the first time its backend is asked for, so a function that meets only Batch jobs
never loads the EKS or Slurm clients (cold start, ``bench/cold_start.py``). A new backend is one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import cache
from typing import cast

from osprey_control.backends.actuation import Applier
from osprey_control.backends.driver import BackendDriver, Deployment
from osprey_control.registry import Backend

__all__ = ["BACKEND_PACKAGES", "appliers", "driver_for"]

BACKEND_PACKAGES: dict[Backend, str] = {
    Backend.SAGEMAKER: "osprey_control.backends.sagemaker",
    Backend.SAGEMAKER_QUEUED: "osprey_control.backends.sagemaker_queue",
    Backend.BATCH: "osprey_control.backends.batch",
    Backend.EKS: "osprey_control.backends.eks",
    Backend.SLURM: "osprey_control.backends.slurm",
}


@cache  # the collector asks once per job; the package and its check are per container
def driver_for(backend: Backend) -> BackendDriver:
    """The driver of ``backend`` (its package's ``DRIVER``)."""
    driver = importlib.import_module(BACKEND_PACKAGES[backend]).DRIVER
    if driver.backend is not backend:  # a table line pointing at the wrong package
        raise RuntimeError(f"{BACKEND_PACKAGES[backend]}.DRIVER serves {driver.backend}, not {backend}")
    return cast(BackendDriver, driver)


def appliers(deployment: Deployment, backends: Iterable[Backend] = tuple(Backend)) -> list[Applier]:
    """Every backend's applier that the deployment can reach (one per backend, in the table's order)."""
    built = (driver_for(backend).applier(deployment) for backend in backends)
    return [applier for applier in built if applier is not None]
