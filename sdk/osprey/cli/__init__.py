"""The ``osprey`` command line. Entry point: :func:`osprey.cli.main.main`."""

__all__: list[str] = []
