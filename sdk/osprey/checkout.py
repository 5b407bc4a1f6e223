"""Finding the Osprey source checkout, for the commands that deploy or synthesize the CDK app.

``osprey local`` and ``osprey cost`` (without ``--template``) run the CDK app in ``infra/`` and bundle the Lambda
code in ``lambdas/``; neither is part of the installed package (the app is deployed from a clone, as every CDK
app is). Rather than assume the package sits inside a clone, the checkout is looked up: ``$OSPREY_SOURCE``, else
the current directory or one of its parents, else the directory the package was installed from in editable mode.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SOURCE_VARIABLE", "CheckoutNotFoundError", "find_checkout"]

SOURCE_VARIABLE = "OSPREY_SOURCE"
# What makes a directory an Osprey checkout: the CDK app, its config and the Lambda code it bundles.
_MARKERS = ("cdk.json", "infra/app.py", "lambdas/osprey_handlers")


class CheckoutNotFoundError(FileNotFoundError):
    """No Osprey source checkout was found; the message says how to point at one."""


def _is_checkout(directory: Path) -> bool:
    return all((directory / marker).exists() for marker in _MARKERS)


def _candidates(start: Path) -> list[Path]:
    return [start, *start.parents]


def find_checkout(start: Path | None = None) -> Path:
    """The root of the Osprey checkout to deploy from; :class:`CheckoutNotFoundError` if there is none."""
    configured = os.environ.get(SOURCE_VARIABLE)
    if configured:
        root = Path(configured).expanduser().resolve()
        if not _is_checkout(root):
            raise CheckoutNotFoundError(
                f"${SOURCE_VARIABLE}={configured} is not an Osprey checkout (it needs {', '.join(_MARKERS)})"
            )
        return root
    # An editable install's package lives inside its checkout; a wheel's lives in site-packages and finds none.
    for directory in [
        *_candidates((start or Path.cwd()).resolve()),
        *_candidates(Path(__file__).resolve().parent),
    ]:
        if _is_checkout(directory):
            return directory
    raise CheckoutNotFoundError(
        "this command deploys or synthesizes Osprey's CDK app, which lives in the source checkout "
        "(infra/, lambdas/, cdk.json): run it inside a clone of Osprey, or set "
        f"${SOURCE_VARIABLE} to the clone's path"
    )
