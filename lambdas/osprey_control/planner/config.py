"""The planner's inputs as flat key/value pairs: the keys of ``osprey plan`` (flags and its YAML file) and of
any plan job that reads the same document. Values are checked key by key and every problem is reported with
the key and what is allowed, so a user can fix all of them in one go.

Keys (a YAML file may spell them with ``-`` or ``_``):

==================== ======================================================== ===========
key                  meaning                                                  default
==================== ======================================================== ===========
layers, hidden,      model shape (positive integers; ``heads`` divides        required
heads, seq, vocab    ``hidden``)
ffn-hidden           the MLP's inner width (Llama 3 8B: 14336)                4 x hidden
kv-heads             key/value heads (grouped-query attention; divides heads) heads
gated-mlp            on / off: a gated MLP (SwiGLU: gate and up projections)  off
global-batch         samples per step                                         required
gpus                 GPUs of the job (whole nodes)                            required
gpus-per-node        GPUs per node                                            instance / 8
instance-type        an AWS preset (p4d, p4de, p5, p5e, p5en, p6-b200)        -
gpu                  a GPU preset (V100, A100-40GB, A100-80GB, H100, H200,    instance's
                     B200)
peak-tflops          16-bit dense peak per GPU                                GPU's
peak-tflops-fp8      FP8 dense peak per GPU (a custom GPU with FP8)           GPU's
gpu-memory-gib       memory per GPU                                           GPU's
hbm-gbytes           memory bandwidth per GPU, GB/s                           GPU's
nvlink-gbytes        NVLink bandwidth per GPU, one direction, GB/s            GPU's
network-gbits        network bandwidth per node, Gb/s                         instance's
recompute            none / selective / full / any (searched)                 any
sequence-parallel    on / off / any                                           any
optimizer-sharding   none / zero1 (Megatron's distributed optimizer) / any    any
precision            bf16 / fp16 / fp8 / any (bf16, and fp8 where the GPU     bf16
                     has it)
flash-attention      on / off: a fused attention kernel                       on
comm-overlap         on / off: Megatron-Core's tp and dp overlap              on
tied-embeddings      on / off: output projection shares the embedding         on
memory-headroom      usable fraction of GPU memory, (0, 1]                    0.9
top                  candidates reported                                      5
max-virtual          pipeline chunks per GPU the job's training code runs     8
                     (1: no interleaved schedule, e.g. DeepSpeed's pipeline)
evaluate             ``tp=T,pp=P,micro_batch=B[,virtual=V]``: score one plan  -
==================== ======================================================== ===========

Without ``instance-type`` and ``gpu``, ``peak-tflops``, ``gpu-memory-gib``, ``hbm-gbytes``, ``nvlink-gbytes``
and ``network-gbits`` describe a custom GPU. ``any`` lets the search choose; a fixed value is used as given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osprey_control.catalog import GPUS
from osprey_control.planner.hardware import INSTANCE_TYPES, Cluster, cluster
from osprey_control.planner.model import ModelSpec, OptimizerSharding, Precision, Recompute
from osprey_control.planner.plan import Plan
from osprey_control.planner.search import DEFAULT_MAX_VIRTUAL, Knobs, SearchOptions

__all__ = ["ConfigProblem", "PlanConfig", "PlanConfigError", "normalise_keys", "resolve"]

_INT = (
    "layers",
    "hidden",
    "heads",
    "seq",
    "vocab",
    "ffn-hidden",
    "kv-heads",
    "global-batch",
    "gpus",
    "gpus-per-node",
    "top",
    "max-virtual",
)
_FLOAT = ("peak-tflops", "peak-tflops-fp8", "gpu-memory-gib", "hbm-gbytes", "nvlink-gbytes", "network-gbits")
ANY = "any"
_SWITCH = ("on", "off")
_CHOICES: dict[str, tuple[str, ...]] = {
    "instance-type": tuple(INSTANCE_TYPES),
    "gpu": tuple(GPUS),
    "recompute": (*(r.value for r in Recompute), ANY),
    "sequence-parallel": (*_SWITCH, ANY),
    "optimizer-sharding": (*(o.value for o in OptimizerSharding), ANY),
    "precision": (*(p.value for p in Precision), ANY),
    "flash-attention": _SWITCH,
    "comm-overlap": _SWITCH,
    "tied-embeddings": _SWITCH,
    "gated-mlp": _SWITCH,
}
_BOOLEAN_WORDS = {True: "on", False: "off"}
KEYS: tuple[str, ...] = (*_INT, *_FLOAT, *_CHOICES, "memory-headroom", "evaluate")
_REQUIRED = ("layers", "hidden", "heads", "seq", "vocab", "global-batch", "gpus")
_EVALUATE_FIELDS = ("tp", "pp", "micro_batch", "virtual", "dp")


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One bad key: ``key`` as spelled in :data:`KEYS` (or ``(document)``), ``message`` what is allowed."""

    key: str
    message: str


