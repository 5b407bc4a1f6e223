"""``osprey plan --register-job``: write a running job's plan request from the command line, as
``osprey.request_planning`` does from inside the job (model and cluster flags, ``--max-virtual``, the
``--evaluate`` plan as the plan the job runs now, ``--step``)."""

from __future__ import annotations

import json
from typing import Any

import typer

from osprey.cli.errors import usage_exit
from osprey.cli.plan_output import fail
from osprey_control.planner import PlanConfig

__all__: list[str] = []

_REGISTER_FIELDS = {
    "current": "--evaluate",
    "current.virtual": "--evaluate",
    "job": "--register-job",
    "step": "--step",
    "table": "--table",
}


def _flag(field: str) -> str:
    """The flag a request field came from: ``model.layers`` -> ``--layers``."""
    return _REGISTER_FIELDS.get(field, "--" + field.rsplit(".", maxsplit=1)[-1].replace("_", "-"))


def register(
    job: str, values: dict[str, Any], config: PlanConfig, table: str | None, step: int, as_json: bool
) -> None:
    """Write the plan request of ``job`` (``<backend>#<native id>``) and say what was registered; exit 1
    naming the flag on bad input."""
    from osprey.cli.jobs import _table_name  # noqa: PLC0415 - boto3/SSM only for --register-job
    from osprey.planning import PlanRequestError, request_planning  # noqa: PLC0415
    from osprey_control.planner import CLUSTER_KEYS, MODEL_KEYS  # noqa: PLC0415

    if config.evaluate is None:
        raise usage_exit(
            ["--evaluate: --register-job needs the plan the job runs now, e.g. tp=8,pp=1,micro_batch=1"]
        )
    if "#" not in job.strip("#"):
        raise usage_exit(
            [f"--register-job: expected <backend>#<native id> (e.g. batch#<job id>), got {job!r}"]
        )
    model = {key: value for key, value in values.items() if key in MODEL_KEYS}
    cluster = {key: value for key, value in values.items() if key in CLUSTER_KEYS}
    try:
        item = request_planning(
            model,
            cluster,
            config.evaluate,
            step=step,
            max_virtual=config.options.max_virtual if values.get("max-virtual") is not None else None,
            job_key=job,
            table=_table_name(table),
            environ={},
        )
    except PlanRequestError as problems:
        raise usage_exit(
            [
                f"{_flag(e.field)}: {e.message.replace('max_virtual', '--max-virtual')}"
                for e in problems.errors
            ]
        ) from None
    except Exception as error:
        fail([f"--register-job {job}: cannot write the plan request ({type(error).__name__}: {error})"])
    if as_json:
        typer.echo(json.dumps({"registered": job, "current": config.evaluate.to_dict(), "step": step}))
        return
    plan = config.evaluate
    typer.echo(
        f"registered {job} for planning: {plan.tp}x{plan.pp}x{plan.dp} b{plan.micro_batch} v{plan.virtual} "
        f"since step {step} ({item['sk']['S']} in the registry)"
    )
