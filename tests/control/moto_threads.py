"""moto's DynamoDB backend is not thread-safe; the derive step writes from a thread pool, as it may against the
real service. This serialises the backend so tests measure Osprey, not moto's races.

The race, found from a flaky ``tests/control`` run: ``TransactWriteItems`` in moto 5.2 deep-copies the whole
table (its rollback snapshot) without a lock, so a concurrent write from another thread makes the copy fail
with ``RuntimeError: dictionary changed size during iteration`` (and a rolled-back transaction could restore a
snapshot over another thread's write). How often it hits depends on thread switches during the copy, which
grow with the process's heap and GC pauses: hence "fails when the whole directory runs".
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import wraps
from typing import Any
from unittest import mock

from moto.dynamodb.models import DynamoDBBackend

__all__ = ["serialised_moto_dynamodb"]


def _locked(function: Callable[..., Any], lock: threading.RLock) -> Callable[..., Any]:
    @wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return function(*args, **kwargs)

    return call


@contextmanager
def serialised_moto_dynamodb() -> Iterator[None]:
    """Every public method of moto's DynamoDB backend under one re-entrant lock, restored on exit."""
    lock = threading.RLock()  # re-entrant: TransactWriteItems calls put_item / update_item itself
    with ExitStack() as stack:
        for name, function in vars(DynamoDBBackend).items():
            if not name.startswith("_") and inspect.isfunction(function):
                stack.enter_context(mock.patch.object(DynamoDBBackend, name, _locked(function, lock)))
        yield
