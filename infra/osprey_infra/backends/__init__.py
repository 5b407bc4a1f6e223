"""One construct per backend: what the backend needs of its own, and the permissions its code needs.

Each module here is the one home of one backend's infrastructure, named after its package in
``osprey_control.backends``:

- :mod:`.sagemaker`: training jobs; reads for ingest, apply and the gang watch, AddTags and StopTrainingJob;
- :mod:`.sagemaker_queue`: training jobs submitted as Batch service jobs; UpdateServiceJob,
  TerminateServiceJob, and the deployment's own queue when ``osprey:sagemakerQueue`` asks for it;
- :mod:`.batch`: Batch container jobs; Batch's describes, UpdateSchedulingPolicy and TerminateJob;
- :mod:`.eks`: the EKS discovery function and DescribeCluster on the configured clusters;
- :mod:`.slurm`: the Slurm bridge, the one function inside the cluster's VPC.

A backend's construct grants to the functions that call its API (:class:`~.grantees.BackendGrantees`: ingest,
apply and the gang watch) and nothing else; writes are conditioned on ``osprey:enabled=true``. The constructs
never import the composer (:mod:`osprey_infra.control_plane`), which creates them.
"""

__all__: list[str] = []
