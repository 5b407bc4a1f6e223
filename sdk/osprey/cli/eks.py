"""``osprey eks annotate FILE|-``: write a manifest with the ``osprey`` block to stdout.

Multi-document input is allowed: every supported job (batch/v1 Job, kubeflow.org/v1 PyTorchJob,
jobset.x-k8s.io/v1alpha2 JobSet) is annotated, other documents (ConfigMaps, Services, ...) pass through
unchanged. Input without any supported job, unreadable YAML or an invalid block is an error on stderr
with exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from osprey.eks import SUPPORTED_KINDS, annotate
from osprey_control.contract import OspreyBlockError

__all__ = ["annotate_command", "eks_app"]

eks_app = typer.Typer(
    help="Kubernetes (EKS) manifests: add Osprey labels, annotations and environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@eks_app.callback()
def _eks() -> None:
    """Kubernetes (EKS) manifests: add Osprey labels, annotations and environment."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _fail(f"{source}: cannot read: {error}") from None


def _is_job(document: Any) -> bool:
    return (
        isinstance(document, dict) and (document.get("apiVersion"), document.get("kind")) in SUPPORTED_KINDS
    )


@eks_app.command("annotate")
def annotate_command(
    source: str = typer.Argument(..., metavar="FILE|-", help="Manifest file, or - for stdin."),
    *,
    policy: str = typer.Option(..., "--policy", "-p", help="Policy name (priority_derivation_profile)."),
    co_schedule: bool | None = typer.Option(
        None, "--co-schedule/--no-co-schedule", help="Gang-schedule the job (default: the policy decides)."
    ),
    gang_timeout: int | None = typer.Option(
        None, "--gang-timeout", help="Gang timeout in seconds, 1..86400."
    ),
    min_workers: int | None = typer.Option(None, "--min-workers", help="Required workers, percent 1..100."),
    initial_priority: int | None = typer.Option(None, "--initial-priority", help="Initial priority 0..100."),
    expected_runtime: int | None = typer.Option(
        None,
        "--expected-runtime",
        help="Your estimate of the job's run time in seconds, 1..2592000 (remaining_time before progress).",
    ),
    queue: str | None = typer.Option(None, "--queue", help="Kueue LocalQueue (kueue.x-k8s.io/queue-name)."),
    priority_class: str | None = typer.Option(
        None, "--priority-class", help="Kueue WorkloadPriorityClass (kueue.x-k8s.io/priority-class)."
    ),
) -> None:
    """Annotate the jobs in FILE (or stdin) and write the YAML to stdout."""
    block: dict[str, Any] = {"priority_derivation_profile": policy}
    optional = {
        "co_schedule": co_schedule,
        "gang_timeout": gang_timeout,
        "required_min_workers": min_workers,
        "initial_priority": initial_priority,
        "expected_runtime": expected_runtime,
        "queue": queue,
    }
    block.update({key: value for key, value in optional.items() if value is not None})
    name = "<stdin>" if source == "-" else source
    try:
        documents = [document for document in yaml.safe_load_all(_read(source)) if document is not None]
    except yaml.YAMLError as error:
        raise _fail(f"{name}: invalid YAML: {error}") from None
    if not any(_is_job(document) for document in documents):
        kinds = ", ".join(f"{api} {kind}" for api, kind in SUPPORTED_KINDS)
        raise _fail(f"{name}: no supported job found; supported: {kinds}")
    output: list[Any] = []
    for index, document in enumerate(documents):
        if not _is_job(document):
            output.append(document)
            continue
        try:
            output.append(annotate(document, priority_class=priority_class, **block))
        except OspreyBlockError as error:
            raise _fail(f"{name}: document {index + 1}: {error}") from None
    typer.echo(yaml.safe_dump_all(output, sort_keys=False, explicit_start=len(output) > 1), nl=False)
