"""The Slurm adapter's pure parts, without a cluster: hostlists, the marker, the status/GPU/limit mapping of
slurmrestd's job objects (v0.0.38 and the later number-object form), the priority mapping, the secret forms,
and the HTTP answers a real slurmrestd cannot be made to give on demand (429, 503), from a local stub server."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from osprey_control.backends.slurm import (
    SlurmClient,
    SlurmCredentials,
    SlurmPriorityRange,
    SlurmRejectedError,
    block_from_comment,
    comment_with_marker,
    marker,
    parse_native_id,
    parse_secret,
    raise_for_errors,
)
from osprey_control.backends.slurm.discovery import job_gpus, job_nodes, job_status
from osprey_control.backends.slurm.hostlist import expand_hostlist
from osprey_control.contract import OspreyBlockError, parse_block
from osprey_control.errors import PermanentError, ThrottledError, TransientError
from osprey_control.registry import JobStatus


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("n[1-3]", ["n1", "n2", "n3"]),
        (
            "gpu-dy-p4d24xlarge-[1-2,5],login",
            ["gpu-dy-p4d24xlarge-1", "gpu-dy-p4d24xlarge-2", "gpu-dy-p4d24xlarge-5", "login"],
        ),
        ("a[01-02]b[1-2]", ["a01b1", "a01b2", "a02b1", "a02b2"]),
        ("", []),
    ],
)
def test_hostlists_expand_as_slurm_writes_them(expression: str, names: list[str]) -> None:
    assert expand_hostlist(expression) == names


@pytest.mark.parametrize("bad", ["n[1-", "n[3-1]", "n[a-b]"])
def test_a_malformed_hostlist_is_an_error_naming_it(bad: str) -> None:
    with pytest.raises(ValueError, match="hostlist"):
        expand_hostlist(bad)


def test_the_marker_round_trips_and_reads_the_environment_form_too() -> None:
    block = parse_block(
        {"priority_derivation_profile": "training-policy", "gang_timeout": 180, "co_schedule": True}
    )
    assert block_from_comment(marker(block)) == block
    assert block_from_comment("nightly; " + marker(block)) == block
    assert block_from_comment("OSPREY_ENABLED=1 OSPREY_PRIORITY_POLICY=aging-policy") == parse_block(
        {"priority_derivation_profile": "aging-policy"}
    )
    assert block_from_comment("osprey:enabled=false,osprey:policy=x") is None
    assert block_from_comment("just a comment") is None
    with pytest.raises(OspreyBlockError, match="osprey:gang-timeout"):
        block_from_comment("osprey:enabled=true,osprey:policy=p,osprey:gang-timeout=soon")
    assert comment_with_marker("osprey:enabled=true,osprey:policy=old,keep me", block).endswith(",keep me")


def _job(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": 7,
        "submit_time": 1_800_000_000,
        "start_time": 1_800_000_060,
        "end_time": 1_800_000_600,
        **fields,
    }


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("PENDING", JobStatus.PENDING),
        ("CONFIGURING", JobStatus.STARTING),
        ("RUNNING", JobStatus.RUNNING),
        (["RUNNING", "COMPLETING"], JobStatus.RUNNING),
        ("COMPLETED", JobStatus.SUCCEEDED),
        ("TIMEOUT", JobStatus.FAILED),
        ("NODE_FAIL", JobStatus.FAILED),
        ("CANCELLED+", JobStatus.STOPPED),
        ("PREEMPTED", JobStatus.STOPPED),
    ],
)
def test_slurm_states_map_to_registry_statuses(state: Any, status: JobStatus) -> None:
    assert job_status(_job(job_state=state))[0] is status


def test_status_times_come_from_the_job_in_either_api_form() -> None:
    _, since = job_status(_job(job_state="RUNNING"))
    assert since is not None
    assert since.timestamp() == 1_800_000_060
    later = _job(job_state=["RUNNING"], start_time={"set": True, "infinite": False, "number": 1_800_000_090})
    assert job_status(later)[1].timestamp() == 1_800_000_090  # type: ignore[union-attr]
    _, submitted = job_status(_job(job_state="PENDING", start_time=0))
    assert submitted is not None
    assert submitted.timestamp() == 1_800_000_000


def test_gpus_come_from_the_request_in_each_form() -> None:
    assert job_gpus(_job(tres_per_job="gres:gpu:16")) == 16
    assert job_gpus(_job(tres_per_node="gres:gpu:a100:8", node_count=4)) == 32
    assert job_gpus(_job(tres_per_node="gres/gpu:4", node_count=2)) == 8
    assert job_gpus(_job(tres_alloc_str="cpu=8,node=2,billing=8,gres/gpu=8")) == 8
    assert job_gpus(_job(tres_req_str="cpu=2,mem=2000M,node=2")) is None


def test_a_pending_job_holds_no_nodes_and_a_running_one_its_allocation() -> None:
    assert job_nodes(_job(job_state="PENDING", nodes="n[1-2]")) == []
    assert job_nodes(_job(job_state="RUNNING", nodes="n[1-2]")) == ["n1", "n2"]


def test_priorities_map_linearly_never_to_zero_and_the_range_is_checked() -> None:
    default = SlurmPriorityRange()
    assert [default.map(p) for p in (0, 1, 50, 100)] == [1, 101, 5001, 10001]
    assert SlurmPriorityRange.parse("1000..2000").map(50) == 1500
    with pytest.raises(ValueError, match="0 means held"):
        SlurmPriorityRange(0, 100)
    with pytest.raises(ValueError, match=r"LOW\.\.HIGH"):
        SlurmPriorityRange.parse("1-100")
    with pytest.raises(ValueError, match=r"0\.\.100"):
        default.map(101)


def test_native_ids_are_cluster_slash_job_id() -> None:
    assert parse_native_id("training/42") == ("training", 42)
    with pytest.raises(ValueError, match="<cluster>/<job id>"):
        parse_native_id("training#42")


def test_secrets_are_read_in_every_documented_form() -> None:
    token = "aaa.bbb.ccc"
    assert parse_secret(token, "slurm") == ("slurm", token, None)
    assert parse_secret(f"SLURM_JWT={token}\n", "slurm") == ("slurm", token, None)
    assert parse_secret(json.dumps({"token": token, "username": "osprey"}), "slurm") == (
        "osprey",
        token,
        None,
    )
    key = base64.b64encode(b"k" * 32).decode()
    assert parse_secret(json.dumps({"jwt_key": key}), "slurm") == ("slurm", None, b"k" * 32)
    assert parse_secret(b"raw-key", "slurm") == ("slurm", None, b"raw-key")
    with pytest.raises(PermanentError, match="expected a JWT"):
        parse_secret("hunter2", "slurm")
    with pytest.raises(PermanentError, match="'token'"):
        parse_secret("{}", "slurm")


def test_an_errors_list_decides_transient_or_permanent() -> None:
    raise_for_errors({"errors": []}, "x")
    with pytest.raises(TransientError, match="busy or unreachable"):
        raise_for_errors(
            {"errors": [{"error": "Unable to contact slurm controller", "error_number": 1007}]}, "x"
        )
    with pytest.raises(SlurmRejectedError) as refused:
        raise_for_errors({"errors": [{"error": "Access/permission denied", "error_number": 2002}]}, "x")
    assert not refused.value.job_gone


class _Stub(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(b"busy")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = type("Handler", (_Stub,), {})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("status", "kind"), [(429, ThrottledError), (503, TransientError), (404, PermanentError)]
)
def test_http_answers_without_an_errors_list_are_classified_by_status(
    stub: tuple[str, type[_Stub]], status: int, kind: type[Exception]
) -> None:
    url, handler = stub
    handler.status = status
    with pytest.raises(kind):
        SlurmClient(
            url, lambda: SlurmCredentials("slurm", "a.b.c"), timeout=5, allow_insecure_http=True
        ).jobs()
