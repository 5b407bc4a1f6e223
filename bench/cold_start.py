"""Cold import time of every Lambda handler module, against ``import boto3`` measured in the same run.

Run: ``.venv/bin/python bench/cold_start.py`` (``--repeat N``, default 5).

A Lambda's cold start runs the handler module's imports before the first invocation, so every millisecond here
is added to the first request of every new container. Each measurement is a fresh interpreter (one subprocess
per module per repetition) timing ``import <module>`` alone, interpreter start-up excluded; the median of the
repetitions is reported. One untimed import per module first writes the bytecode cache, so compilation is not
counted (a deployment bundle is imported many times per compile as well). The baseline is ``import boto3``
alone, timed the same way: every handler needs boto3, so ``handler / baseline`` is the price of Osprey's own
imports (pydantic, Powertools, the control-plane modules) on this machine.

Last line: ``handlers=<N> worst_ms=<x> baseline_ms=<y> target_ms=300``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HANDLERS_DIR = REPO_ROOT / "lambdas" / "osprey_handlers"
TARGET_MS = 300
BASELINE = "boto3"
_TIMED_IMPORT = (
    "import importlib, sys, time\n"
    "started = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print((time.perf_counter() - started) * 1000)\n"
)


def handler_modules() -> list[str]:
    """Every public module of ``osprey_handlers`` (what the CDK app points a function's Handler at)."""
    return sorted(
        f"osprey_handlers.{path.stem}" for path in HANDLERS_DIR.glob("*.py") if not path.stem.startswith("_")
    )


def _environment() -> dict[str, str]:
    # As in Lambda: the bundle's root on the path, a region and Powertools' service settings in the environment.
    path = os.pathsep.join(filter(None, [str(REPO_ROOT / "lambdas"), os.environ.get("PYTHONPATH", "")]))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "POWERTOOLS_SERVICE_NAME": "osprey-cold-start",
        "POWERTOOLS_METRICS_NAMESPACE": "/aws/osprey",
    }


def import_ms(module: str, environment: dict[str, str]) -> float:
    """The time ``import module`` takes in a fresh interpreter, in milliseconds."""
    completed = subprocess.run(
        [sys.executable, "-c", _TIMED_IMPORT, module],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"importing {module} failed:\n{completed.stderr.strip()}")
    return float(completed.stdout.strip().splitlines()[-1])


def median_ms(module: str, repeat: int, environment: dict[str, str]) -> tuple[float, list[float]]:
    import_ms(module, environment)  # untimed: writes the bytecode cache
    runs = [import_ms(module, environment) for _ in range(repeat)]
    return statistics.median(runs), runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Cold import time of each Osprey Lambda handler module.")
    parser.add_argument("--repeat", type=int, default=5, help="fresh interpreters per module (median)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    environment = _environment()
    baseline, _ = median_ms(BASELINE, args.repeat, environment)
    print(f"baseline `import {BASELINE}`: {baseline:.1f} ms (median of {args.repeat})")
    modules = handler_modules()
    worst = 0.0
    for module in modules:
        elapsed, runs = median_ms(module, args.repeat, environment)
        worst = max(worst, elapsed)
        verdict = "ok" if elapsed < TARGET_MS else "over target"
        print(
            f"{module}: {elapsed:.1f} ms median (min {min(runs):.1f}, max {max(runs):.1f}); "
            f"{elapsed / max(baseline, 0.01):.2f}x baseline; {verdict}"
        )
    print(f"handlers={len(modules)} worst_ms={worst:.1f} baseline_ms={baseline:.1f} target_ms={TARGET_MS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
