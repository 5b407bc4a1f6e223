"""A discrete-event GPU-cluster simulator: FIFO, fair-share, Kueue, SageMaker-queue, Slurm, no-gang and oracle
models, and Osprey layered on Kueue, Batch fair share, the SageMaker queue and Slurm through the production
engine, appliers' mappings and gang watch (docs/scheduling.md). Pure Python.

>>> from osprey_control.simulate import seed_workload, simulate
>>> simulate(seed_workload(), "kueue+osprey").mean_wait_s
"""

from osprey_control.simulate.baselines import FairShare, Fifo, NoGang, Oracle
from osprey_control.simulate.cluster import Cluster
from osprey_control.simulate.kueue import Kueue
from osprey_control.simulate.layered import (
    FairShareOsprey,
    KueueOsprey,
    Layered,
    SageMakerQueue,
    SageMakerQueueOsprey,
)
from osprey_control.simulate.ledger import Ledger, Sample
from osprey_control.simulate.model import Job, SimulationError, StartupModel, Workload
from osprey_control.simulate.results import Result, percentile
from osprey_control.simulate.runner import (
    DEFAULT_POLICY,
    LAYERED_PAIRS,
    SCHEDULERS,
    load_default_policy,
    make_scheduler,
    simulate,
)
from osprey_control.simulate.sim import JobRun, Scheduler, Simulator, Status
from osprey_control.simulate.slurm import Slurm, SlurmOsprey
from osprey_control.simulate.workloads import (
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
    "TRACE_DIR",
    "Cluster",
    "FairShare",
    "FairShareOsprey",
    "Fifo",
    "Job",
    "JobRun",
    "Kueue",
    "KueueOsprey",
    "Layered",
    "Ledger",
    "NoGang",
    "Oracle",
    "Result",
    "SageMakerQueue",
    "SageMakerQueueOsprey",
    "Sample",
    "Scheduler",
    "SimulationError",
    "Simulator",
    "Slurm",
    "SlurmOsprey",
    "StartupModel",
    "Status",
    "Workload",
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