class PlanConfigError(ValueError):
    def __init__(self, errors: list[ConfigProblem]) -> None:
        super().__init__("; ".join(f"{e.key}: {e.message}" for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class PlanConfig:
    model: ModelSpec
    cluster: Cluster
    options: SearchOptions
    evaluate: Plan | None


def normalise_keys(document: Any) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """A YAML/JSON mapping with ``_`` or ``-`` keys → ``{key: value}``; unknown or repeated keys are errors."""
    if not isinstance(document, Mapping):
        return {}, [ConfigProblem("(document)", f"must be a mapping of keys ({', '.join(KEYS)})")]
    values: dict[str, Any] = {}
    errors: list[ConfigProblem] = []
    for raw_key, value in document.items():
        key = str(raw_key).strip().replace("_", "-")
        if key not in KEYS:
            errors.append(ConfigProblem(str(raw_key), f"unknown key; allowed: {', '.join(KEYS)}"))
        elif key in values:
            errors.append(ConfigProblem(str(raw_key), f"given twice (as {key!r} and in another spelling)"))
        else:
            values[key] = value
    return values, errors


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def parse_evaluate(value: Any, gpus: int) -> Plan:
    """``"tp=4,pp=2,micro_batch=1[,virtual=2]"`` (or a mapping of the same) → a Plan with dp = gpus/(tp*pp).
    Raises ValueError saying what is expected."""
    expected = "expected tp=T,pp=P,micro_batch=B[,virtual=V] with positive integers"
    fields: dict[str, Any] = {}
    if isinstance(value, Mapping):
        fields = {str(k).strip().replace("-", "_"): v for k, v in value.items()}
    elif isinstance(value, str):
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, separator, text = part.partition("=")
            name = name.strip().replace("-", "_")
            if not separator or name in fields:
                raise ValueError(f"{part!r}: {expected}")
            fields[name] = text.strip()
    else:
        raise ValueError(expected)
    unknown = sorted(set(fields) - set(_EVALUATE_FIELDS))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}; {expected}")
    numbers: dict[str, int] = {}
    for name in ("tp", "pp", "micro_batch", "virtual", "dp"):
        if name not in fields:
            continue
        number = _integer(fields[name])
        if number is None or number < 1:
            raise ValueError(f"{name}={fields[name]}: {expected}")
        numbers[name] = number
    missing = [name for name in ("tp", "pp", "micro_batch") if name not in numbers]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}; {expected}")
    tp, pp = numbers["tp"], numbers["pp"]
    if gpus % (tp * pp):
        raise ValueError(f"tp*pp = {tp * pp} must divide the {gpus} GPUs")
    dp = gpus // (tp * pp)
    if "dp" in numbers and numbers["dp"] != dp:
        raise ValueError(f"dp={numbers['dp']} but gpus/(tp*pp) = {dp}")
    return Plan(tp=tp, pp=pp, dp=dp, micro_batch=numbers["micro_batch"], virtual=numbers.get("virtual", 1))


