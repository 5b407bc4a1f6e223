"""``osprey plan``: choose tp x pp x dp and the micro-batch for a transformer on a cluster, or score one plan.

Every flag has a key of the same name in the ``--config`` YAML file (``global-batch`` or ``global_batch``);
flags override the file. Keys, defaults and the model behind the numbers: docs/planner.md and
``osprey_control.planner.config``.

Output: a table of the top-k plans, or with ``--json`` ``{"best": {...}, "candidates": [...]}``
(``{"plan": {...}}`` with ``--evaluate``). ``--plot FILE.png`` draws every evaluated plan (throughput
against memory per GPU). Exit 1 on invalid input (one ``error: WHERE: message`` line per problem).

``--register-job BACKEND#NATIVE_ID --evaluate tp=..,pp=..,micro_batch=..`` instead writes the job's plan
request (``sk = PLANREQ``) for the cycle's plan step, as ``osprey.request_planning`` does from inside the job:
the model and cluster flags, the ``--evaluate`` plan as the plan the job runs now, ``--step`` (default 0). The
table is ``--table``, else ``OSPREY_TABLE_NAME``, else ``/osprey/config``.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from osprey_control.planner import Evaluation, PlanError, SearchResult, evaluate, search
from osprey_control.planner.config import (
    ConfigProblem,
    PlanConfig,
    PlanConfigError,
    normalise_keys,
    resolve,
)

__all__ = ["plan_command", "plot_search"]

_REGISTER_FIELDS = {"current": "--evaluate", "job": "--register-job", "step": "--step", "table": "--table"}


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 200)


def _fail(lines: list[str]) -> NoReturn:
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(1)


def _read_config(path: Path) -> dict[str, Any]:
    from osprey_control.policy.safe_yaml import read_documents  # noqa: PLC0415 - PyYAML only for --config
    from osprey_control.policy.yaml_errors import UnsafeYamlError  # noqa: PLC0415

    try:
        documents = read_documents(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        _fail([f"--config {path}: cannot read: {error}"])
    except UnsafeYamlError as error:
        _fail([f"--config {path}: {error.location}: {error.message}"])
    if len(documents) != 1:
        _fail([f"--config {path}: expected one YAML document (a mapping of keys), found {len(documents)}"])
    values, errors = normalise_keys(documents[0][1])
    if errors:
        _fail([f"{path}: {e.key}: {e.message}" for e in errors])
    return values


def _where(error: ConfigProblem, flags: set[str], config: Path | None) -> str:
    if error.key in flags or config is None:
        return f"--{error.key}"
    return f"{config}: {error.key}"


def _row(rank: str, e: Evaluation) -> list[str]:
    p = e.plan
    return [
        rank,
        str(p.tp),
        str(p.pp),
        str(p.dp),
        str(p.micro_batch),
        str(p.virtual),
        f"{e.step_time_s:.3f}",
        f"{e.tflops_per_gpu:.1f}",
        f"{e.model_flops_utilization:.1%}",
        f"{e.memory_gib_per_gpu:.1f}",
        f"{e.bubble_fraction:.3f}",
        f"{e.compute_s:.2f}",
        f"{e.tp_comm_s:.2f}",
        f"{e.pp_comm_s:.2f}",
        f"{e.bubble_s:.2f}",
        f"{e.dp_exposed_s:.2f}",
        "yes" if e.feasible else "NO",
    ]


def _table(title: str, rows: list[tuple[str, Evaluation]]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    headers = (
        "#",
        "TP",
        "PP",
        "DP",
        "MB",
        "V",
        "STEP s",
        "TFLOP/s/GPU",
        "MFU",
        "MEM GiB",
        "BUBBLE",
        "COMPUTE s",
        "TP s",
        "PP s",
        "BUBBLE s",
        "DP s",
        "FITS",
    )
    for header in headers:
        table.add_column(header, justify="left" if header in {"#", "FITS"} else "right", no_wrap=True)
    for rank, evaluation in rows:
        table.add_row(*_row(rank, evaluation))
    return table


def _describe(config: PlanConfig) -> str:
    m, c = config.model, config.cluster
    return (
        f"{m.params / 1e9:.1f}B parameters ({m.layers} layers, hidden {m.hidden}, {m.heads} heads, seq {m.seq}, "
        f"global batch {m.global_batch}, recompute {m.recompute.value}) on {c.gpus} x {c.gpu.name} "
        f"({c.nodes} nodes of {c.gpus_per_node}, {c.network_gbits:g} Gb/s per node), memory limit "
        f"{c.gpu.memory_gib * config.options.memory_headroom:.1f} GiB per GPU"
    )


def plot_search(result: SearchResult, path: Path, *, title: str, marked: Evaluation | None = None) -> None:
    """Every evaluated plan as throughput against memory per GPU, coloured by pipeline depth; infeasible
    plans hollow, the memory limit dashed, the best plan (and ``marked``) starred."""
    import matplotlib  # noqa: PLC0415 - optional and slow to import: only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    points = result.everything
    figure, axes = plt.subplots(figsize=(9, 6))
    try:
        depths = sorted({e.plan.pp for e in points})
        colours = plt.get_cmap("viridis")
        for index, depth in enumerate(depths):
            colour = colours(index / max(1, len(depths) - 1))
            for feasible in (True, False):
                chosen = [e for e in points if e.plan.pp == depth and e.feasible is feasible]
                if not chosen:
                    continue
                axes.scatter(
                    [e.memory_gib_per_gpu for e in chosen],
                    [e.tflops_per_gpu for e in chosen],
                    s=18,
                    facecolors=colour if feasible else "none",
                    edgecolors=colour,
                    label=f"pp={depth}" if feasible else f"pp={depth}, does not fit",
                )
        if points:
            axes.axvline(points[0].memory_limit_gib, linestyle="--", color="grey", label="memory limit")
        for star, label, star_colour in ((result.best, "best", "red"), (marked, "evaluated", "black")):
            if star is not None:
                axes.scatter(
                    [star.memory_gib_per_gpu],
                    [star.tflops_per_gpu],
                    marker="*",
                    s=220,
                    color=star_colour,
                    label=label,
                )
        axes.set_xscale("log")
        axes.set_xlabel("memory per GPU (GiB, log scale)")
        axes.set_ylabel("predicted TFLOP/s per GPU")
        axes.set_title("\n".join(textwrap.wrap(title, 110)), fontsize=8)
        axes.legend(fontsize=7, loc="best")
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    finally:
        plt.close(figure)


def _register(
    job: str, values: dict[str, Any], config: PlanConfig, table: str | None, step: int, as_json: bool
) -> None:
    """Write the plan request of ``job`` (``<backend>#<native id>``) and say what was registered."""
    from osprey.cli.jobs import _table_name  # noqa: PLC0415 - boto3/SSM only for --register-job
    from osprey.planning import PlanRequestError, request_planning  # noqa: PLC0415
    from osprey_control.planner.request import CLUSTER_KEYS, MODEL_KEYS  # noqa: PLC0415

    if config.evaluate is None:
        _fail(["--evaluate: --register-job needs the plan the job runs now, e.g. tp=8,pp=1,micro_batch=1"])
    if "#" not in job.strip("#"):
        _fail([f"--register-job: expected <backend>#<native id> (e.g. batch#<job id>), got {job!r}"])
    model = {key: value for key, value in values.items() if key in MODEL_KEYS}
    cluster = {key: value for key, value in values.items() if key in CLUSTER_KEYS}
    try:
        item = request_planning(
            model, cluster, config.evaluate, step=step, job_key=job, table=_table_name(table), environ={}
        )
    except PlanRequestError as problems:
        _fail(
            [
                f"{_REGISTER_FIELDS.get(e.field, '--' + e.field.split('.')[-1].replace('_', '-'))}: {e.message}"
                for e in problems.errors
            ]
        )
    except Exception as error:
        _fail([f"--register-job {job}: cannot write the plan request ({type(error).__name__}: {error})"])
    if as_json:
        typer.echo(json.dumps({"registered": job, "current": config.evaluate.to_dict(), "step": step}))
        return
    plan = config.evaluate
    typer.echo(
        f"registered {job} for planning: {plan.tp}x{plan.pp}x{plan.dp} b{plan.micro_batch} v{plan.virtual} "
        f"since step {step} ({item['sk']['S']} in the registry)"
    )


def plan_command(
    config_file: Annotated[
        Path | None, typer.Option("--config", help="YAML file with the same keys as the flags (flags win).")
    ] = None,
    layers: Annotated[int | None, typer.Option("--layers", help="Transformer blocks.")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", help="Hidden size.")] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="Attention heads.")] = None,
    seq: Annotated[int | None, typer.Option("--seq", help="Sequence length.")] = None,
    vocab: Annotated[int | None, typer.Option("--vocab", help="Vocabulary size.")] = None,
    global_batch: Annotated[int | None, typer.Option("--global-batch", help="Samples per step.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs of the job (whole nodes).")] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option("--gpus-per-node", help="Default: instance's, or 8.")
    ] = None,
    instance_type: Annotated[
        str | None,
        typer.Option("--instance-type", help="p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e/p5en."),
    ] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="V100, A100-40GB, A100-80GB, H100, H200.")] = None,
    peak_tflops: Annotated[
        float | None, typer.Option("--peak-tflops", help="16-bit dense peak per GPU.")
    ] = None,
    gpu_memory_gib: Annotated[float | None, typer.Option("--gpu-memory-gib", help="Memory per GPU.")] = None,
    nvlink_gbytes: Annotated[
        float | None, typer.Option("--nvlink-gbytes", help="NVLink GB/s per GPU, one direction.")
    ] = None,
    network_gbits: Annotated[
        float | None, typer.Option("--network-gbits", help="Network Gb/s per node.")
    ] = None,
    recompute: Annotated[str | None, typer.Option("--recompute", help="none, selective or full.")] = None,
    precision: Annotated[str | None, typer.Option("--precision", help="bf16, fp16 or fp8.")] = None,
    optimizer_sharding: Annotated[
        str | None, typer.Option("--optimizer-sharding", help="none or zero1.")
    ] = None,
    memory_headroom: Annotated[
        float | None, typer.Option("--memory-headroom", help="Usable fraction of GPU memory (default 0.9).")
    ] = None,
    top: Annotated[int | None, typer.Option("--top", help="Candidates to show (default 5).")] = None,
    evaluate_plan: Annotated[
        str | None, typer.Option("--evaluate", help="Score one plan: tp=T,pp=P,micro_batch=B[,virtual=V].")
    ] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Draw the search space to FILE.png.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    register_job: Annotated[
        str | None,
        typer.Option(
            "--register-job",
            help="Write this job's plan request (BACKEND#NATIVE_ID) with --evaluate as its current plan.",
        ),
    ] = None,
    table: Annotated[
        str | None,
        typer.Option("--table", help="Registry table for --register-job (default: OSPREY_TABLE_NAME)."),
    ] = None,
    step: Annotated[int, typer.Option("--step", min=0, help="Training step of --register-job's plan.")] = 0,
) -> None:
    """Recommend a parallel plan (tp, pp, dp, micro-batch, virtual stages), or score one with --evaluate."""
    flags = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "seq": seq,
        "vocab": vocab,
        "global-batch": global_batch,
        "gpus": gpus,
        "gpus-per-node": gpus_per_node,
        "instance-type": instance_type,
        "gpu": gpu,
        "peak-tflops": peak_tflops,
        "gpu-memory-gib": gpu_memory_gib,
        "nvlink-gbytes": nvlink_gbytes,
        "network-gbits": network_gbits,
        "recompute": recompute,
        "precision": precision,
        "optimizer-sharding": optimizer_sharding,
        "memory-headroom": memory_headroom,
        "top": top,
        "evaluate": evaluate_plan,
    }
    values = _read_config(config_file) if config_file is not None else {}
    given = {key for key, value in flags.items() if value is not None}
    values.update({key: flags[key] for key in given})
    if plot is not None and plot.suffix.lower() != ".png":
        _fail([f"--plot {plot}: the file name must end in .png"])
    try:
        config = resolve(values)
    except PlanConfigError as problems:
        _fail([f"{_where(e, given, config_file)}: {e.message}" for e in problems.errors])
    options = config.options
    if register_job is not None:
        _register(register_job, values, config, table, step, as_json)
        return

    marked: Evaluation | None = None
    if config.evaluate is not None:
        try:
            marked = evaluate(
                config.model, config.cluster, config.evaluate, memory_headroom=options.memory_headroom
            )
        except PlanError as error:
            _fail([f"{_where(ConfigProblem('evaluate', ''), given, config_file)}: {error}"])
    result = search(config.model, config.cluster, options, keep_all=plot is not None)
    if plot is not None:
        try:
            plot_search(result, plot, title=_describe(config), marked=marked)
        except OSError as error:
            _fail([f"--plot {plot}: cannot write: {error}"])

    if marked is not None:
        if as_json:
            typer.echo(json.dumps({"plan": marked.to_dict()}))
            return
        console = _console()
        console.print(_describe(config))
        console.print(_table("evaluated plan", [("-", marked)]))
        if not marked.feasible:
            console.print(f"does not fit: {marked.reason}")
        if result.best is not None:
            console.print(_table("planner's best, for comparison", [("1", result.best)]))
        return
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
        return
    console = _console()
    console.print(_describe(config))
    title = f"top {len(result.candidates)} of {result.feasible} feasible plans ({result.evaluated} evaluated)"
    if result.best is None:
        title = f"no plan fits in memory; the {len(result.candidates)} needing least memory"
    console.print(_table(title, [(str(i), e) for i, e in enumerate(result.candidates, start=1)]))
    if plot is not None:
        console.print(f"search space drawn to {plot}")
