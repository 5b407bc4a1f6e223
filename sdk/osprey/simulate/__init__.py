"""A discrete-event GPU-cluster simulator: FIFO, fair-share, Kueue, SageMaker-queue, Slurm, no-gang and oracle
models, and Osprey layered on Kueue, Batch fair share, the SageMaker queue and Slurm through the production
engine, appliers' mappings and gang watch (docs/scheduling.md). Pure Python.

>>> from osprey.simulate import seed_workload, simulate
>>> simulate(seed_workload(), "kueue+osprey").mean_wait_s
"""

from osprey.simulate.baselines import FairShare, Fifo, NoGang, Oracle, OracleBackfill
from osprey.simulate.cluster import SimulatedCluster
from osprey.simulate.family import FamilyDraw, draw_family, family_workload
from osprey.simulate.kueue import Kueue
from osprey.simulate.layered import (
    FairShareOsprey,
    KueueOsprey,
    Layered,
    SageMakerQueue,
    SageMakerQueueOsprey,
)
from osprey.simulate.ledger import Ledger, Sample
from osprey.simulate.model import Job, SimulationError, StartupModel, Workload
from osprey.simulate.results import Result, TeamFigures, percentile
from osprey.simulate.runner import (
    DEFAULT_POLICY,
    LAYERED_PAIRS,
    SCHEDULERS,
    TENANT_PAIRS,
    TENANT_SCHEDULERS,
    load_default_policy,
    make_scheduler,
    simulate,
)
from osprey.simulate.sim import JobRun, Scheduler, Simulator, Status
from osprey.simulate.slurm import Slurm, SlurmOsprey
from osprey.simulate.workloads import (
    TRACE_DIR,
    homogeneous_nodes,
    llm_workload,
    read_alibaba,
    read_job_csv,
    seed_workload,
)

__all__ = [
    "DEFAULT_POLICY",
    "LAYERED_PAIRS",
    "SCHEDULERS",
    "TENANT_PAIRS",
    "TENANT_SCHEDULERS",
    "TRACE_DIR",
    "FairShare",
    "FairShareOsprey",
    "FamilyDraw",
    "Fifo",
    "Job",
    "JobRun",
    "Kueue",
    "KueueOsprey",
    "Layered",
    "Ledger",
    "NoGang",
    "Oracle",
    "OracleBackfill",
    "Result",
    "SageMakerQueue",
    "SageMakerQueueOsprey",
    "Sample",
    "Scheduler",
    "SimulatedCluster",
    "SimulationError",
    "Simulator",
    "Slurm",
    "SlurmOsprey",
    "StartupModel",
    "Status",
    "TeamFigures",
    "Workload",
    "draw_family",
    "family_workload",
    "homogeneous_nodes",
    "llm_workload",
    "load_default_policy",
    "make_scheduler",
    "percentile",
    "read_alibaba",
    "read_job_csv",
    "seed_workload",
    "simulate",
]