def _check_values(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[ConfigProblem]]:
    checked: dict[str, Any] = {}
    errors: list[ConfigProblem] = []
    for key in _REQUIRED:
        if values.get(key) is None:
            errors.append(ConfigProblem(key, "is required (a positive integer)"))
    for key, value in values.items():
        if value is None:
            continue
        if key in _INT:
            number = _integer(value)
            if number is None or number < 1:
                errors.append(ConfigProblem(key, f"must be a positive integer, got {value!r}"))
            else:
                checked[key] = number
        elif key in _FLOAT:
            real = _number(value)
            if real is None or not math.isfinite(real) or real <= 0:
                errors.append(ConfigProblem(key, f"must be a positive number, got {value!r}"))
            else:
                checked[key] = real
        elif key in _CHOICES:
            text = _BOOLEAN_WORDS[value] if isinstance(value, bool) else str(value).strip()
            choices = _CHOICES[key]
            match = next((c for c in choices if c.lower() == text.lower()), None)
            if match is None:
                errors.append(ConfigProblem(key, f"got {value!r}; allowed: {', '.join(choices)}"))
            else:
                checked[key] = match
        elif key == "memory-headroom":
            real = _number(value)
            if real is None or not 0.0 < real <= 1.0:
                errors.append(ConfigProblem(key, f"must be a fraction in (0, 1], e.g. 0.9, got {value!r}"))
            else:
                checked[key] = real
        else:
            checked[key] = value
    given = {key for key, value in values.items() if value is not None}
    custom = ("peak-tflops", "gpu-memory-gib", "hbm-gbytes", "nvlink-gbytes")
    if not given & {"instance-type", "gpu"}:
        missing = [key for key in (*custom, "network-gbits") if key not in given]
        if missing:
            errors.append(
                ConfigProblem(
                    "instance-type",
                    f"give an instance type or a GPU, or describe the GPU fully (missing: {', '.join(missing)})",
                )
            )
    elif "instance-type" not in given and "network-gbits" not in given:
        errors.append(ConfigProblem("network-gbits", "is required without an instance type (Gb/s per node)"))
    return checked, errors


def resolve(values: Mapping[str, Any]) -> PlanConfig:
    """Check every key and build the model, cluster, search options and the plan to evaluate (if any).
    Raises :class:`PlanConfigError` with one entry per problem."""
    checked, errors = _check_values(values)
    model: ModelSpec | None = None
    built: Cluster | None = None
    if not errors:
        if checked["hidden"] % checked["heads"]:
            errors.append(
                ConfigProblem("heads", f"must divide hidden ({checked['hidden']}), got {checked['heads']}")
            )
        kv_heads = checked.get("kv-heads")
        if kv_heads is not None and (kv_heads > checked["heads"] or checked["heads"] % kv_heads):
            errors.append(
                ConfigProblem("kv-heads", f"must divide heads ({checked['heads']}), got {kv_heads}")
            )
        try:
            built = cluster(
                checked["gpus"],
                instance_type=checked.get("instance-type"),
                gpu=checked.get("gpu"),
                gpus_per_node=checked.get("gpus-per-node"),
                peak_tflops=checked.get("peak-tflops"),
                peak_tflops_fp8=checked.get("peak-tflops-fp8"),
                gpu_memory_gib=checked.get("gpu-memory-gib"),
                hbm_gbytes=checked.get("hbm-gbytes"),
                nvlink_gbytes=checked.get("nvlink-gbytes"),
                network_gbits=checked.get("network-gbits"),
            )
        except ValueError as error:
            key = "gpus" if "gpus" in str(error) else "instance-type"
            errors.append(ConfigProblem(key, str(error)))
        if built is not None:
            problem = _resolve_precision(checked, built)
            if problem:
                errors.append(ConfigProblem("precision", problem))
        if not errors:
            model = _model(checked)
    plan: Plan | None = None
    if not errors and "evaluate" in checked:
        try:
            plan = parse_evaluate(checked["evaluate"], checked["gpus"])
        except ValueError as error:
            errors.append(ConfigProblem("evaluate", str(error)))
    if errors or model is None or built is None:
        raise PlanConfigError(errors)
    options = SearchOptions(
        memory_headroom=checked.get("memory-headroom", 0.9),
        top_k=checked.get("top", 5),
        max_virtual=checked.get("max-virtual", DEFAULT_MAX_VIRTUAL),
        knobs=knobs(checked),
    )
    return PlanConfig(model=model, cluster=built, options=options, evaluate=plan)


