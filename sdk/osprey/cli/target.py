"""Which Osprey deployment a command talks to, boto3 clients for it, and the one-line errors for a missing setup.

Every command that reads or changes a control plane gets it the same way::

    from osprey.cli.target import ProfileOption, RegionOption, TableOption, find_job, guarded, resolve_target

    def my_command(table: TableOption = None, profile: ProfileOption = None, region: RegionOption = None):
        with guarded():
            target = resolve_target(table=table, profile=profile, region=region)
            registry = target.registry()            # JobRegistry with the deployment's table and shards
            ssm = target.client("ssm")              # endpoint-aware boto3 client (osprey local or AWS)
            record = find_job(registry, "llama")    # a JobRecord, or TargetError with "did you mean"

Resolution, first match wins:

1. **Flags**: ``--table`` (or ``OSPREY_TABLE_NAME``). Shards: ``--shards``, ``OSPREY_REGISTRY_SHARDS``, the
   running ``osprey local``'s when it is that table, else the stack's default (16). The endpoint is
   ``--endpoint-url``, else the running ``osprey local``'s when it holds that table and neither ``--profile``
   nor ``--region`` was given, else boto3's (``AWS_ENDPOINT_URL`` or AWS itself).
2. **A running ``osprey local``**: its state file (``osprey.local.session.state_path()``) with its server
   process alive gives endpoint, table, shards, state machine ARNs and functions, and the embedded
   ``/osprey/config`` the rest. Skipped when ``--profile``, ``--region`` or ``--endpoint-url`` says the user
   means another AWS.
3. **A real deployment**: the ``/osprey/config`` SSM parameter the stack writes
   (:data:`osprey_control.wiring.CONFIG_PARAMETER`; keys in ``infra/osprey_infra/control_plane.py``), read with
   boto3's credential chain (``--profile`` / ``AWS_PROFILE``) in the region the AWS CLI v2 would use
   (:func:`effective_region`): ``--region``, then ``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the
   profile's ``region``. boto3 itself skips ``AWS_REGION``, so a profile in one region and ``AWS_REGION`` in
   another would silently use the profile's: the CLI passes ``AWS_REGION`` as the session's region.
   With no flag naming AWS, no running ``osprey local`` and no region at all (a fresh shell, or right after
   ``osprey local down``), the error says that no control plane is running and how to start or name one,
   rather than asking for a region.

Errors (:mod:`osprey.cli.errors`, re-exported here): :func:`describe_error` turns what a missing or wrong
setup raises (no region, no or partial or expired credentials, an unknown profile, an unreachable endpoint,
access denied, a table or parameter that is not there, and :class:`TargetError`) into ONE line saying what to
set; :func:`guarded` prints it as
``error: ...`` on stderr and exits 1. ``osprey.cli.main`` applies the same guard around every command, so a
command that forgets it still never prints a traceback; anything else unexpected is one line too, with
``run with OSPREY_DEBUG=1 for the traceback`` (``OSPREY_DEBUG=1`` re-raises).

Decisions: ``--profile`` or ``--region`` given means a real AWS, so a running ``osprey local`` is not used then;
the CLI's clients retry less than the Lambdas' (3 attempts, 5 s connect timeout) so an unreachable endpoint
fails within seconds, not a minute.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from osprey.cli.errors import TargetError
from osprey_control.contract import OPT_IN
from osprey_control.wiring import (
    ALLOWED_RULE_PREFIX_VARIABLE,
    CONFIG_PARAMETER,
    ENABLED_KUBERNETES,
    ENABLED_TAG,
    POLICY_PREFIX,
    REGISTRY_SHARDS_VARIABLE,
    TABLE_NAME_VARIABLE,
)

if TYPE_CHECKING:
    from osprey.local.session import LocalState
    from osprey_control.registry import JobRecord, JobRegistry

__all__: list[str] = []

# Why a job the user expects may be missing: an opt-in other than the one value (osprey_control.contract.opt_in).
NOT_TRACKED_HINT = (
    f"{ENABLED_TAG}={OPT_IN} ({ENABLED_KUBERNETES}={OPT_IN} on EKS); True, TRUE or 1 do not opt in, and the "
    "ingest log's 'invalid contract' warning names the value it saw"
)

DEFAULT_SHARDS = 16  # infra's registry_shards default (osprey:registryShards)
_CLI_CLIENT_CONFIG: dict[str, Any] = {
    "retries": {"mode": "standard", "total_max_attempts": 3},
    "connect_timeout": 5,
    "read_timeout": 20,
}

TableOption = Annotated[
    str | None,
    typer.Option(
        "--table",
        metavar="NAME",
        help="Registry table. Default: OSPREY_TABLE_NAME, a running osprey local, or /osprey/config.",
        show_default=False,
    ),
]
ShardsOption = Annotated[
    int | None,
    typer.Option(
        "--shards",
        metavar="N",
        min=1,
        max=1000,
        help="Registry shards with --table (default: the deployment's, 16).",
        show_default=False,
    ),
]
ProfileOption = Annotated[
    str | None,
    typer.Option(
        "--profile",
        metavar="NAME",
        help="AWS profile (default: AWS_PROFILE); implies a real AWS.",
        show_default=False,
    ),
]
RegionOption = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="REGION",
        help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's).",
        show_default=False,
    ),
]
EndpointOption = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        help="AWS endpoint (default: AWS_ENDPOINT_URL or AWS itself).",
        show_default=False,
    ),
]


Source = Literal["flags", "local", "deployment"]


@dataclass(frozen=True)
class Target:
    """A resolved deployment. ``config`` is its ``/osprey/config`` (``{}`` when only flags named it)."""

    source: Source
    description: (
        str  # for messages: "osprey local at http://localhost:4599 (pid 12)", "/osprey/config in ..."
    )
    table_name: str
    shards: int
    config: Mapping[str, Any] = field(default_factory=dict)
    endpoint: str | None = None
    region: str | None = None
    profile: str | None = None
    local: bool = False  # the embedded AWS of `osprey local` (fake credentials)
    _clients: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def client(self, service: str) -> Any:
        """A boto3 client for this deployment (one per service, created on first use)."""
        if service not in self._clients:
            self._clients[service] = _make_client(
                service, self.endpoint, self.region, self.profile, self.local
            )
        return self._clients[service]

    def registry(self) -> JobRegistry:
        from osprey_control.registry import JobRegistry  # noqa: PLC0415 - boto3 only when used

        return JobRegistry(self.table_name, self.client("dynamodb"), shards=self.shards)

    @property
    def policy_prefix(self) -> str:
        return str(self.config.get("policyPrefix") or POLICY_PREFIX)

    @property
    def allowed_rule_prefix(self) -> str | None:
        value = self.config.get("allowedRulePrefix") or os.environ.get(ALLOWED_RULE_PREFIX_VARIABLE)
        return str(value) if value else None

    @property
    def account(self) -> str | None:
        return _text(self.config.get("account"))

    @property
    def deployed_region(self) -> str | None:
        """The region the stack says it is in, else the client region."""
        return _text(self.config.get("region")) or self.region

    @property
    def cycle_state_machine_arn(self) -> str | None:
        return _text(self.config.get("cycleStateMachineArn"))

    @property
    def gang_state_machine_arn(self) -> str | None:
        return _text(self.config.get("gangStateMachineArn"))

    @property
    def functions(self) -> dict[str, str]:
        return {str(role): str(name) for role, name in dict(self.config.get("functions") or {}).items()}


def _text(value: Any) -> str | None:
    return str(value) if value else None


REGION_VARIABLE = "AWS_REGION"


def effective_region(region: str | None) -> str | None:
    """The region to build a session with: ``--region``, else ``AWS_REGION``; None lets botocore go on with
    ``AWS_DEFAULT_REGION`` and then the profile's ``region`` (the AWS CLI v2's documented order, which this
    botocore's own chain skips the first variable of)."""
    return region or os.environ.get(REGION_VARIABLE) or None


