"""Custom rules in the embedded AWS: a user's Lambda function deployed from its source and really invoked.

:func:`deploy_rule` does what a user does (docs/custom-rules.md): zip the handler's source file, create the
function with a name the deployment allows (``osprey-rule-*``), and apply a policy that names its ARN
(:func:`apply_policy`: validated, its custom rules checked against the deployment's allow-list, stored as
the ``<policyPrefix>/<name>`` parameter the derive step reads). The derive step then invokes the function
through Lambda ``Invoke``, as in AWS.

moto runs no function code without Docker, so the code moto holds is run in this process: the handler module
of the zip uploaded is loaded and registered with :class:`~osprey.local.lambdas.InProcessLambdas` under the
function's name, after checking that moto's ``CodeSha256`` is that zip's (the code invoked is the code
deployed; to change it, deploy it again). A rule of one Python file using the standard library is what runs
here; anything it imports from a layer or from other files of its package would have to be importable in this
process too.

The demo (:func:`deploy_demo_rule`) deploys ``examples/rules/spot_risk.py`` as ``osprey-rule-spot`` and applies
``policies/examples/spot-aware-policy.yaml``, whose rule names that function in moto's account and region.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sys
import types
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from osprey.checkout import find_checkout
from osprey.local.lambdas import Handler, InProcessLambdas
from osprey.rollout import apply_rollout, deployed_policies, plan_rollout
from osprey_control.derivation import CustomRuleError, JobMetrics, NodeMetrics, build_event, parse_answer
from osprey_control.policy import (
    DEFAULT_ALLOWED_PREFIX,
    RuleAllowList,
    load_policy_files,
    rule_arn_issues,
    shipped_policy_dir,
)
from osprey_control.wiring import POLICY_PREFIX

__all__: list[str] = []

ClientFactory = Callable[[str], Any]
DEMO_RULE_NAME = "osprey-rule-spot"
DEMO_RULE_SOURCE = Path("examples/rules/spot_risk.py")  # in the checkout
DEMO_POLICY = "spot-aware-policy"
RULE_ROLE = "osprey-local-rule"
CHECK_JOB = "osprey-local-check"  # the job name of check_rule's sample event
_RUNTIME = "python3.12"


class RuleDeployError(RuntimeError):
    """A rule or its policy could not be deployed; the message says which and why."""


def rule_zip(sources: Mapping[str, str]) -> bytes:
    """A deployment package of the files ``sources`` (name in the zip → text), as ``zip -r`` makes it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in sorted(sources.items()):
            archive.writestr(name, text)
    return buffer.getvalue()


def handler_from_zip(code: bytes, spec: str, *, label: str) -> Handler:
    """The function ``spec`` (``module.function``) of the deployment package ``code``: the module's source is
    read from the zip and run as a module of a private name (two rules' ``handler`` modules never collide)."""
    module_name, _, attribute = spec.rpartition(".")
    if not module_name or "." in module_name:
        raise RuleDeployError(f"handler {spec!r}: expected 'module.function' of a file at the zip's root")
    with zipfile.ZipFile(io.BytesIO(code)) as archive:
        if f"{module_name}.py" not in archive.namelist():
            raise RuleDeployError(f"handler {spec!r}: the deployment package has no {module_name}.py")
        source = archive.read(f"{module_name}.py")
    module = types.ModuleType(f"osprey_local_rule_{label.replace('-', '_')}_{module_name}")
    module.__file__ = f"{label}.zip/{module_name}.py"  # what tracebacks of the rule name
    # Registered first, as importlib does: dataclasses and typing look their module up while it runs.
    sys.modules[module.__name__] = module
    # The user's own code, run as the Lambda runtime would import it.
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    function = getattr(module, attribute, None)
    if not callable(function):
        raise RuleDeployError(f"handler {spec!r}: {module_name}.py has no callable {attribute!r}")
    return function  # type: ignore[no-any-return]


