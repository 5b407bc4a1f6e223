"""SageMaker Python SDK v2 integration: ``from osprey.sagemaker import PyTorch``.

- :class:`PyTorch`: ``sagemaker.pytorch.PyTorch`` plus the ``osprey`` block in
  ``distribution["torch_distributed"]``.
- :func:`enable`: the same for any other v2 estimator.
- :func:`block_of`: the block an estimator (for example one returned by ``attach()``) carries.
- :func:`build_service_job_request` / :func:`submit_to_queue`: queued submission through AWS Batch.

Requires the ``sagemaker`` extra (``sagemaker>=2.250,<3``; v3 has no ``sagemaker.pytorch``).
"""

from osprey.sagemaker._estimator import PyTorch, block_of, enable
from osprey.sagemaker._queue import build_service_job_request, submit_to_queue
from osprey_control.contract import OspreyBlock, OspreyBlockError

__all__ = [
    "OspreyBlock",
    "OspreyBlockError",
    "PyTorch",
    "block_of",
    "build_service_job_request",
    "enable",
    "submit_to_queue",
]
