"""The string forms of the ``osprey`` block: environment variables, AWS tags, Kubernetes labels/annotations.

docs/design.md §5 table, plus the decisions taken where it is silent:

===================================  =========================  ================================
environment                          AWS tag                    Kubernetes (label or annotation)
===================================  =========================  ================================
``OSPREY_ENABLED=1``                 ``osprey:enabled=true``    label ``osprey.aws/enabled=true``
``OSPREY_PRIORITY_POLICY``           ``osprey:policy``          label ``osprey.aws/policy``
``OSPREY_CO_SCHEDULE=true|false``    ``osprey:co-schedule``     annotation ``osprey.aws/co-schedule``
``OSPREY_GANG_TIMEOUT`` (seconds)    ``osprey:gang-timeout``    annotation ``osprey.aws/gang-timeout``
``OSPREY_MIN_WORKERS`` (percent)     ``osprey:min-workers``     annotation ``osprey.aws/min-workers``
``OSPREY_INITIAL_PRIORITY`` 0..100   ``osprey:initial-priority`` annotation ``osprey.aws/initial-priority``
``OSPREY_EXPECTED_RUNTIME`` (s)      ``osprey:expected-runtime`` annotation ``osprey.aws/expected-runtime``
===================================  =========================  ================================

- Only fields that are set are written; an absent key means "the policy decides".
- ``enabled`` and ``policy`` are Kubernetes *labels* so that a selector (``osprey.aws/enabled=true``) finds
  managed objects; the rest are annotations. Readers accept every key from either place.
- ``queue`` and ``share_identifier`` are submission parameters: they live on the Batch job itself
  (``jobQueue``, ``shareIdentifier``), not in the environment or tags.
- Reading: ``enabled`` accepts exactly the form's value (``true``; ``1`` for ``OSPREY_ENABLED``) and its
  opt-out (``false``; ``0``), nothing else (:mod:`osprey_control.contract.opt_in`, the one definition of
  opt-in); booleans accept ``true``/``false`` (any case); integers are decimal digits. An explicit opt-out
  means the job is not managed (the reader returns ``None``); any other value is a problem naming the value
  and what to write.
- Strict reading (the default, used by the SDK) also rejects unknown keys in the Osprey namespace (with a
  suggestion) and contract keys without ``enabled``. ``strict=False`` (the control plane's
  :func:`recognise_job`) tolerates both, so a newer SDK's extra key does not make a job unmanaged. In both
  modes an opted-in job with an invalid value raises :class:`OspreyBlockError`.
- Values must be strings, as every service stores them: ``{"OSPREY_MIN_WORKERS": 50}`` is an error
  (``must be a string``), not converted, since SageMaker and Batch would reject the int anyway. Keys Osprey itself writes
  (``osprey:derived-priority``) and the runtime's own variables (:data:`RUNTIME_ENVIRONMENT`) are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from osprey_control.contract.model import (
    FIELD_ALLOWED,
    OspreyBlock,
    OspreyBlockError,
    closest,
    describe_validation_error,
)
from osprey_control.contract.opt_in import OptInState, opt_in, opt_in_value
from osprey_control.wiring import (
    DERIVED_PRIORITY_ANNOTATION,
    DERIVED_PRIORITY_TAG,
    ENABLED_ENV,
    ENABLED_KUBERNETES,
    ENABLED_TAG,
    ENVIRONMENT_PREFIX,
    KUBERNETES_PREFIX,
    METRICS_NAMESPACE_VARIABLE,
    RUNTIME_HOST_VARIABLE,
    RUNTIME_JOB_ID_VARIABLE,
    RUNTIME_POD_NAME_VARIABLE,
    RUNTIME_POD_NAMESPACE_VARIABLE,
    TAG_PREFIX,
)

__all__ = [
    "ENABLED_ENV",
    "ENABLED_KUBERNETES",
    "ENABLED_TAG",
    "ENVIRONMENT",
    "KUBERNETES",
    "RUNTIME_ENVIRONMENT",
    "TAGS",
    "Form",
    "from_environment",
    "from_kubernetes",
    "from_tags",
    "read_fields",
    "recognise_job",
    "tag_list",
    "tags_as_dict",
    "to_environment",
    "to_kubernetes",
    "to_tags",
]

# Variables the in-job runtime reads (osprey.runtime); they are not part of the block.
RUNTIME_ENVIRONMENT = frozenset(
    {
        METRICS_NAMESPACE_VARIABLE,
        RUNTIME_JOB_ID_VARIABLE,
        RUNTIME_HOST_VARIABLE,
        RUNTIME_POD_NAMESPACE_VARIABLE,
        RUNTIME_POD_NAME_VARIABLE,
    }
)

_INTEGER = re.compile(r"^[+-]?[0-9]{1,12}$")


@dataclass(frozen=True)
class _Key:
    field: str
    env: str
    suffix: str
    kind: type


# Order is the order keys are written in.
_KEYS: tuple[_Key, ...] = (
    _Key("priority_derivation_profile", "OSPREY_PRIORITY_POLICY", "policy", str),
    _Key("co_schedule", "OSPREY_CO_SCHEDULE", "co-schedule", bool),
    _Key("gang_timeout", "OSPREY_GANG_TIMEOUT", "gang-timeout", int),
    _Key("required_min_workers", "OSPREY_MIN_WORKERS", "min-workers", int),
    _Key("initial_priority", "OSPREY_INITIAL_PRIORITY", "initial-priority", int),
    _Key("expected_runtime", "OSPREY_EXPECTED_RUNTIME", "expected-runtime", int),
)


@dataclass(frozen=True)
class Form:
    """One string form of the block: how its keys are spelled and what its ``enabled`` value is."""

    name: str
    enabled_key: str
    enabled_value: str
    prefix: str
    ignored: frozenset[str]

    def key(self, field: str) -> str:
        """The key for block field ``field`` in this form."""
        spec = next(spec for spec in _KEYS if spec.field == field)
        if self.prefix == ENVIRONMENT_PREFIX:
            return spec.env
        return self.prefix + spec.suffix

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key of this form, ``enabled`` first."""
        return (self.enabled_key, *(self.key(spec.field) for spec in _KEYS))


