"""``osprey eks annotate FILE|-``: write a manifest with the ``osprey`` block to stdout. ``osprey eks
admission-policy``: print the admission policy that limits what Osprey may change (docs/eks.md), for
``kubectl apply -f -``.

Multi-document input is allowed: every supported job (batch/v1 Job, kubeflow.org/v1 PyTorchJob,
jobset.x-k8s.io/v1alpha2 JobSet) is annotated, other documents (ConfigMaps, Services, ...) pass through
unchanged. Input without any supported job, unreadable YAML or an invalid block is an error on stderr
with exit code 1.
"""

from __future__ import annotations

from typing import Any

import typer
import yaml

from osprey.cli.block_options import (
    CoScheduleOption,
    ExpectedRuntimeOption,
    GangTimeoutOption,
    InitialPriorityOption,
    MinWorkersOption,
    block_options,
    fail,
    read_source,
)
from osprey.eks import SUPPORTED_KINDS, annotate
from osprey_control.contract import OspreyBlockError

__all__: list[str] = []

eks_app = typer.Typer(
    help="Kubernetes (EKS) manifests: add Osprey labels, annotations and environment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@eks_app.callback()
def _eks() -> None:
    """Kubernetes (EKS) manifests: add Osprey labels, annotations and environment."""


def _is_job(document: Any) -> bool:
    return (
        isinstance(document, dict) and (document.get("apiVersion"), document.get("kind")) in SUPPORTED_KINDS
    )


@eks_app.command("annotate")
def annotate_command(
    source: str = typer.Argument(..., metavar="FILE|-", help="Manifest file, or - for stdin."),
    *,
    policy: str = typer.Option(..., "--policy", "-p", help="Policy name (priority_derivation_profile)."),
    co_schedule: CoScheduleOption = None,
    gang_timeout: GangTimeoutOption = None,
    min_workers: MinWorkersOption = None,
    initial_priority: InitialPriorityOption = None,
    expected_runtime: ExpectedRuntimeOption = None,
    queue: str | None = typer.Option(None, "--queue", help="Kueue LocalQueue (kueue.x-k8s.io/queue-name)."),
    priority_class: str | None = typer.Option(
        None, "--priority-class", help="Kueue WorkloadPriorityClass (kueue.x-k8s.io/priority-class)."
    ),
) -> None:
    """Annotate the jobs in FILE (or stdin); write the YAML to stdout."""
    block = block_options(
        priority_derivation_profile=policy,
        co_schedule=co_schedule,
        gang_timeout=gang_timeout,
        min_workers=min_workers,
        initial_priority=initial_priority,
        expected_runtime=expected_runtime,
        queue=queue,
    )
    name = "<stdin>" if source == "-" else source
    try:
        documents = [document for document in yaml.safe_load_all(read_source(source)) if document is not None]
    except yaml.YAMLError as error:
        raise fail(f"{name}: invalid YAML: {error}") from None
    if not any(_is_job(document) for document in documents):
        kinds = ", ".join(f"{api} {kind}" for api, kind in SUPPORTED_KINDS)
        raise fail(f"{name}: no supported job found; supported: {kinds}")
    output: list[Any] = []
    for index, document in enumerate(documents):
        if not _is_job(document):
            output.append(document)
            continue
        try:
            output.append(annotate(document, priority_class=priority_class, **block))
        except OspreyBlockError as error:
            raise fail(f"{name}: document {index + 1}: {error}") from None
    typer.echo(yaml.safe_dump_all(output, sort_keys=False, explicit_start=len(output) > 1), nl=False)


@eks_app.command("admission")
def admission_policy_command() -> None:
    """Print the admission policy limiting Osprey's writes.

    A ValidatingAdmissionPolicy and its binding (docs/eks.md): Osprey may change only a Workload's
    spec.priority (the gang watch spec.active / suspend), and only on opted-in objects.
    """
    from osprey_control.backends.eks import admission_policy  # noqa: PLC0415 - only this command needs it

    typer.echo(admission_policy(), nl=False)
