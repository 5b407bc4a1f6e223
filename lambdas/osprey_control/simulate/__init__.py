"""A discrete-event GPU-cluster simulator that runs the production derivation engine and gang watch against
FIFO, fair-share, Kueue-style, no-gang and oracle baselines (docs/scheduling.md). Pure Python.

>>> from osprey_control.simulate import seed_workload, simulate
>>> simulate(seed_workload(), "osprey").mean_wait_s
"""

from osprey_control.simulate.baselines import FairShare, Fifo, NoGang, Oracle
from osprey_control.simulate.cluster import Cluster
from osprey_control.simulate.kueue import Kueue
from osprey_control.simulate.ledger import Ledger, Sample
from osprey_control.simulate.model import Job, SimulationError, StartupModel, Workload
from osprey_control.simulate.osprey import Osprey
from osprey_control.simulate.results import Result, percentile
from osprey_control.simulate.runner import DEFAULT_POLICY, SCHEDULERS, make_scheduler, simulate
from osprey_control.simulate.sim import JobRun, Scheduler, Simulator, Status
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
    "SCHEDULERS",
    "TRACE_DIR",
    "Cluster",
    "FairShare",
    "Fifo",
    "Job",
    "JobRun",
    "Kueue",
    "Ledger",
    "NoGang",
    "Oracle",
    "Osprey",
    "Result",
    "Sample",
    "Scheduler",
    "SimulationError",
    "Simulator",
    "StartupModel",
    "Status",
    "Workload",
    "homogeneous_nodes",
    "llm_workload",
    "make_scheduler",
    "percentile",
    "read_alibaba",
    "read_job_csv",
    "seed_workload",
    "simulate",
]
