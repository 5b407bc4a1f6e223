"""Given the backend table and ingest's detail-type table, then every backend whose jobs come from events has a
driver with ``events`` and a detail-type routed to it, and the discovered ones have neither. (That no backend
imports ingest is tests/architecture/test_layers.py's.)"""

from __future__ import annotations

import pytest

from osprey_control.backends import driver_for
from osprey_control.backends.driver import EventDriver
from osprey_control.ingest.events import JOB_EVENTS, SOURCES, job_events
from osprey_control.registry import Backend


@pytest.mark.parametrize("backend", list(Backend), ids=lambda backend: backend.value)
def test_a_backend_has_events_exactly_when_ingest_routes_events_to_it(backend: Backend) -> None:
    driver = driver_for(backend)
    routed = backend in JOB_EVENTS.values()
    assert (driver.recognition == "events") is routed
    assert isinstance(driver, EventDriver) is routed
    if not routed:
        with pytest.raises(RuntimeError, match="not by events"):
            job_events.__wrapped__(backend)


def test_every_routed_detail_type_has_its_source() -> None:
    assert set(JOB_EVENTS) <= set(SOURCES)
