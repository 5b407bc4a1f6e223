"""A real Slurm on localhost for the tests and the benchmark: munged, slurmctld, N slurmd and slurmrestd.

Debian 12's packages (``munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin``, Slurm 22.05;
``.ci/setup`` installs them when it runs as root). Everything lives in one temporary directory: config, state,
spool, logs, the munge socket, the JWT key and fake GPUs (``/dev/null`` symlinks: gres.conf ``File=`` must
name character devices). Ports are chosen free. Each daemon runs in the foreground as a child of this
process, with the marker variable ``OSPREY_SLURM_FIXTURE=<dir>`` in its environment, which Slurm passes on
to slurmstepd and the jobs; :meth:`LocalSlurm.stop` cancels every job, stops the daemons and then kills any
process still carrying the marker, and :meth:`LocalSlurm.leftovers` lists them (the tests assert none).

Why each setting is there (measured on Debian 12, Slurm 22.05.8):

- ``SlurmUser=root``, ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``: no cgroups or systemd;
- ``SlurmdParameters=config_overrides``: 4 to 8 nodes of 4 GPUs on a 2-core machine;
- ``PriorityType=priority/multifactor``, ``PriorityWeightJobSize=0``: without slurmdbd the age and fair-share
  factors are unavailable, so Slurm's own order among equal jobs is submission order;
- ``AuthAltTypes=auth/jwt``: slurmrestd authenticates requests with JWTs; it runs with ``SLURM_JWT=daemon``
  (else it hands the token to auth/munge, which rejects it) and ``SLURMRESTD_SECURITY=disable_user_check``
  (it refuses to run as root otherwise), and ``-s openapi/v0.0.38`` (else it wants slurmdbd).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from osprey_control.backends.slurm import SlurmClient, SlurmCredentials, mint_token
from tests.processes import marked_processes

__all__ = ["MARKER_VARIABLE", "REQUIRED_BINARIES", "LocalSlurm", "missing_requirements"]

MARKER_VARIABLE = "OSPREY_SLURM_FIXTURE"
REQUIRED_BINARIES = ("munged", "slurmctld", "slurmd", "slurmrestd", "scontrol", "sbatch", "squeue", "sprio")
_JWT_PLUGIN = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so")
REST_USER = "root"


def missing_requirements() -> str | None:
    """Why a local Slurm cannot run here, or None."""
    missing = [name for name in REQUIRED_BINARIES if shutil.which(name) is None]
    if missing:
        return (
            f"Slurm binaries not installed ({', '.join(missing)}); .ci/setup installs them as root with apt"
        )
    if os.geteuid() != 0:
        return "a local Slurm needs root (SlurmUser=root, munged started as the munge user)"
    if not Path("/etc/munge/munge.key").exists():
        return "munge has no key (/etc/munge/munge.key)"
    if not any(Path(p).exists() for p in (_JWT_PLUGIN, "/usr/lib/slurm-wlm/auth_jwt.so")):
        return "the Slurm JWT plugin is not installed (slurm-wlm-jwt-plugin)"
    return None


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class LocalSlurm:
    """``nodes`` nodes ``n1..nN`` with ``gpus`` fake GPUs and ``cpus`` CPUs each, one partition ``gpu``."""

    def __init__(
        self,
        nodes: int = 4,
        *,
        gpus: int = 4,
        cpus: int = 4,
        cluster: str = "osprey-test",
        extra_conf: Sequence[str] = (),
    ) -> None:
        if not 1 <= nodes <= 16:
            raise ValueError("nodes must be 1..16")
        self.node_names = [f"n{index}" for index in range(1, nodes + 1)]
        self.gpus = gpus
        self.cpus = cpus
        self.cluster = cluster
        self.extra_conf = tuple(extra_conf)  # slurm.conf lines after the fixture's own
        self.root = Path(tempfile.mkdtemp(prefix="osprey-slurm-"))
        self.root.chmod(0o755)  # munged (user munge) must reach its socket directory
        self.conf = self.root / "slurm.conf"
        self.jwt_key = secrets.token_bytes(32)
        self._processes: list[subprocess.Popen[bytes]] = []
        self.rest_port = 0
        self.started = False

    # -- environment -------------------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm commands against this cluster (never with SLURM_JWT: the CLI uses munge)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env.update({"SLURM_CONF": str(self.conf), MARKER_VARIABLE: str(self.root)})
        return env

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def credentials(self) -> SlurmCredentials:
        return SlurmCredentials(REST_USER, mint_token(self.jwt_key, REST_USER))

    def client(self) -> SlurmClient:
        # Loopback to a throwaway cluster: plain http is the test's explicit choice (docs/slurm.md).
        return SlurmClient(self.url, self.credentials, allow_insecure_http=True)

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=30, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> LocalSlurm:
        ports = _free_ports(len(self.node_names) + 2)
        ctld_port, self.rest_port, node_ports = ports[0], ports[1], ports[2:]
        self._write_config(ctld_port, node_ports)
        munge = self.root / "munge"
        munge.mkdir(mode=0o755)
        shutil.chown(munge, "munge", "munge")
        # As the munge user (what `runuser -u munge -- munged --force` does), as a direct child so that
        # SIGTERM reaches munged itself.
        self._spawn(
            ["munged", "--foreground", "--force",
             f"--socket={munge}/munge.socket", f"--pid-file={munge}/munged.pid",
             f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"],
            "munged",
            user="munge",
        )  # fmt: skip
        self._wait((munge / "munge.socket").exists, timeout, "munged socket")
        self._spawn(["slurmctld", "-D", "-f", str(self.conf)], "slurmctld")
        for name in self.node_names:
            (self.root / "spool" / name).mkdir(parents=True)
            self._spawn(["slurmd", "-D", "-N", name, "-f", str(self.conf)], f"slurmd-{name}")
        self._spawn(
            ["slurmrestd", "-f", str(self.conf), "-a", "rest_auth/jwt", "-s", "openapi/v0.0.38",
             f"127.0.0.1:{self.rest_port}"],
            "slurmrestd",
            extra={"SLURM_JWT": "daemon", "SLURMRESTD_SECURITY": "disable_user_check"},
        )  # fmt: skip
        self.started = True
        try:
            self._wait(self._all_idle, timeout, "every node idle")
            self._wait(self._rest_up, timeout, "slurmrestd answering")
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel every job, stop the daemons, kill whatever still carries the marker, remove the directory."""
        if self.started:
            self.run("scancel", "--partition=gpu", "--full", check=False)
            # Let slurmd reap the cancelled jobs (a daemon stopped mid-kill waits long before it exits).
            end = time.monotonic() + 5
            with contextlib.suppress(
                RuntimeError
            ):  # slurmctld already gone (it refused to start): stop the rest
                while time.monotonic() < end and self.squeue_states():
                    time.sleep(0.1)
        for process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        for process in self._processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.started = False  # the daemons are gone on purpose from here on
        for pid in self.leftovers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._wait(lambda: not self.leftovers(), 10, "marked processes gone")
        shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self) -> list[int]:
        """Live processes whose environment carries this cluster's marker (jobs, slurmstepd, daemons)."""
        return marked_processes(MARKER_VARIABLE, str(self.root))

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no job is queued or running and every node is idle again."""
        self._wait(
            lambda: not self.squeue_states() and self._all_idle(), timeout, "no jobs and every node idle"
        )

    def wait_state(self, job_id: int, state: str, timeout: float = 20.0) -> None:
        """Until ``squeue`` shows ``job_id`` in ``state`` (RUNNING, PENDING, ...)."""
        self._wait(lambda: self.squeue_states().get(job_id) == state, timeout, f"job {job_id} {state}")

    # -- jobs --------------------------------------------------------------------------------------------

    def sbatch(self, *options: str, script: str | None = None, wrap: str | None = None) -> int:
        """Submit with the real ``sbatch`` (as root, munge); the job id."""
        args = ["sbatch", "--parsable", f"--chdir={self.root}", f"--output={self.root}/job-%j.out", *options]
        if script is not None:
            path = self.root / f"script-{secrets.token_hex(4)}.sbatch"
            path.write_text(script)
            args.append(str(path))
        else:
            args.extend(["--wrap", wrap or "sleep 60"])
        return int(self.run(*args).strip().split(";")[0])

    def squeue_order(self, state: str = "PENDING") -> list[int]:
        """Pending job ids in Slurm's own scheduling order (``squeue --sort=-p,i``: priority, then id)."""
        out = self.run("squeue", "-h", f"--states={state}", "--sort=-p,i", "-o", "%i")
        return [int(line) for line in out.split()]

    def sprio(self) -> dict[int, int]:
        """``sprio``'s PRIORITY per pending job."""
        out = self.run("sprio", "-h", "-o", "%i %Y")
        return {int(job): int(priority) for job, priority in (line.split() for line in out.splitlines())}

    def squeue_states(self) -> dict[int, str]:
        out = self.run("squeue", "-h", "-o", "%i %T")
        return {int(job): state for job, state in (line.split() for line in out.splitlines())}

    # -- internals ---------------------------------------------------------------------------------------

    def _spawn(
        self, args: Sequence[str], name: str, extra: Mapping[str, str] | None = None, user: str | None = None
    ) -> None:
        log = (self.root / f"{name}.stdout").open("wb")
        self._processes.append(
            subprocess.Popen(
                args,
                env={**self.env, **(extra or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                user=user,
                group=user,
                extra_groups=[] if user else None,
            )
        )
        log.close()

    def _all_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return len(states) == len(self.node_names) and all(s == "idle" for s in states.values())

    def _rest_up(self) -> bool:
        request = urllib.request.Request(
            f"{self.url}/slurm/v0.0.38/ping",
            headers={"X-SLURM-USER-NAME": REST_USER, "X-SLURM-USER-TOKEN": self.credentials().token},
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _wait(self, ready: object, timeout: float, what: str) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p.args for p in self._processes if p.poll() is not None]
            if dead and self.started:
                raise RuntimeError(
                    f"Slurm daemon exited while waiting for {what}: {dead}; logs in {self.root}"
                )
            time.sleep(0.1)
        raise TimeoutError(
            f"local Slurm: timed out after {timeout:.0f} s waiting for {what}; logs in {self.root}"
        )

    def _write_config(self, ctld_port: int, node_ports: Sequence[int]) -> None:
        root = self.root
        (root / "state").mkdir()
        (root / "dev").mkdir()
        host = socket.gethostname().split(".")[0]
        lines = [
            f"ClusterName={self.cluster}",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={root}/munge/munge.socket",
            "AuthAltTypes=auth/jwt",
            f"AuthAltParameters=jwt_key={root}/jwt.key",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd-%n.pid",
            f"SlurmctldLogFile={root}/slurmctld.log",
            f"SlurmdLogFile={root}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "PriorityType=priority/multifactor",
            "PriorityWeightJobSize=0",
            "SchedulerType=sched/backfill",
            # Schedule often: the tests and the benchmark compress hours into seconds.
            "SchedulerParameters=sched_interval=1,bf_interval=1,sched_min_interval=100000",
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=300",
            "KillWait=1",
            "GresTypes=gpu",
            *self.extra_conf,
        ]
        gres = []
        for name, port in zip(self.node_names, node_ports, strict=True):
            lines.append(
                f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname={name} Port={port} "
                f"CPUs={self.cpus} RealMemory=1000 Gres=gpu:{self.gpus} State=UNKNOWN"
            )
            for index in range(self.gpus):
                (root / "dev" / f"{name}-gpu{index}").symlink_to("/dev/null")
            gres.append(f"NodeName={name} Name=gpu File={root}/dev/{name}-gpu[0-{self.gpus - 1}]")
        lines.append(
            f"PartitionName=gpu Nodes={','.join(self.node_names)} Default=YES MaxTime=INFINITE State=UP"
        )
        self.conf.write_text("\n".join(lines) + "\n")
        (root / "gres.conf").write_text("\n".join(gres) + "\n")
        key = root / "jwt.key"
        key.write_bytes(self.jwt_key)
        key.chmod(0o600)
