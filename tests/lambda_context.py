"""A stand-in for the context object Lambda hands a handler: the parts Powertools and the handlers read.

Every handler test needs one; they differ only in the function's name, its memory and the request id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from aws_lambda_powertools.utilities.typing import LambdaContext

__all__ = ["lambda_context"]


@dataclass(frozen=True)
class _FakeContext:
    function_name: str
    memory_limit_in_mb: int
    aws_request_id: str

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000  # a fresh invocation of a 300 s function


def lambda_context(function_name: str, memory_mb: int = 512, request_id: str = "req-1") -> LambdaContext:
    """A context for a fresh invocation of ``function_name`` (typed as Powertools' ``LambdaContext``)."""
    return cast(LambdaContext, _FakeContext(function_name, memory_mb, request_id))