def _resolve_precision(checked: dict[str, Any], built: Cluster) -> str:
    """Settle ``precision`` against the GPU: the default is bf16, or fp16 on a GPU without bf16; ``any`` is
    the 16-bit default plus fp8 where the GPU has it. Returns a problem ("" when none)."""
    gpu = built.gpu
    sixteen = Precision.BF16.value if gpu.bf16 else Precision.FP16.value
    given = checked.get("precision")
    if given is None:
        checked["precision"] = sixteen
    elif given == Precision.FP8.value and not gpu.has_fp8:
        return f"{gpu.name} has no FP8 tensor cores; allowed here: {sixteen}, fp16, any"
    elif given == Precision.BF16.value and not gpu.bf16:
        return f"{gpu.name} has no bf16 tensor cores; allowed here: fp16, any"
    elif given == ANY:
        checked["precision-choices"] = (sixteen, *((Precision.FP8.value,) if gpu.has_fp8 else ()))
    return ""


def _model(checked: Mapping[str, Any]) -> ModelSpec:
    """The model with fixed options as given; an option left to the search (``any``) takes Megatron's usual
    choice here (selective recompute with sequence parallelism, the distributed optimizer, bf16), which is
    what a single plan (``evaluate``, the running plan of a job) is scored with."""
    recompute = checked.get("recompute", ANY)
    sequence_parallel = checked.get("sequence-parallel", ANY)
    sharding = checked.get("optimizer-sharding", ANY)
    precision = checked.get("precision", Precision.BF16.value)
    if precision == ANY:
        precision = checked.get("precision-choices", (Precision.BF16.value,))[0]
    return ModelSpec(
        layers=checked["layers"],
        hidden=checked["hidden"],
        heads=checked["heads"],
        seq=checked["seq"],
        vocab=checked["vocab"],
        global_batch=checked["global-batch"],
        recompute=Recompute.SELECTIVE if recompute == ANY else Recompute(recompute),
        sequence_parallel=None if sequence_parallel == ANY else sequence_parallel == "on",
        optimizer_sharding=OptimizerSharding.ZERO1 if sharding == ANY else OptimizerSharding(sharding),
        precision=Precision(precision),
        flash_attention=checked.get("flash-attention", "on") == "on",
        comm_overlap=checked.get("comm-overlap", "on") == "on",
        tied_embeddings=checked.get("tied-embeddings", "on") == "on",
        ffn_hidden=checked.get("ffn-hidden"),
        kv_heads=checked.get("kv-heads"),
        gated_mlp=checked.get("gated-mlp", "off") == "on",
    )


def knobs(checked: Mapping[str, Any]) -> Knobs:
    """What the search varies: every value of an option left at ``any``, else the one given."""
    recompute = checked.get("recompute", ANY)
    sequence_parallel = checked.get("sequence-parallel", ANY)
    sharding = checked.get("optimizer-sharding", ANY)
    precision = checked.get("precision", Precision.BF16.value)
    return Knobs(
        recompute=tuple(Recompute) if recompute == ANY else (Recompute(recompute),),
        sequence_parallel=(False, True) if sequence_parallel == ANY else (sequence_parallel == "on",),
        distributed_optimizer=(False, True)
        if sharding == ANY
        else (sharding == OptimizerSharding.ZERO1.value,),
        precision=tuple(
            Precision(p)
            for p in checked.get("precision-choices", (Precision.BF16.value, Precision.FP8.value))
        )
        if precision == ANY
        else (Precision(precision),),
    )
