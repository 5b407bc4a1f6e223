"""The job contract of docs/design.md §5: the ``osprey`` block and its environment, tag and Kubernetes forms.

One parser shared by the SDK (``osprey.sagemaker``, ``osprey.batch``, ``osprey.eks``, ``osprey.runtime``)
and the control plane, which recognises a job by its tags or, when only that is set, its environment::

    >>> from osprey_control.contract import parse_block, to_environment, from_environment
    >>> block = parse_block({"co_schedule": True, "gang_timeout": 180,
    ...                      "priority_derivation_profile": "training-policy"})
    >>> from_environment(to_environment(block)) == block
    True

Pure Python, no AWS import.
"""

from osprey_control.contract.forms import (
    ENABLED_ENV,
    ENABLED_KUBERNETES,
    ENABLED_TAG,
    ENVIRONMENT,
    KUBERNETES,
    RUNTIME_ENVIRONMENT,
    TAGS,
    Form,
    from_environment,
    from_kubernetes,
    from_tags,
    read_fields,
    recognise_job,
    tag_list,
    tags_as_dict,
    to_environment,
    to_kubernetes,
    to_tags,
)
from osprey_control.contract.merge import Source, merge_block, merge_environment, merge_tags
from osprey_control.contract.model import (
    BATCH_PRIORITY_MAX,
    BLOCK_KEYS,
    EXPECTED_RUNTIME_MAX,
    OspreyBlock,
    OspreyBlockError,
    batch_scheduling_priority,
    parse_block,
)
from osprey_control.contract.opt_in import OPT_IN, OptIn, OptInState, opt_in, opt_in_value, opted_in

__all__ = [
    "BATCH_PRIORITY_MAX",
    "BLOCK_KEYS",
    "ENABLED_ENV",
    "ENABLED_KUBERNETES",
    "ENABLED_TAG",
    "ENVIRONMENT",
    "EXPECTED_RUNTIME_MAX",
    "KUBERNETES",
    "OPT_IN",
    "RUNTIME_ENVIRONMENT",
    "TAGS",
    "Form",
    "OptIn",
    "OptInState",
    "OspreyBlock",
    "OspreyBlockError",
    "Source",
    "batch_scheduling_priority",
    "from_environment",
    "from_kubernetes",
    "from_tags",
    "merge_block",
    "merge_environment",
    "merge_tags",
    "opt_in",
    "opt_in_value",
    "opted_in",
    "parse_block",
    "read_fields",
    "recognise_job",
    "tag_list",
    "tags_as_dict",
    "to_environment",
    "to_kubernetes",
    "to_tags",
]
