"""Processes a test fixture started, found again by a marker in their environment (tests/slurm, tests/k8s)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["marked_processes"]


def marked_processes(variable: str, value: str) -> list[int]:
    """Live (not zombie) processes other than this one whose environment holds ``variable=value``: whatever a
    fixture started, including what those started in turn, since children inherit the environment."""
    marker = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found
