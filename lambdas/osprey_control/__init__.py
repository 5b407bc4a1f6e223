"""The Osprey control plane: policy model, derivation engine, and (later) handlers and AWS adapters.

``osprey_control.policy`` and ``osprey_control.derivation`` are pure Python with no AWS import, so the
Lambdas, the CLI, the simulator and the tests all run the same code.
"""

__all__: list[str] = []
