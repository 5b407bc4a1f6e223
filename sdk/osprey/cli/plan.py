"""``osprey plan``: choose tp x pp x dp and the micro-batch for a transformer on a cluster, or score one plan.

Every flag has a key of the same name in the ``--config`` YAML file (``global-batch`` or ``global_batch``);
flags override the file. Keys, defaults and the model behind the numbers: docs/planner.md and
``osprey_control.planner.config``.

Output: a table of the top-k plans with the options chosen for each (recompute, sequence parallelism,
distributed optimizer, precision) and the ranking score, or with ``--json`` ``{"best": {...}, "candidates":
[...]}`` (``{"plan": {...}}`` with ``--evaluate``). ``--plot FILE.png`` draws every evaluated plan (throughput
against memory per GPU). ``--measured FILE`` (JSON list or CSV of ``tp, pp, micro_batch[, virtual],
step_time_s`` and optionally the options a plan ran with) fits the cost model to those step times first and
ranks with the fitted model (``"calibration"`` in the JSON). Exit 1 on invalid input (one ``error: WHERE:
message`` line per problem) and when no plan exists (the reason on stderr; ``best`` null in the JSON).

``--register-job BACKEND#NATIVE_ID --evaluate tp=..,pp=..,micro_batch=..`` instead writes the job's plan
request (``sk = PLANREQ``) for the cycle's plan step, as ``osprey.request_planning`` does from inside the job:
the model and cluster flags, the ``--evaluate`` plan as the plan the job runs now, ``--step`` (default 0). The
table is ``--table``, else ``OSPREY_TABLE_NAME``, else ``/osprey/config``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from osprey.cli.errors import usage_exit
from osprey.cli.plan_output import describe, fail, plot_search, print_evaluated, print_search
from osprey.cli.plan_register import register
from osprey_control.planner import (
    Calibration,
    ConfigProblem,
    Evaluation,
    PlanConfig,
    PlanConfigError,
    PlanError,
    evaluate,
    fit,
    measured_from_rows,
    normalise_keys,
    resolve,
    search,
    variants,
)

__all__: list[str] = []


def _read_config(path: Path) -> dict[str, Any]:
    from osprey_control.policy import (  # noqa: PLC0415
        UnsafeYamlError,
        read_documents,
    )

    try:
        documents = read_documents(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise usage_exit([f"--config {path}: cannot read: {error}"]) from None
    except UnsafeYamlError as error:
        fail([f"--config {path}: {error.location}: {error.message}"])
    if len(documents) != 1:
        fail([f"--config {path}: expected one YAML document (a mapping of keys), found {len(documents)}"])
    values, errors = normalise_keys(documents[0][1])
    if errors:
        fail([f"{path}: {e.key}: {e.message}" for e in errors])
    return values


def _where(error: ConfigProblem, flags: set[str], config: Path | None) -> str:
    if error.key in flags or config is None:
        return f"--{error.key}"
    return f"{config}: {error.key}"


def _read_measured(path: Path, config: PlanConfig) -> Calibration:
    """Fit the cost model to the measured step times in ``path`` (JSON list or CSV with a header)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise usage_exit([f"--measured {path}: cannot read: {error}"]) from None
    rows: Any
    if text.lstrip().startswith(("[", "{")):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            fail([f"--measured {path}: not valid JSON: {error}"])
        if not isinstance(rows, list):
            fail([f"--measured {path}: expected a JSON list of measured plans"])
    else:
        rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    if not rows:
        fail([f"--measured {path}: no measured plans (tp, pp, micro_batch, step_time_s per row)"])
    try:
        measured = measured_from_rows(rows, config.model, config.cluster.gpus)
        return fit(measured, config.cluster, config.options.efficiency)
    except (ValueError, PlanError) as error:
        fail([f"--measured {path}: {error}"])


def _best_variant(config: PlanConfig, efficiency: Any) -> Evaluation:
    """The evaluated plan under the best of the options left to the search (each fixed option as given)."""
    plan = config.evaluate
    if plan is None:
        raise PlanError("no plan to evaluate")
    options = config.options
    found = [
        evaluate(
            variant,
            config.cluster,
            plan,
            memory_headroom=options.memory_headroom,
            efficiency=efficiency,
        )
        for variant in variants(config.model, config.cluster, options.knobs, plan.tp, plan.dp)
    ]
    fitting = [e for e in found if e.feasible] or found
    return max(fitting, key=lambda e: (e.feasible, e.score))


def _show_help(context: typer.Context, value: bool) -> None:
    if value:
        typer.echo(context.get_help())
        raise typer.Exit(0)


