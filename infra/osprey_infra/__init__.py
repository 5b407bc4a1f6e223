"""CDK constructs of the Osprey control plane, one construct per module; :mod:`stack` only composes."""

__all__: list[str] = []
