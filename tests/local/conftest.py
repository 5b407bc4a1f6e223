"""The Osprey app synthesized once for every `osprey local` test (about 8 s), with the local EKS cluster."""

from __future__ import annotations

from typing import Any

import pytest

from osprey.local.session import synthesize


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return synthesize()
