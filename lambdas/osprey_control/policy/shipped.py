"""The policies Osprey ships (``policies/`` in the repository), readable from an installed package.

``bundled`` is a link to the repository's ``policies/`` directory: the wheel copies its files in as package data,
so ``pip install osprey-aws`` carries them, and a checkout (editable install) reads the very files ``cdk deploy``
deploys. Nothing here looks outside the package.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_POLICY_NAME", "shipped_policy_dir", "shipped_policy_file"]

DEFAULT_POLICY_NAME = "default-policy"
_BUNDLED = Path(__file__).resolve().parent / "bundled"


def shipped_policy_dir(*, examples: bool = False) -> Path:
    """The directory of the shipped policies (``examples=True``: the examples, which are not deployed by default)."""
    directory = _BUNDLED / "examples" if examples else _BUNDLED
    if not directory.is_dir():
        raise FileNotFoundError(
            f"the shipped policies are missing from {directory}: reinstall osprey-aws (they are package data)"
        )
    return directory


def shipped_policy_file(name: str) -> Path:
    """The file of the shipped policy ``name`` (``default-policy`` → ``policies/default-policy.yaml``)."""
    path = shipped_policy_dir() / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in shipped_policy_dir().glob("*.yaml"))
        raise FileNotFoundError(
            f"no shipped policy named {name!r}; the shipped policies are {', '.join(known)}"
        )
    return path
