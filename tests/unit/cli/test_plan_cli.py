"""Given a model and a cluster on the command line (or in a YAML file), when a user runs `osprey plan`, then
they get the planner's best plan and top-k (JSON or a table), the score of one plan with --evaluate, a PNG
of the search space with --plot, and bad input exits 1 naming the flag or key and what is allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from osprey.cli.main import app
from osprey_control.planner import ModelSpec, Plan, cluster, evaluate, search
from osprey_control.planner.config import KEYS, resolve

runner = CliRunner()

# SC21 Table 1's 39.1B row on 512 A100-80GB of p4de.24xlarge.
MODEL_FLAGS = [
    "--layers", "48", "--hidden", "8192", "--heads", "64", "--seq", "2048", "--vocab", "51200",
    "--global-batch", "1536",
]  # fmt: skip
CLUSTER_FLAGS = ["--gpus", "512", "--instance-type", "p4de.24xlarge"]
MODEL = ModelSpec(layers=48, hidden=8192, heads=64, seq=2048, vocab=51200, global_batch=1536)
CLUSTER = cluster(512, instance_type="p4de.24xlarge")
PLAN_FIELDS = {
    "tp", "pp", "dp", "micro_batch", "virtual", "step_time_s", "tflops_per_gpu", "memory_gib_per_gpu",
    "bubble_fraction", "feasible",
}  # fmt: skip


def _run(*args: str) -> Any:
    return runner.invoke(app, ["plan", *args])


def _json(*args: str) -> dict[str, Any]:
    result = _run(*args, "--json")
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_json_best_and_top_k_candidates() -> None:
    # When the user asks for the top 4 plans as JSON
    out = _json(*MODEL_FLAGS, *CLUSTER_FLAGS, "--top", "4")
    # Then best and candidates have the documented shape, best first, all fitting in memory
    assert set(out) == {"best", "candidates"}
    assert len(out["candidates"]) == 4
    assert out["candidates"][0] == out["best"]
    for plan in out["candidates"]:
        assert set(plan) >= PLAN_FIELDS
        assert plan["tp"] * plan["pp"] * plan["dp"] == 512
        assert plan["feasible"] is True
        assert set(plan["breakdown"]) >= {
            "compute_s",
            "tp_comm_s",
            "pp_comm_s",
            "bubble_s",
            "dp_comm_s",
            "memory",
        }
    # And it is exactly the library's answer, with the options the CLI leaves to the search
    config = resolve(
        {
            "layers": 48,
            "hidden": 8192,
            "heads": 64,
            "seq": 2048,
            "vocab": 51200,
            "global-batch": 1536,
            "gpus": 512,
            "instance-type": "p4de.24xlarge",
        }
    )
    best = search(config.model, config.cluster, config.options).best
    assert best is not None
    assert (out["best"]["tp"], out["best"]["pp"], out["best"]["micro_batch"]) == (
        best.plan.tp,
        best.plan.pp,
        best.plan.micro_batch,
    )
    assert (out["best"]["recompute"], out["best"]["distributed_optimizer"]) == (
        best.recompute,
        best.distributed_optimizer,
    )


FIXED_OPTIONS = [
    "--recompute", "full", "--sequence-parallel", "off", "--optimizer-sharding", "none",
    "--flash-attention", "off", "--comm-overlap", "off",
]  # fmt: skip


def test_evaluate_scores_the_given_plan() -> None:
    out = _json(*MODEL_FLAGS, *CLUSTER_FLAGS, *FIXED_OPTIONS, "--evaluate", "tp=8,pp=2,micro_batch=4")
    assert set(out) == {"plan"}
    plan = out["plan"]
    assert set(plan) >= PLAN_FIELDS
    assert (plan["tp"], plan["pp"], plan["dp"], plan["micro_batch"], plan["virtual"]) == (8, 2, 32, 4, 1)
    expected = evaluate(MODEL, CLUSTER, Plan(8, 2, 32, 4))
    assert plan["step_time_s"] == pytest.approx(expected.step_time_s)
    assert plan["tflops_per_gpu"] == pytest.approx(expected.tflops_per_gpu)


def test_evaluate_with_virtual_stages() -> None:
    out = _json(*MODEL_FLAGS, *CLUSTER_FLAGS, "--evaluate", "tp=8,pp=4,micro_batch=1,virtual=2")
    assert (out["plan"]["pp"], out["plan"]["dp"], out["plan"]["virtual"]) == (4, 16, 2)
    assert out["plan"]["bubble_fraction"] == pytest.approx(3 / (2 * 96))


def test_yaml_config_with_flags_overriding(tmp_path: Path) -> None:
    # Given a YAML file with the same keys (either spelling), and a flag that overrides one of them
    config = tmp_path / "plan.yaml"
    config.write_text(
        "layers: 48\nhidden: 8192\nheads: 64\nseq: 2048\nvocab: 51200\nglobal_batch: 1536\n"
        "gpus: 256\ninstance-type: p4de.24xlarge\nrecompute: full\nmemory-headroom: 0.9\ntop: 2\n"
    )
    out = _json("--config", str(config), "--gpus", "512")
    # Then the file supplies the rest and the flag wins
    assert len(out["candidates"]) == 2
    assert out["best"]["tp"] * out["best"]["pp"] * out["best"]["dp"] == 512


def test_explicit_hardware_overrides() -> None:
    # Given a GPU preset with a network and a smaller memory than the preset
    out = _json(
        *MODEL_FLAGS,
        "--gpus", "512", "--gpu", "A100-80GB", "--gpus-per-node", "8", "--network-gbits", "1600",
        "--gpu-memory-gib", "40", "--peak-tflops", "312", "--nvlink-gbytes", "300",
        "--memory-headroom", "0.8", "--recompute", "selective",
    )  # fmt: skip
    # Then the memory limit follows the override
    assert out["best"]["memory_limit_gib"] == pytest.approx(32.0)
    assert out["best"]["memory_gib_per_gpu"] <= 32.0


def test_table_output_lists_the_top_k() -> None:
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--top", "3")
    assert result.exit_code == 0, result.output
    assert "39.1B parameters" in result.stdout
    assert "top 3 of" in result.stdout
    assert "TFLOP/s/GPU" in result.stdout
    assert "MEM GiB" in result.stdout


def test_table_for_an_evaluated_plan_that_does_not_fit() -> None:
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--evaluate", "tp=1,pp=1,micro_batch=1")
    assert result.exit_code == 0, result.output
    assert "does not fit: needs" in result.stdout
    assert "planner's best" in result.stdout


def test_no_plan_fits_gives_best_null_the_reason_and_exit_1() -> None:
    result = _run(
        "--layers", "400", "--hidden", "16384", "--heads", "128", "--seq", "2048", "--vocab", "51200",
        "--global-batch", "64", "--gpus", "8", "--instance-type", "p4d.24xlarge", "--json",
    )  # fmt: skip
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["best"] is None
    assert out["candidates"]
    assert not any(plan["feasible"] for plan in out["candidates"])
    smallest = min(plan["memory_gib_per_gpu"] for plan in out["candidates"])
    assert f"error: no plan fits in memory: the smallest needs {smallest:.1f} GiB per GPU" in result.stderr
    assert "the GPU has 40 GiB (36.0 usable at headroom 0.9)" in result.stderr
    assert out["reason"] in result.stderr


def test_no_data_parallel_size_dividing_the_batch_is_explained() -> None:
    # Given 25 layers (pp 1, 5 or 25), tp up to 8 and 64 GPUs: dp is 64, 32, 16 or 8; the batch is odd
    result = _run(
        "--layers", "25", "--hidden", "2048", "--heads", "16", "--seq", "2048", "--vocab", "51200",
        "--global-batch", "1001", "--gpus", "64", "--instance-type", "p4de.24xlarge",
    )  # fmt: skip
    # Then it exits 1 and says which sizes were possible
    assert result.exit_code == 1
    assert (
        "error: no data-parallel size divides the global batch 1001 for 64 GPUs with tp*pp in {1, 2, 4, 8}; "
        "choose a global batch divisible by one of 64, 32, 16, 8" in result.stderr
    )


def test_table_shows_the_chosen_options_and_the_score() -> None:
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--top", "2")
    assert result.exit_code == 0, result.output
    for header in ("RECOMPUTE", "SP", "DIST-OPT", "PREC", "SCORE"):
        assert header in result.stdout
    out = _json(*MODEL_FLAGS, *CLUSTER_FLAGS, "--top", "2")
    assert out["best"]["score"] >= out["candidates"][1]["score"] > 0
    assert {"recompute", "sequence_parallel", "distributed_optimizer", "precision"} <= set(out["best"])


def test_a_fully_specified_custom_gpu_needs_no_name() -> None:
    custom = [
        "--gpus", "64", "--gpus-per-node", "8", "--peak-tflops", "989", "--gpu-memory-gib", "80",
        "--hbm-gbytes", "3350", "--nvlink-gbytes", "450", "--network-gbits", "3200",
    ]  # fmt: skip
    out = _json(*MODEL_FLAGS[:-1], "512", *custom)
    assert out["best"]["memory_limit_gib"] == pytest.approx(72.0)
    # Leaving out one figure names it
    result = _run(*MODEL_FLAGS, *custom[:-6], *custom[-4:])
    assert result.exit_code == 2
    assert "missing: hbm-gbytes" in result.stderr


def test_fp8_is_searched_only_where_the_gpu_has_it() -> None:
    h100 = _json(
        *MODEL_FLAGS, "--gpus", "512", "--instance-type", "p5.48xlarge", "--precision", "any", "--top", "20"
    )
    assert "fp8" in {plan["precision"] for plan in h100["candidates"]}
    a100 = _json(*MODEL_FLAGS, *CLUSTER_FLAGS, "--precision", "any", "--top", "20")
    assert {plan["precision"] for plan in a100["candidates"]} == {"bf16"}


def test_help_has_no_placeholders_or_backticks() -> None:
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout
    assert "`" not in result.stdout
    assert "…" not in result.stdout


def test_plot_writes_a_png(tmp_path: Path) -> None:
    path = tmp_path / "space.png"
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--plot", str(path))
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_every_key_has_a_flag() -> None:
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "300", "TERM": "dumb"})
    assert result.exit_code == 0
    for key in KEYS:
        assert f"--{key}" in result.stdout, key


def test_max_virtual_keeps_the_search_to_what_the_training_code_runs() -> None:
    # Given GPT-3 175B on 1,024 H100, whose best plan interleaves its pipeline
    gpt3 = ["--layers", "96", "--hidden", "12288", "--heads", "96", "--seq", "2048", "--vocab", "51200",
            "--global-batch", "1536", "--gpus", "1024", "--instance-type", "p5.48xlarge"]  # fmt: skip
    assert _json(*gpt3)["best"]["virtual"] > 1
    # When the user says the job's pipeline has no interleaved schedule
    out = _json(*gpt3, "--max-virtual", "1", "--top", "10")
    # Then no candidate interleaves
    assert {plan["virtual"] for plan in out["candidates"]} == {1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layers", "0"], "--layers: must be a positive integer, got 0"),
        (["--recompute", "half"], "--recompute: got 'half'; allowed: none, selective, full"),
        (["--instance-type", "p3.2xlarge"], "--instance-type: got 'p3.2xlarge'; allowed: p4d.24xlarge"),
        (["--memory-headroom", "1.5"], "--memory-headroom: must be a fraction in (0, 1]"),
        (["--heads", "60"], "--heads: must divide hidden (8192), got 60"),
        (["--gpus", "500"], "--gpus: gpus (500) must be a positive multiple of gpus per node (8)"),
        (["--evaluate", "tp=8,pp=2"], "--evaluate: missing micro_batch"),
        (["--evaluate", "tp=8,pp=3,micro_batch=1"], "--evaluate: tp*pp = 24 must divide the 512 GPUs"),
        (["--evaluate", "tp=8,pp=2,mb=1"], "--evaluate: unknown field 'mb'"),
        (["--evaluate", "tp=16,pp=2,micro_batch=1"], "--evaluate: tp=16 exceeds the 8 GPUs of a node"),
        (["--evaluate", "tp=8,pp=2,micro_batch=5"], "--evaluate: global batch 1536 is not divisible"),
        (["--top", "0"], "--top: must be a positive integer"),
        (["--max-virtual", "0"], "--max-virtual: must be a positive integer"),
        (["--plot", "space.jpg"], "--plot space.jpg: the file name must end in .png"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(args: list[str], message: str) -> None:
    # Given valid flags with one replaced by a bad value (a later flag wins in click)
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, *args)
    # Then it is a usage error (docs/cli.md, Exit codes): exit 2, the flag named
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_missing_required_flags_are_all_reported() -> None:
    result = _run("--gpus", "64", "--gpu", "H100")
    assert result.exit_code == 2
    for key in ("layers", "hidden", "heads", "seq", "vocab", "global-batch"):
        assert f"--{key}: is required" in result.stderr
    assert "--network-gbits: is required without an instance type" in result.stderr


def test_bad_config_file_names_the_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "plan.yaml"
    config.write_text("layers: 48\nhiden: 8192\n")
    result = _run("--config", str(config))
    assert result.exit_code == 1
    assert f"{config}: hiden: unknown key; allowed: layers, hidden" in result.stderr


def test_bad_value_in_config_names_the_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "plan.yaml"
    config.write_text("layers: many\n")
    result = _run("--config", str(config), *MODEL_FLAGS[2:], *CLUSTER_FLAGS)
    assert result.exit_code == 1
    assert f"{config}: layers: must be a positive integer, got 'many'" in result.stderr


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "layers: [\n", "a: 1\n---\nb: 2\n"])
def test_config_that_is_not_one_mapping(tmp_path: Path, text: str) -> None:
    config = tmp_path / "plan.yaml"
    config.write_text(text)
    result = _run("--config", str(config))
    assert result.exit_code == 1
    assert str(config) in result.stderr


def test_register_job_writes_the_plan_request(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3  # noqa: PLC0415
    from moto import mock_aws  # noqa: PLC0415

    from osprey_control.planner.request import REQUEST_SK, request_from_item  # noqa: PLC0415
    from osprey_control.registry.table import create_table  # noqa: PLC0415

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "osprey-jobs")
        # When a user registers a running job for planning with its current plan
        plan = "tp=8,pp=2,micro_batch=4"
        result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, *FIXED_OPTIONS[:2], *FIXED_OPTIONS[4:], "--evaluate", plan, "--register-job", "batch#job-1",
                      "--table", "osprey-jobs", "--step", "120")  # fmt: skip
        # Then the request is in the registry with the flags as the planner's inputs
        assert result.exit_code == 0, result.output
        assert "registered batch#job-1 for planning: 8x2x32 b4 v1 since step 120" in result.stdout
        item = client.get_item(
            TableName="osprey-jobs", Key={"pk": {"S": "PLANREQ#batch#job-1"}, "sk": {"S": REQUEST_SK}}
        )["Item"]
        request = request_from_item(item)
        assert (request.model, request.cluster) == (MODEL, CLUSTER)
        assert (request.current, request.step, request.since_step) == (Plan(8, 2, 32, 4), 120, 120)


def test_register_job_keeps_the_jobs_max_virtual(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3  # noqa: PLC0415
    from moto import mock_aws  # noqa: PLC0415

    from osprey_control.planner.request import REQUEST_SK, request_from_item  # noqa: PLC0415
    from osprey_control.registry.table import create_table  # noqa: PLC0415

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    register = ["--register-job", "batch#job-1", "--table", "osprey-jobs"]
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "osprey-jobs")
        # When a job without an interleaved schedule is registered with --max-virtual 1
        result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--max-virtual", "1", "--evaluate", "tp=8,pp=2,micro_batch=4",
                      *register)  # fmt: skip
        # Then its request carries the limit the plan step searches within
        assert result.exit_code == 0, result.output
        item = client.get_item(
            TableName="osprey-jobs", Key={"pk": {"S": "PLANREQ#batch#job-1"}, "sk": {"S": REQUEST_SK}}
        )["Item"]
        assert request_from_item(item).options.max_virtual == 1
        # And a current plan above the limit exits 1 naming the flags
        result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--max-virtual", "1",
                      "--evaluate", "tp=8,pp=2,micro_batch=1,virtual=2", *register)  # fmt: skip
        assert result.exit_code == 2
        assert "--evaluate: the job runs 2 chunks per GPU, above its --max-virtual 1" in result.stderr


def test_register_job_needs_the_current_plan_and_a_job_key() -> None:
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, "--register-job", "batch#job-1", "--table", "t")
    assert result.exit_code == 2
    assert "error: --evaluate: --register-job needs the plan the job runs now" in result.output
    plan = ["--evaluate", "tp=8,pp=2,micro_batch=4"]
    result = _run(*MODEL_FLAGS, *CLUSTER_FLAGS, *plan, "--register-job", "job-1", "--table", "t")
    assert result.exit_code == 2
    assert "error: --register-job: expected <backend>#<native id>" in result.output


def test_precision_is_checked_against_the_gpu() -> None:
    small = [
        "--layers", "24", "--hidden", "2048", "--heads", "16", "--seq", "2048", "--vocab", "51200",
        "--global-batch", "64", "--gpus", "8",
    ]  # fmt: skip
    # FP8 on an A100 names the flag and what the GPU allows
    result = _run(*small, "--instance-type", "p4de.24xlarge", "--precision", "fp8")
    assert result.exit_code == 2
    assert (
        "error: --precision: A100-80GB has no FP8 tensor cores; allowed here: bf16, fp16, any"
        in result.stderr
    )
    # A V100 has no bf16: the default becomes fp16, and asking for bf16 is refused
    out = _json(*small, "--gpu", "V100", "--network-gbits", "100")
    assert out["best"]["precision"] == "fp16"
    refused = _run(*small, "--gpu", "V100", "--network-gbits", "100", "--precision", "bf16")
    assert refused.exit_code == 2
    assert "error: --precision: V100 has no bf16 tensor cores" in refused.stderr
