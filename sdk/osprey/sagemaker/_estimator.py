"""``osprey.sagemaker.PyTorch`` and ``enable()``: the ``osprey`` block on SageMaker SDK v2 estimators."""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Mapping
from typing import Any

from sagemaker.estimator import EstimatorBase
from sagemaker.pytorch.estimator import PyTorch as _SageMakerPyTorch

from osprey.sagemaker._queue import submit_to_queue
from osprey_control.contract import (
    ENVIRONMENT,
    TAGS,
    OspreyBlock,
    OspreyBlockError,
    from_environment,
    from_tags,
    merge_block,
    parse_block,
    tag_list,
    tags_as_dict,
    to_environment,
    to_tags,
)

__all__ = ["PyTorch", "block_of", "enable"]

logger = logging.getLogger(__name__)

_BLOCK_PATH = "distribution.torch_distributed.osprey"


def _take_block(distribution: Mapping[str, Any] | None) -> tuple[OspreyBlock | None, dict[str, Any] | None]:
    """Validate the ``osprey`` key of ``distribution["torch_distributed"]`` and return a copy without it."""
    if distribution is None:
        return None, None
    if not isinstance(distribution, Mapping):
        return None, distribution
    # A block anywhere else would be handed to the base class and silently ignored.
    misplaced = [
        f"distribution.{key}" if key == PyTorch.OSPREY_KEY else f"distribution.{key}.osprey"
        for key, value in distribution.items()
        if key == PyTorch.OSPREY_KEY
        or (key != PyTorch.DISTRIBUTION_KEY and isinstance(value, Mapping) and PyTorch.OSPREY_KEY in value)
    ]
    if misplaced:
        raise OspreyBlockError([(where, f"the osprey block belongs in {_BLOCK_PATH}") for where in misplaced])
    torch_distributed = distribution.get(PyTorch.DISTRIBUTION_KEY)
    if not isinstance(torch_distributed, Mapping) or PyTorch.OSPREY_KEY not in torch_distributed:
        return None, dict(distribution)
    block = parse_block(torch_distributed[PyTorch.OSPREY_KEY], path=_BLOCK_PATH)
    # Copy so the caller's dict keeps its osprey key (they may build several estimators from it).
    stripped = copy.deepcopy(dict(distribution))
    del stripped[PyTorch.DISTRIBUTION_KEY][PyTorch.OSPREY_KEY]
    return block, stripped


def _tags_of(tags: Any) -> dict[str, str]:
    try:
        return tags_as_dict(tags)
    except (AttributeError, TypeError) as error:
        raise OspreyBlockError(
            [("tags", f"must be a mapping or a list of {{'Key', 'Value'}} ({error})")]
        ) from None


def _merged(
    block: OspreyBlock, environment: Mapping[str, str] | None, tags: Any, *, path: str
) -> tuple[OspreyBlock, dict[str, str], list[dict[str, str]]]:
    """The effective block, the environment and the tag list to give the estimator."""
    user_tags = _tags_of(tags)
    effective = merge_block(
        block, (ENVIRONMENT, environment or {}, "environment"), (TAGS, user_tags, "tags"), path=path
    )
    merged_env = {**(environment or {}), **to_environment(effective)}
    merged_tags = tag_list({**user_tags, **to_tags(effective)})
    return effective, merged_env, merged_tags


def _recheck(estimator: Any, block: OspreyBlock) -> None:
    """Before ``fit()`` sends anything: ``environment`` and ``tags`` may have been edited since."""
    _merged(block, estimator.environment, estimator.tags, path="estimator.osprey")


def block_of(estimator: Any) -> OspreyBlock | None:
    """The block an estimator carries: its ``osprey`` attribute, else its tags, else its environment.

    Works for estimators returned by ``attach()`` of any class, since ``attach()`` passes the job's tags.
    """
    block = getattr(estimator, "osprey", None)
    if isinstance(block, OspreyBlock):
        return block
    tags = getattr(estimator, "tags", None)
    found = from_tags(tags, strict=False) if tags else None
    if found is None:
        environment = getattr(estimator, "environment", None)
        if isinstance(environment, Mapping):
            found = from_environment(environment, strict=False)
    return found


