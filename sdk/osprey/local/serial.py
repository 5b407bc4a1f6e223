"""One moto request at a time, except Lambda invocations, for in-process executions.

moto's backends are not thread-safe: DynamoDB's ``TransactWriteItems`` deep-copies a table while another
thread writes to it and fails with ``RuntimeError: dictionary changed size during iteration``. In AWS the
shards of a cycle's Map run in separate Lambda sandboxes against a service that serialises for them; here they
are threads of one process sharing moto's dictionaries. :func:`serialized_moto` puts a lock around moto's
request dispatch so that each request sees a consistent backend.

Lambda ``Invoke`` requests are not serialised: with :class:`osprey.local.lambdas.InProcessLambdas` an invocation
runs the whole handler, which makes its own (serialised) requests, and may legitimately wait for another
execution (a cycle holding its lease while the next one checks it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["serialized_moto"]

_INVOCATION = re.compile(r"^https?://lambda\.[^/]+/2015-03-31/functions/[^/]+/invocations")


def is_lambda_invocation(url: str) -> bool:
    return _INVOCATION.match(url) is not None


@contextmanager
def serialized_moto() -> Iterator[threading.RLock]:
    """Serialise ``mock_aws`` request dispatch (see the module docstring) for the duration of the block."""
    from moto.core.models import botocore_stubber  # noqa: PLC0415 - moto is a dev/local dependency

    lock = threading.RLock()
    shadowed = vars(botocore_stubber).get("process_request")
    original = botocore_stubber.process_request

    def process_request(request: Any) -> Any:
        if is_lambda_invocation(str(request.url)):
            return original(request)
        with lock:
            return original(request)

    botocore_stubber.process_request = process_request  # type: ignore[method-assign]
    try:
        yield lock
    finally:
        if shadowed is None:
            del botocore_stubber.process_request
        else:
            botocore_stubber.process_request = shadowed  # type: ignore[method-assign]
