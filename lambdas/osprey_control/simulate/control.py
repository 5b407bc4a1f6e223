"""The Osprey control plane in the simulator: every cycle, every active job through the production engine.

Each cycle (the policy's ``derivationIntervalSeconds`` unless overridden) every active job's simulated
metrics (:mod:`~osprey_control.simulate.telemetry`) go through :func:`osprey_control.derivation.engine.derive`
with its applied priority, so damping, deadband and rounding are the engine's own. What is written to the
backend follows the production apply rule (:func:`osprey_control.apply.base.prefilter`): a priority is
written when it differs from the one the backend holds, and a new job's first priority is written on its
first cycle. The layered schedulers (:mod:`~osprey_control.simulate.layered`) turn the written priority into
their backend's own value with the production mapping.

Osprey itself never admits, places or preempts anything: the backend does, from the values written.
"""

from __future__ import annotations

import random

from osprey_control.derivation import engine as derivation_engine
from osprey_control.policy import PriorityDerivationPolicy
from osprey_control.simulate.sim import JobRun, Simulator
from osprey_control.simulate.telemetry import job_metrics

__all__ = ["OspreyControl"]


class OspreyControl:
    """Derives and decides what to write; the caller writes it to its backend model."""

    def __init__(
        self,
        policy: PriorityDerivationPolicy,
        *,
        cycle_s: float | None = None,
        noise: float = 3.0,
        seed: int = 0,
    ) -> None:
        self.policy = policy
        self.compiled = derivation_engine.compile_policy(policy)
        self.interval_s = float(cycle_s if cycle_s is not None else policy.spec.derivation_interval_seconds)
        self.noise = noise
        self._rng = random.Random(f"osprey-telemetry/{seed}")
        self._written: set[int] = set()
        self.derivations = 0
        self.writes = 0

    def admit(self, run: JobRun) -> None:
        """A job was submitted: its ``prev`` is the policy's ``initialPriority`` (DESIGN §4)."""
        if run.priority is None:
            run.priority = self.compiled.initial_priority

    def cycle(self, sim: Simulator, now: float) -> list[JobRun]:
        """Derive every active job; return the jobs whose applied priority must be written now."""
        to_write: list[JobRun] = []
        for run in sim.active():
            metrics = job_metrics(run, now, self._rng, self.noise)
            decision = derivation_engine.derive(self.compiled, metrics, run.priority)
            self.derivations += 1
            if decision.priority != run.priority:
                run.priority = decision.priority
                run.priority_changes += 1
                to_write.append(run)
            elif run.index not in self._written:
                to_write.append(run)  # the first cycle writes the initial priority
        for run in to_write:
            self._written.add(run.index)
        self.writes += len(to_write)
        return to_write