class PyTorch(_SageMakerPyTorch):
    """``sagemaker.pytorch.PyTorch`` plus an ``osprey`` block in ``distribution["torch_distributed"]``.

    The block is validated, removed before the base class sees it, and becomes ``OSPREY_*`` environment
    variables and ``osprey:*`` tags (docs/design.md §5) merged with your own ``environment`` and ``tags``; a value
    of yours that contradicts the block raises :class:`~osprey_control.contract.OspreyBlockError` before
    any AWS call. ``estimator.osprey`` is the effective block.

    With ``queue`` in the block, :meth:`fit` submits through AWS Batch (``SubmitServiceJob``) and returns
    the queued job handle (``sagemaker.aws_batch.training_queued_job.TrainingQueuedJob``). Pass
    ``batch_client=`` to use your own boto3 Batch client; by default one is created from the estimator's
    session when first needed.
    """

    OSPREY_KEY = "osprey"
    DISTRIBUTION_KEY = "torch_distributed"
    ENVIRONMENT_KEYS: tuple[str, ...] = ENVIRONMENT.keys
    TAG_KEYS: tuple[str, ...] = TAGS.keys

    # Same positional parameters as the base class, so positional calls keep working.
    def __init__(  # noqa: PLR0917
        self,
        entry_point: Any = None,
        framework_version: str | None = None,
        py_version: str | None = None,
        source_dir: Any = None,
        hyperparameters: dict[str, Any] | None = None,
        image_uri: Any = None,
        distribution: dict[str, Any] | None = None,
        *,
        batch_client: Any = None,
        **kwargs: Any,
    ) -> None:
        block, distribution = _take_block(distribution)
        if block is not None:
            block, kwargs["environment"], kwargs["tags"] = _merged(
                block, kwargs.get("environment"), kwargs.get("tags"), path=_BLOCK_PATH
            )
        super().__init__(
            entry_point=entry_point,
            framework_version=framework_version,
            py_version=py_version,
            source_dir=source_dir,
            hyperparameters=hyperparameters,
            image_uri=image_uri,
            distribution=distribution,
            **kwargs,
        )
        self.batch_client = batch_client
        # attach() rebuilds the estimator from the job's tags: read the block back from them.
        self.osprey: OspreyBlock | None = block if block is not None else block_of(self)

    def fit(
        self,
        inputs: Any = None,
        wait: bool = True,
        logs: str = "All",
        job_name: str | None = None,
        experiment_config: dict[str, str] | None = None,
    ) -> Any:
        """Create the training job directly, or queue it through AWS Batch when the block has ``queue``."""
        if self.osprey is not None:
            _recheck(self, self.osprey)
        if self.osprey is not None and self.osprey.queue is not None:
            return submit_to_queue(
                self,
                self.osprey,
                inputs=inputs,
                job_name=job_name,
                experiment_config=experiment_config,
                batch_client=self.batch_client,
                wait=wait,
            )
        return super().fit(
            inputs=inputs, wait=wait, logs=logs, job_name=job_name, experiment_config=experiment_config
        )


def enable(estimator: Any, *, batch_client: Any = None, **block: Any) -> Any:
    """Opt any SageMaker v2 estimator (HuggingFace, generic ``Estimator``, ...) into Osprey.

    ``enable(estimator, co_schedule=True, gang_timeout=120, priority_derivation_profile="training-policy")``
    validates the block, merges its environment and tags into the estimator's own (a contradiction is an
    error) and returns the estimator. With ``queue``, the estimator's ``fit()`` is replaced on this
    instance by one that submits through AWS Batch and returns the queued job handle.
    """
    if not isinstance(estimator, EstimatorBase):
        raise TypeError(f"enable() needs a sagemaker.estimator.EstimatorBase, got {type(estimator).__name__}")
    parsed = parse_block(block, path="osprey")
    target: Any = estimator  # the SDK types tags more narrowly than the list it accepts everywhere
    effective, target.environment, target.tags = _merged(
        parsed, target.environment, target.tags, path="osprey"
    )
    estimator.osprey = effective
    if effective.queue is not None:

        @functools.wraps(estimator.fit)
        def queued_fit(
            inputs: Any = None,
            wait: bool = True,
            logs: str = "All",
            job_name: str | None = None,
            experiment_config: dict[str, str] | None = None,
        ) -> Any:
            _recheck(estimator, effective)
            return submit_to_queue(
                estimator,
                effective,
                inputs=inputs,
                job_name=job_name,
                experiment_config=experiment_config,
                batch_client=batch_client,
                wait=wait,
            )

        estimator.fit = queued_fit
    logger.debug("osprey enabled", extra={"policy": effective.policy, "queued": effective.queue is not None})
    return estimator