def _session(profile: str | None, region: str | None) -> Any:
    import boto3  # noqa: PLC0415 - keep boto3 off the import path of commands that do not need it

    return boto3.Session(profile_name=profile, region_name=effective_region(region))


def _make_client(
    service: str, endpoint: str | None, region: str | None, profile: str | None, local: bool
) -> Any:
    if local and endpoint:
        from osprey.local.server import endpoint_client  # noqa: PLC0415

        return endpoint_client(service, endpoint)
    from botocore.config import Config  # noqa: PLC0415

    session = _session(profile, region)
    return session.client(service, endpoint_url=endpoint, config=Config(**_CLI_CLIENT_CONFIG))


def running_local() -> LocalState | None:
    """The ``osprey local`` whose state file exists and whose server process is alive, else None."""
    from osprey.local.session import LocalState, state_path  # noqa: PLC0415 - only when no table was named

    path = state_path()
    if not path.is_file():
        return None
    try:
        state = LocalState.load(path)
        os.kill(state.pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable, or the server is gone: a stale file, as after a crash
    return state


def _shards(explicit: int | None, fallback: int) -> int:
    if explicit is not None:
        return explicit
    configured = os.environ.get(REGISTRY_SHARDS_VARIABLE)
    if configured:
        try:
            return int(configured)
        except ValueError:
            raise TargetError(
                f"{REGISTRY_SHARDS_VARIABLE} must be a whole number, got {configured!r}"
            ) from None
    return fallback


def _local_target(state: LocalState) -> Target:
    config: dict[str, Any] = {}
    probe = Target("local", "", state.table_name, state.shards, endpoint=state.endpoint, local=True)
    ssm = probe.client("ssm")
    try:
        config = json.loads(ssm.get_parameter(Name=CONFIG_PARAMETER)["Parameter"]["Value"])
    except (ssm.exceptions.ParameterNotFound, ValueError):
        config = {}  # a template deployed without the parameter: the state file is enough
    config = {
        **config,
        "tableName": state.table_name,
        "registryShards": state.shards,
        "cycleStateMachineArn": state.state_machine_arn,
        "gangStateMachineArn": state.gang_state_machine_arn or config.get("gangStateMachineArn"),
        "functions": state.functions,
    }
    return Target(
        "local",
        f"osprey local at {state.endpoint} (pid {state.pid})",
        state.table_name,
        state.shards,
        config=config,
        endpoint=state.endpoint,
        region=str(config.get("region") or "us-east-1"),
        local=True,
    )


def _no_control_plane() -> TargetError:
    """No flag named an AWS, no ``osprey local`` runs and no region is set: say that, not "no region"."""
    from osprey.local.session import LocalState, state_path  # noqa: PLC0415

    path = state_path()
    stale = ""
    try:
        stale = (
            f" (the one in {path}, pid {LocalState.load(path).pid}, has stopped)" if path.is_file() else ""
        )
    except (OSError, ValueError, KeyError, TypeError):
        stale = f" ({path} is unreadable)"
    return TargetError(
        f"no Osprey control plane to talk to: no osprey local is running{stale}; start one with "
        "`osprey local up --detach`, or name a real deployment with --region/--profile or AWS_REGION "
        "(its /osprey/config is read there), or --table"
    )


def _deployment_target(profile: str | None, region: str | None, endpoint: str | None) -> Target:
    if not (profile or region or endpoint) and _session(None, None).region_name is None:
        raise _no_control_plane()
    probe = Target("deployment", "", "", 1, endpoint=endpoint, region=region, profile=profile)
    ssm = probe.client("ssm")
    where = ssm.meta.region_name
    try:
        raw = ssm.get_parameter(Name=CONFIG_PARAMETER)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        raise TargetError(
            f"cannot find the registry table: no Osprey deployment in {where} ({CONFIG_PARAMETER} not found); "
            "pass --region/--profile for the account it is in, --table, or start `osprey local up`"
        ) from None
    try:
        config = json.loads(raw)
        table = str(config["tableName"])
    except (ValueError, KeyError, TypeError):
        raise TargetError(
            f"{CONFIG_PARAMETER} in {where} is not Osprey's configuration (no tableName)"
        ) from None
    shards = int(config.get("registryShards") or DEFAULT_SHARDS)
    return Target(
        "deployment",
        f"{config.get('stackName', 'Osprey')} in {where} ({CONFIG_PARAMETER})",
        table,
        shards,
        config=config,
        endpoint=endpoint,
        region=where,
        profile=profile,
    )


def resolve_target(
    *,
    table: str | None = None,
    shards: int | None = None,
    profile: str | None = None,
    region: str | None = None,
    endpoint_url: str | None = None,
) -> Target:
    """The deployment the command means (module docstring). Raises :class:`TargetError` or what boto3 raises
    for a missing setup; call it inside :func:`guarded`."""
    aws_meant = bool(profile or region or endpoint_url)
    table = table or os.environ.get(TABLE_NAME_VARIABLE) or None
    local = None if aws_meant else running_local()
    if table:
        if local is not None and local.table_name == table:
            target = _local_target(local)
            return Target(
                "flags",
                target.description,
                table,
                _shards(shards, local.shards),
                config=target.config,
                endpoint=target.endpoint,
                region=target.region,
                local=True,
            )
        return Target(
            "flags",
            f"table {table}",
            table,
            _shards(shards, DEFAULT_SHARDS),
            endpoint=endpoint_url,
            region=region,
            profile=profile,
        )
    if local is not None:
        return _local_target(local)
    return _deployment_target(profile, region, endpoint_url)


# Finding a job -----------------------------------------------------------------------------------------------


def _qualified(matches: list[JobRecord]) -> str:
    """Each match as the shortest thing to type that names only it (its cluster's form first), with its
    cluster and key: ``gpu-a/ml/train (cluster gpu-a, eks#gpu-a/ml/train/7c1e...)``."""
    from osprey_control.registry import aliases  # noqa: PLC0415

    names = {id(record): aliases(record.backend, record.native_id, record.name) for record in matches}
    shown = []
    for record in matches:
        others = set().union(*(names[id(other)] for other in matches if other is not record))
        unique = sorted(
            (alias for alias in names[id(record)] if alias not in others), key=lambda a: (len(a), a)
        )
        typed = next((alias for alias in unique if record.cluster and alias.startswith(f"{record.cluster}/")),
                     str(record.key))  # fmt: skip
        where = f"cluster {record.cluster}, " if record.cluster else ""
        shown.append(f"{typed} ({where}{record.key})")
    return "; ".join(sorted(shown))


def find_job(registry: JobRegistry, job: str) -> JobRecord:
    """The job named ``job``: a key ``BACKEND#ID`` (active or finished), or an active job's name, native id or
    a shorter form of it (``ml/train``, ``gpu-a/ml/train``, ``gpu-a/42``: osprey_control.registry.aliases).
    :class:`TargetError` when several match (naming each one's cluster and key, and what to type instead) or
    none does (with "did you mean" for close names)."""
    from osprey_control.registry import JobKey, aliases  # noqa: PLC0415

    try:
        key = JobKey.parse(job)
    except ValueError:
        key = None  # a name, not a key
    if key is not None:
        found = registry.get(key)
        if found is not None:
            return found
    active = registry.list_active()
    # A key whose id is a shorter form (``slurm#training/42``, ``eks#ml/train``) names that backend's job too.
    matches = [
        record
        for record in active
        if job in (names := aliases(record.backend, record.native_id, record.name))
        or (key is not None and key.backend is record.backend and key.native_id in names)
    ]
    if len(matches) > 1:
        raise TargetError(f"{job!r} matches several jobs: {_qualified(matches)}; name one of them")
    if matches:
        return matches[0]
    # Compared with what the user may have typed (a name, a native id, a key), suggested as a name, or as the
    # key when the user typed one.
    shown: dict[str, str] = {}
    for record in active:
        shown.setdefault(record.name, record.name)
        shown.setdefault(record.native_id, record.name)
        if "#" in job:
            shown.setdefault(str(record.key), str(record.key))
    close = list(dict.fromkeys(shown[found] for found in difflib.get_close_matches(job, list(shown), 5, 0.6)))
    hint = f"; did you mean {' or '.join(repr(name) for name in close[:3])}?" if close else ""
    raise TargetError(
        f"no job {job!r} in the registry{hint} ({len(active)} active job(s): `osprey jobs` lists them; a "
        f"finished job needs BACKEND#ID). A job is tracked only once it opts in with exactly {NOT_TRACKED_HINT}"
    )