ENVIRONMENT = Form(
    "environment", ENABLED_ENV, opt_in_value(ENABLED_ENV), ENVIRONMENT_PREFIX, RUNTIME_ENVIRONMENT
)
TAGS = Form("tags", ENABLED_TAG, opt_in_value(ENABLED_TAG), TAG_PREFIX, frozenset({DERIVED_PRIORITY_TAG}))
KUBERNETES = Form(
    "Kubernetes labels/annotations", ENABLED_KUBERNETES, opt_in_value(ENABLED_KUBERNETES), KUBERNETES_PREFIX,
    frozenset({DERIVED_PRIORITY_ANNOTATION}),
)  # fmt: skip
_KUBERNETES_LABEL_FIELDS = frozenset({"priority_derivation_profile"})


def _text(value: Any) -> str:
    return "true" if value is True else "false" if value is False else str(value)


def _write(form: Form, block: OspreyBlock) -> dict[str, str]:
    values = {form.enabled_key: form.enabled_value}
    for spec in _KEYS:
        value = getattr(block, spec.field)
        if value is not None:
            values[form.key(spec.field)] = _text(value)
    return values


def to_environment(block: OspreyBlock) -> dict[str, str]:
    """``OSPREY_*`` environment variables for ``block``."""
    return _write(ENVIRONMENT, block)


