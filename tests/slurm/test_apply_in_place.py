"""Against a real Slurm: an update whose answer slurmrestd never delivers (the connection drops after
slurmctld made the change) is applied, not failed, because the priority read back is the one wanted (issue 28
item 5).
A small proxy in front of slurmrestd forwards each request and, for the first job update, drops the answer."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from osprey_control.backends import Outcome, PriorityChange
from osprey_control.backends.slurm import SlurmApplier, SlurmClient, SlurmPriorityRange, marker
from osprey_control.contract import parse_block
from osprey_control.registry import Backend, JobRecord, JobStatus
from tests.slurm.cluster import LocalSlurm

BLOCK = parse_block({"priority_derivation_profile": "training-policy"})
MARK = f"--comment={marker(BLOCK)}"


class LossyProxy:
    """Forwards to slurmrestd at ``upstream``; the next ``lose`` job updates (POST) are carried out, then the
    client's connection is closed without an answer."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lose = 0
        self.posts: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v for k, v in self.headers.items() if k.lower().startswith(("x-slurm", "content-t"))
                }
                request = urllib.request.Request(
                    proxy.upstream + self.path, data=body, method=self.command, headers=headers
                )
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        status, payload = response.status, response.read()
                except urllib.error.HTTPError as error:
                    status, payload = error.code, error.read()
                if self.command == "POST":
                    proxy.posts.append(self.path)
                    if proxy.lose > 0:  # slurmctld made the change; its answer never reaches the client
                        proxy.lose -= 1
                        self.close_connection = True
                        return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _forward  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    def __enter__(self) -> LossyProxy:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def proxy(clean: LocalSlurm) -> Iterator[LossyProxy]:
    with LossyProxy(clean.url) as running:
        yield running


def _fill(cluster: LocalSlurm) -> int:
    """Every node busy, so the jobs submitted next stay queued."""
    return cluster.sbatch("-N4", "--exclusive", "-t", "5", wrap="sleep 300")


def test_an_update_whose_answer_was_lost_is_applied(clean: LocalSlurm, proxy: LossyProxy) -> None:
    # Given a queued marked job, and slurmrestd's answer to the next job update lost on the way back
    _fill(clean)
    job = clean.sbatch("-N4", "--exclusive", "-t", "5", MARK, wrap="sleep 300")
    proxy.lose = 1
    record = JobRecord(
        backend=Backend.SLURM,
        native_id=f"{clean.cluster}/{job}",
        name=str(job),
        block=BLOCK,
        status=JobStatus.PENDING,
        status_time=datetime.now(UTC),
        cluster=clean.cluster,
        applied_priority=40,
    )
    # When Osprey applies 70 through the proxy
    applier = SlurmApplier(
        lambda cluster: SlurmClient(proxy.url, clean.credentials, timeout=5, allow_insecure_http=True)
    )
    report = applier.apply([PriorityChange(record, 70)])
    # Then Slurm holds the mapped priority after one update, whose answer the client never got
    assert clean.sprio()[job] == SlurmPriorityRange().map(70)
    assert proxy.posts == [f"/slurm/v0.0.38/job/{job}"]
    # And the job is applied at 70 (what the apply step records), not failed
    [result] = report.results
    assert (result.outcome, result.priority) == (Outcome.APPLIED, 70), result.reason
    assert result.reason.startswith("already set")
    assert result.native_value == str(SlurmPriorityRange().map(70))