def _role(client: ClientFactory) -> str:
    iam = client("iam")
    try:
        return str(iam.get_role(RoleName=RULE_ROLE)["Role"]["Arn"])
    except iam.exceptions.NoSuchEntityException:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = iam.create_role(RoleName=RULE_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        return str(role["Role"]["Arn"])


def deploy_rule(
    client: ClientFactory,
    runtime: InProcessLambdas,
    name: str,
    code: bytes,
    handler: str,
    *,
    timeout_seconds: int = 3,
) -> str:
    """Create the Lambda function ``name`` from the deployment package ``code``; returns its ARN.

    ``runtime`` then runs that package's ``handler`` when the function is invoked (module docstring)."""
    response = client("lambda").create_function(
        FunctionName=name,
        Runtime=_RUNTIME,
        Role=_role(client),
        Handler=handler,
        Code={"ZipFile": code},
        Description="Osprey custom rule",
        Timeout=timeout_seconds,
        MemorySize=128,
    )
    expected = base64.b64encode(hashlib.sha256(code).digest()).decode()
    if response.get("CodeSha256") != expected:
        raise RuleDeployError(f"{name}: Lambda holds other code than the package uploaded")
    runtime.overrides[name] = handler_from_zip(code, handler, label=name)
    return str(response["FunctionArn"])


def apply_policy(
    client: ClientFactory, path: Path, allow: RuleAllowList, *, prefix: str = POLICY_PREFIX
) -> list[str]:
    """Store the policies of ``path`` as the deployment's parameters (what ``osprey policy apply`` does):
    nothing is written unless every policy is valid and every custom rule is one ``allow`` permits."""
    loaded = load_policy_files([path])
    problems = [str(issue) for issue in [*loaded.errors, *rule_arn_issues(loaded.policies, allow)]]
    if problems:
        raise RuleDeployError("cannot apply the policy:\n" + "\n".join(problems))
    ssm = client("ssm")
    apply_rollout(ssm, plan_rollout(loaded.policies, deployed_policies(ssm, prefix), prefix))
    return [item.policy.name for item in loaded.policies]


def check_rule(client: ClientFactory, name: str) -> float:
    """Invoke the rule ``name`` once with a sample event of the contract (``aws lambda invoke``, as a user
    tries a new function); returns its answer, or :class:`RuleDeployError` saying what it answered instead."""
    event = build_event(
        "osprey-local-check",
        JobMetrics(
            "check", (NodeMetrics("i-0", {"gpu_utilization": 90.0}),), backend="batch", name=CHECK_JOB
        ),
        current_priority=50,
        base_priority=80.0,
    )
    response = client("lambda").invoke(FunctionName=name, Payload=json.dumps(event).encode())
    payload = response["Payload"].read()
    if response.get("FunctionError"):
        raise RuleDeployError(f"{name} failed on a sample event: {payload[:300]!r}")
    try:
        return parse_answer(payload)
    except CustomRuleError as error:
        raise RuleDeployError(f"{name} answered a sample event with {payload[:300]!r}: {error}") from None


def deploy_demo_rule(
    client: ClientFactory, runtime: InProcessLambdas, config: Mapping[str, Any], *, region: str, account: str
) -> str:
    """The demo's custom rule: ``examples/rules/spot_risk.py`` as ``osprey-rule-spot`` and the example
    ``spot-aware-policy`` that calls it; returns the function's ARN."""
    source = find_checkout() / DEMO_RULE_SOURCE
    code = rule_zip({source.name: source.read_text()})
    arn = deploy_rule(client, runtime, DEMO_RULE_NAME, code, f"{source.stem}.handler")
    check_rule(client, DEMO_RULE_NAME)
    allow = RuleAllowList.for_deployment(
        str(config.get("allowedRulePrefix") or DEFAULT_ALLOWED_PREFIX), account=account, region=region
    )
    apply_policy(
        client,
        shipped_policy_dir(examples=True) / f"{DEMO_POLICY}.yaml",
        allow,
        prefix=str(config.get("policyPrefix") or POLICY_PREFIX),
    )
    return arn