def to_tags(block: OspreyBlock) -> dict[str, str]:
    """``osprey:*`` AWS tags for ``block`` as a ``{key: value}`` mapping (the Batch form)."""
    return _write(TAGS, block)


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """``{key: value}`` → ``[{"Key": key, "Value": value}]`` (the SageMaker form)."""
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def tags_as_dict(tags: Mapping[str, str] | Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    """Accept tags as a mapping or a SageMaker-style ``[{"Key", "Value"}]`` list; return a mapping."""
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        return {str(key): str(value) for key, value in tags.items()}
    result: dict[str, str] = {}
    for tag in tags:
        key = tag.get("Key", tag.get("key"))
        if key is None:
            raise OspreyBlockError([("tags", f"each tag needs a Key (got {dict(tag)!r})")], source="tags")
        result[str(key)] = str(tag.get("Value", tag.get("value", "")))
    return result


def to_kubernetes(block: OspreyBlock) -> tuple[dict[str, str], dict[str, str]]:
    """``(labels, annotations)`` for ``block``: enabled and policy are labels, the rest annotations."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for key, value in _write(KUBERNETES, block).items():
        field = next((spec.field for spec in _KEYS if KUBERNETES.key(spec.field) == key), None)
        is_label = key == ENABLED_KUBERNETES or field in _KUBERNETES_LABEL_FIELDS
        (labels if is_label else annotations)[key] = value
    return labels, annotations


def _not_text(raw: Any) -> str:
    return f"must be a string (got {type(raw).__name__} {raw!r}); write it as {str(raw)!r}"


def _convert(spec: _Key, key: str, raw: str) -> tuple[Any, str | None]:
    text = raw.strip()
    if spec.kind is bool:
        if text.lower() in ("true", "false"):
            return text.lower() == "true", None
        return None, f"invalid value {raw!r}; allowed: true or false"
    if spec.kind is int:
        if _INTEGER.match(text):
            return int(text), None
        return None, f"invalid value {raw!r}; allowed: {FIELD_ALLOWED[spec.field]}"
    return raw, None


def read_fields(
    form: Form, values: Mapping[str, str], *, strict: bool = True
) -> tuple[bool | None, dict[str, Any], list[tuple[str, str]]]:
    """Read one form without building the model: ``(enabled, typed fields, problems)``.

    ``enabled`` is None when the enabled key is absent. Fields are typed (bool/int/str) but not range
    checked; that is the model's job.
    """
    problems: list[tuple[str, str]] = []
    enabled: bool | None = None
    raw_enabled = values.get(form.enabled_key)
    if raw_enabled is not None and not isinstance(raw_enabled, str):
        problems.append((form.enabled_key, _not_text(raw_enabled)))
    elif raw_enabled is not None:
        # The one definition of opt-in (contract.opt_in): exactly the form's value, nothing that lower-cases
        # or strips to it, since IAM and selectors compare exactly.
        state = opt_in(form.enabled_key, raw_enabled)
        if state.state is OptInState.IN:
            enabled = True
        elif state.state is OptInState.OUT:
            enabled = False
        else:
            problems.append((form.enabled_key, state.reason))
    fields: dict[str, Any] = {}
    for spec in _KEYS:
        key = form.key(spec.field)
        if key in values:
            raw = values[key]
            # Environment, tag and label values are strings on every service (SageMaker and Batch
            # reject anything else), so an int here is a mistake to report, not a value to convert.
            value, problem = (None, _not_text(raw)) if not isinstance(raw, str) else _convert(spec, key, raw)
            if problem:
                problems.append((key, problem))
            else:
                fields[spec.field] = value
    if strict:
        known = set(form.keys) | form.ignored
        for key in values:
            if key.startswith(form.prefix) and key not in known:
                hint = closest(key, form.keys)
                suggestion = f"; did you mean '{hint}'?" if hint else ""
                problems.append((key, f"unknown key{suggestion}; allowed keys: {', '.join(form.keys)}"))
    return enabled, fields, problems


def _parse(form: Form, values: Mapping[str, str], *, strict: bool) -> OspreyBlock | None:
    enabled, fields, problems = read_fields(form, values, strict=strict)
    if enabled is False:
        return None
    if enabled is None and form.enabled_key not in values:
        if not (strict and (fields or problems)):
            return None
        problems.append(
            (form.enabled_key, f"missing; set {form.enabled_key}={form.enabled_value} to opt the job in")
        )
    if problems:
        raise OspreyBlockError(problems, source=form.name)
    try:
        return OspreyBlock.model_validate(fields)
    except ValidationError as error:
        given = {spec.field: values.get(form.key(spec.field)) for spec in _KEYS}
        problems = describe_validation_error(error, form.key, given=given)
        raise OspreyBlockError(problems, source=form.name) from None


def from_environment(environment: Mapping[str, str], *, strict: bool = True) -> OspreyBlock | None:
    """The block from ``OSPREY_*`` variables; None when the job has not opted in."""
    return _parse(ENVIRONMENT, environment, strict=strict)


def from_tags(
    tags: Mapping[str, str] | Iterable[Mapping[str, str]] | None, *, strict: bool = True
) -> OspreyBlock | None:
    """The block from ``osprey:*`` tags (a mapping or a SageMaker tag list); None when not opted in."""
    return _parse(TAGS, tags_as_dict(tags), strict=strict)


def from_kubernetes(
    labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None = None, *, strict: bool = True
) -> OspreyBlock | None:
    """The block from ``osprey.aws/*`` labels and annotations; a key in both must agree."""
    merged = dict(labels or {})
    for key, value in (annotations or {}).items():
        if key.startswith(KUBERNETES.prefix) and key in merged and merged[key] != value:
            raise OspreyBlockError(
                [(key, f"label {merged[key]!r} and annotation {value!r} disagree")], source=KUBERNETES.name
            )
        merged[key] = value
    return _parse(KUBERNETES, merged, strict=strict)


def recognise_job(
    *,
    tags: Mapping[str, str] | Iterable[Mapping[str, str]] | None = None,
    environment: Mapping[str, str] | None = None,
    strict: bool = False,
) -> OspreyBlock | None:
    """How the control plane recognises a job: by its tags, or by its environment when only that is set."""
    tag_values = tags_as_dict(tags)
    if ENABLED_TAG in tag_values:
        return from_tags(tag_values, strict=strict)
    if environment is not None:
        return from_environment(environment, strict=strict)
    return None