_SWITCH = "on|off|any"


def plan_command(
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help="YAML file with the same keys as the flags (flags win)."
        ),
    ] = None,
    layers: Annotated[int | None, typer.Option("--layers", metavar="N", help="Transformer blocks.")] = None,
    hidden: Annotated[int | None, typer.Option("--hidden", metavar="N", help="Hidden size.")] = None,
    heads: Annotated[int | None, typer.Option("--heads", metavar="N", help="Attention heads.")] = None,
    seq: Annotated[int | None, typer.Option("--seq", metavar="N", help="Sequence length.")] = None,
    vocab: Annotated[int | None, typer.Option("--vocab", metavar="N", help="Vocabulary size.")] = None,
    global_batch: Annotated[
        int | None, typer.Option("--global-batch", metavar="N", help="Samples per step.")
    ] = None,
    gpus: Annotated[
        int | None, typer.Option("--gpus", metavar="N", help="GPUs of the job (whole nodes).")
    ] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option("--gpus-per-node", metavar="N", help="Default: the instance type's, or 8.")
    ] = None,
    instance_type: Annotated[
        str | None,
        typer.Option(
            "--instance-type",
            metavar="TYPE",
            help="p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge or p6-b200.48xlarge.",
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", metavar="NAME", help="V100, A100-40GB, A100-80GB, H100, H200 or B200."),
    ] = None,
    peak_tflops: Annotated[
        float | None, typer.Option("--peak-tflops", metavar="X", help="16-bit dense peak TFLOP/s per GPU.")
    ] = None,
    peak_tflops_fp8: Annotated[
        float | None, typer.Option("--peak-tflops-fp8", metavar="X", help="FP8 dense peak TFLOP/s per GPU.")
    ] = None,
    gpu_memory_gib: Annotated[
        float | None, typer.Option("--gpu-memory-gib", metavar="X", help="Memory per GPU, GiB.")
    ] = None,
    hbm_gbytes: Annotated[
        float | None, typer.Option("--hbm-gbytes", metavar="X", help="Memory bandwidth per GPU, GB/s.")
    ] = None,
    nvlink_gbytes: Annotated[
        float | None, typer.Option("--nvlink-gbytes", metavar="X", help="NVLink GB/s per GPU, one direction.")
    ] = None,
    network_gbits: Annotated[
        float | None, typer.Option("--network-gbits", metavar="X", help="Network Gb/s per node.")
    ] = None,
    recompute: Annotated[
        str | None,
        typer.Option("--recompute", metavar="MODE", help="none, selective, full or any (default: any)."),
    ] = None,
    sequence_parallel: Annotated[
        str | None, typer.Option("--sequence-parallel", metavar=_SWITCH, help="Default: any.")
    ] = None,
    optimizer_sharding: Annotated[
        str | None,
        typer.Option(
            "--optimizer-sharding",
            metavar="MODE",
            help="none, zero1 (the distributed optimizer) or any (default: any).",
        ),
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option(
            "--precision", metavar="P", help="bf16, fp16, fp8 or any (bf16 and, where the GPU has it, fp8)."
        ),
    ] = None,
    flash_attention: Annotated[
        str | None, typer.Option("--flash-attention", metavar="on|off", help="Fused attention (default: on).")
    ] = None,
    comm_overlap: Annotated[
        str | None,
        typer.Option(
            "--comm-overlap", metavar="on|off", help="Overlapped tp and dp communication (default: on)."
        ),
    ] = None,
    tied_embeddings: Annotated[
        str | None,
        typer.Option(
            "--tied-embeddings", metavar="on|off", help="Output layer shares the embedding (default: on)."
        ),
    ] = None,
    ffn_hidden: Annotated[
        int | None, typer.Option("--ffn-hidden", metavar="N", help="MLP inner width (default: 4 x hidden).")
    ] = None,
    kv_heads: Annotated[
        int | None,
        typer.Option(
            "--kv-heads", metavar="N", help="Key/value heads, grouped-query attention (default: heads)."
        ),
    ] = None,
    gated_mlp: Annotated[
        str | None,
        typer.Option("--gated-mlp", metavar="on|off", help="Gated MLP, SwiGLU as in Llama (default: off)."),
    ] = None,
    memory_headroom: Annotated[
        float | None,
        typer.Option("--memory-headroom", metavar="X", help="Usable fraction of GPU memory (default: 0.9)."),
    ] = None,
    top: Annotated[
        int | None, typer.Option("--top", metavar="N", help="Candidates to show (default: 5).")
    ] = None,
    max_virtual: Annotated[
        int | None,
        typer.Option(
            "--max-virtual",
            metavar="V",
            help="Pipeline chunks per GPU the training code runs; 1: no interleaved schedule (default: 8).",
        ),
    ] = None,
    evaluate_plan: Annotated[
        str | None,
        typer.Option(
            "--evaluate", metavar="PLAN", help="Score one plan: tp=T,pp=P,micro_batch=B[,virtual=V]."
        ),
    ] = None,
    measured: Annotated[
        Path | None,
        typer.Option(
            "--measured",
            metavar="FILE",
            help="Measured step times per plan (JSON or CSV): fit the model to them, then rank.",
        ),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", metavar="FILE", help="Draw the search space to a PNG file.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", metavar="", help="Print JSON instead of a table.")
    ] = False,
    register_job: Annotated[
        str | None,
        typer.Option(
            "--register-job",
            metavar="BACKEND#ID",
            help="Write this job's plan request, with --evaluate as its current plan.",
        ),
    ] = None,
    table: Annotated[
        str | None,
        typer.Option(
            "--table", metavar="NAME", help="Registry table for --register-job (default: OSPREY_TABLE_NAME)."
        ),
    ] = None,
    step: Annotated[
        int | None,
        typer.Option("--step", metavar="N", help="Training step of --register-job's plan (default: 0)."),
    ] = None,
    _help: Annotated[
        bool,
        typer.Option(
            "--help",
            metavar="",
            is_eager=True,
            expose_value=True,
            callback=_show_help,
            help="Show this message and exit.",
        ),
    ] = False,
) -> None:
    """Recommend a parallel plan (tp, pp, dp, micro-batch, virtual stages, recompute, sequence parallelism,
    distributed optimizer, precision), or score one with --evaluate. Exits 1 when no plan exists, saying why."""
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
        "peak-tflops-fp8": peak_tflops_fp8,
        "gpu-memory-gib": gpu_memory_gib,
        "hbm-gbytes": hbm_gbytes,
        "nvlink-gbytes": nvlink_gbytes,
        "network-gbits": network_gbits,
        "recompute": recompute,
        "sequence-parallel": sequence_parallel,
        "precision": precision,
        "optimizer-sharding": optimizer_sharding,
        "flash-attention": flash_attention,
        "comm-overlap": comm_overlap,
        "tied-embeddings": tied_embeddings,
        "ffn-hidden": ffn_hidden,
        "kv-heads": kv_heads,
        "gated-mlp": gated_mlp,
        "memory-headroom": memory_headroom,
        "top": top,
        "max-virtual": max_virtual,
        "evaluate": evaluate_plan,
    }
    values = _read_config(config_file) if config_file is not None else {}
    given = {key for key, value in flags.items() if value is not None}
    values.update({key: flags[key] for key in given})
    if plot is not None and plot.suffix.lower() != ".png":
        raise usage_exit([f"--plot {plot}: the file name must end in .png"])
    try:
        config = resolve(values)
    except PlanConfigError as problems:
        lines = [f"{_where(e, given, config_file)}: {e.message}" for e in problems.errors]
        if all(line.startswith("--") for line in lines):
            raise usage_exit(lines) from None  # only the flags are wrong: a usage error
        fail(lines)  # the --config file's values are: the file's error
    if step is not None and step < 0:
        raise usage_exit([f"--step: must be a non-negative integer, got {step}"])
    if register_job is not None:
        register(register_job, values, config, table, step or 0, as_json)
        return

    calibration = _read_measured(measured, config) if measured is not None else None
    options = config.options
    if calibration is not None:
        options = dataclasses.replace(options, efficiency=calibration.efficiency)
        config = dataclasses.replace(config, options=options)
    marked: Evaluation | None = None
    if config.evaluate is not None:
        try:
            marked = _best_variant(config, options.efficiency)
        except PlanError as error:
            line = f"{_where(ConfigProblem('evaluate', ''), given, config_file)}: {error}"
            raise (usage_exit([line]) if line.startswith("--") else fail([line])) from None
    result = search(config.model, config.cluster, options, keep_all=plot is not None)
    if plot is not None:
        try:
            plot_search(result, plot, title=describe(config), marked=marked)
        except OSError as error:
            fail([f"--plot {plot}: cannot write: {error}"])
    if marked is not None:
        extra = {"calibration": calibration.to_dict()} if calibration is not None else {}
        print_evaluated(config, marked, result, extra, as_json)
        return
    print_search(config, result, calibration, plot, as_json)
