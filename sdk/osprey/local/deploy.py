"""Create a synthesized Osprey template's runtime resources directly through the AWS APIs (moto).

Why not CloudFormation: moto's CloudFormation creates state machines that cannot be executed (docs/design.md §9), and
the end-to-end test must not depend on a server. :func:`deploy_template` creates, in dependency order, what a
cycle needs at run time: IAM roles, log groups, the registry table, SQS queues, SSM parameters, the Lambda
functions (the template's ``Handler``, ``Environment``, ``Timeout`` and ``MemorySize``; the code is a
placeholder, :class:`osprey.local.lambdas.InProcessLambdas` runs the real handler) and the state machines, with
every CloudFormation token resolved to the resource created for it (:mod:`osprey.local.template`).
Other resource types (IAM policies, event rules, the schedule, queue policies, event source mappings) are not
created; they get a synthetic name and ARN so that references to them still resolve, and are listed in
:attr:`LocalDeployment.skipped`.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from typing import Any

from osprey.local.template import Physical, Resolver

__all__ = ["deploy_template"]

ClientFactory = Callable[[str], Any]
Creator = Callable[["_Context", str, dict[str, Any]], Physical]

_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9:]+)(?:\.[A-Za-z0-9.]+)?\}")


@dataclass
class LocalDeployment:
    """What :func:`deploy_template` created: physical names per logical id, and what it left out."""

    stack_name: str
    region: str
    account: str
    resources: dict[str, Physical]
    types: dict[str, str]
    skipped: list[str] = field(default_factory=list)

    def of_type(self, resource_type: str) -> dict[str, Physical]:
        return {
            logical_id: self.resources[logical_id]
            for logical_id, kind in self.types.items()
            if kind == resource_type and logical_id not in self.skipped
        }

    def function_by_handler(self, handler: str) -> str:
        """The name of the one function whose ``Handler`` is ``handler`` (``osprey_handlers.derive.handler``)."""
        names = [
            physical.ref
            for physical in self.of_type("AWS::Lambda::Function").values()
            if physical.attributes.get("Handler") == handler
        ]
        if len(names) != 1:
            raise LookupError(f"expected one function with handler {handler!r}, found {names}")
        return names[0]

    def state_machine_arn(self, construct: str = "Cycle") -> str:
        """The ARN of the one state machine whose logical id contains ``construct`` (``Cycle``: the priority
        cycle; ``Gang``: the gang watch)."""
        arns = [
            physical.ref
            for logical_id, physical in self.of_type("AWS::StepFunctions::StateMachine").items()
            if construct in logical_id
        ]
        if len(arns) != 1:
            raise LookupError(f"expected one {construct} state machine, found {arns}")
        return arns[0]


@dataclass
class _Context:
    client: ClientFactory
    resolver: Resolver

    def arn(self, service: str, resource: str, *, region: bool = True) -> str:
        where = self.resolver.region if region else ""
        return f"arn:{self.resolver.partition}:{service}:{where}:{self.resolver.account}:{resource}"


def references(value: Any) -> set[str]:
    """Logical ids (and pseudo parameters) that ``value`` refers to through Ref, GetAtt or Sub."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref":
                found.add(str(item))
            elif key == "Fn::GetAtt":
                found.add(str(item[0] if isinstance(item, list) else str(item).split(".", 1)[0]))
            elif key == "Fn::Sub":
                text = item if isinstance(item, str) else item[0]
                found |= set(_SUB_NAME.findall(str(text)))
                found |= references(item[1] if isinstance(item, list) else None)
            else:
                found |= references(item)
    return found


def _name(props: Mapping[str, Any], key: str, stack: str, logical_id: str, limit: int) -> str:
    return str(props.get(key) or f"{stack}-{logical_id}")[:limit]


def placeholder_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "osprey local: the handler runs in-process (osprey.local.lambdas)\n")
    return buffer.getvalue()


def _role(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "RoleName", ctx.resolver.stack_name, logical_id, 64)
    arn = ctx.client("iam").create_role(
        RoleName=name, AssumeRolePolicyDocument=json.dumps(props.get("AssumeRolePolicyDocument", {}))
    )["Role"]["Arn"]
    return Physical(name, {"Arn": arn, "RoleId": name})


def _log_group(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "LogGroupName", ctx.resolver.stack_name, logical_id, 512)
    ctx.client("logs").create_log_group(logGroupName=name)
    return Physical(name, {"Arn": ctx.arn("logs", f"log-group:{name}:*")})


def _table(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "TableName", ctx.resolver.stack_name, logical_id, 255)
    dynamodb = ctx.client("dynamodb")
    request: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    arn = dynamodb.create_table(**request)["TableDescription"]["TableArn"]
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    return Physical(name, {"Arn": arn})


def _queue(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "QueueName", ctx.resolver.stack_name, logical_id, 80)
    sqs = ctx.client("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return Physical(url, {"Arn": arn, "QueueName": name, "QueueUrl": url})


def _parameter(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "Name", ctx.resolver.stack_name, logical_id, 2048)
    ctx.client("ssm").put_parameter(
        Name=name, Value=str(props["Value"]), Type=str(props.get("Type", "String")), Overwrite=True
    )
    return Physical(name, {"Type": str(props.get("Type", "String")), "Value": str(props["Value"])})


def _function(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "FunctionName", ctx.resolver.stack_name, logical_id, 64)
    environment = {
        str(key): str(value) for key, value in (props.get("Environment", {}).get("Variables") or {}).items()
    }
    arn = ctx.client("lambda").create_function(
        FunctionName=name,
        Runtime=props.get("Runtime", "python3.12"),
        Role=props["Role"],
        Handler=props["Handler"],
        Code={"ZipFile": placeholder_zip()},
        Description=str(props.get("Description", "")),
        Timeout=int(props.get("Timeout", 3)),
        MemorySize=int(props.get("MemorySize", 128)),
        Environment={"Variables": environment},
    )["FunctionArn"]
    return Physical(name, {"Arn": arn, "Handler": str(props["Handler"])})


def _state_machine(ctx: _Context, logical_id: str, props: dict[str, Any]) -> Physical:
    name = _name(props, "StateMachineName", ctx.resolver.stack_name, logical_id, 80)
    definition = props.get("DefinitionString")
    if definition is None:
        definition = json.dumps(props["Definition"])
    arn = ctx.client("stepfunctions").create_state_machine(
        name=name,
        definition=str(definition),
        roleArn=props["RoleArn"],
        type=props.get("StateMachineType", "STANDARD"),
    )["stateMachineArn"]
    return Physical(arn, {"Arn": arn, "Name": name})


CREATORS: dict[str, Creator] = {
    "AWS::IAM::Role": _role,
    "AWS::Logs::LogGroup": _log_group,
    "AWS::DynamoDB::Table": _table,
    "AWS::SQS::Queue": _queue,
    "AWS::SSM::Parameter": _parameter,
    "AWS::Lambda::Function": _function,
    "AWS::StepFunctions::StateMachine": _state_machine,
}
CREATED_TYPES = frozenset(CREATORS)


def _synthetic(ctx: _Context, logical_id: str, resource_type: str) -> Physical:
    """A name and ARN for a resource that is not created, so that references to it still resolve."""
    name = f"{ctx.resolver.stack_name}-{logical_id}"
    service = resource_type.split("::")[1].lower()
    return Physical(name, {"Arn": ctx.arn(service, name)})


def _order(resources: Mapping[str, Mapping[str, Any]]) -> Iterable[str]:
    graph: dict[str, set[str]] = {}
    for logical_id, resource in resources.items():
        depends = resource.get("DependsOn", [])
        depends = [depends] if isinstance(depends, str) else list(depends)
        graph[logical_id] = (references(resource.get("Properties", {})) | set(depends)) & set(resources)
    return TopologicalSorter(graph).static_order()


def deploy_template(
    template: Mapping[str, Any],
    client: ClientFactory,
    *,
    stack_name: str = "Osprey",
    include: Callable[[str, str], bool] | None = None,
) -> LocalDeployment:
    """Create the template's runtime resources (see the module docstring) with clients from ``client``.

    ``include(logical_id, type)`` can leave out resources of a created type (they are then synthetic too).
    """
    region = str(client("sts").meta.region_name)
    account = str(client("sts").get_caller_identity()["Account"])
    resolver = Resolver(region=region, account=account, stack_name=stack_name)
    ctx = _Context(client, resolver)
    resources: Mapping[str, Mapping[str, Any]] = template.get("Resources", {})
    types = {logical_id: str(resource["Type"]) for logical_id, resource in resources.items()}
    skipped: list[str] = []
    for logical_id in _order(resources):
        resource_type = types[logical_id]
        creator = CREATORS.get(resource_type)
        if creator is None or (include is not None and not include(logical_id, resource_type)):
            resolver.resources[logical_id] = _synthetic(ctx, logical_id, resource_type)
            skipped.append(logical_id)
            continue
        props = resolver.resolve(dict(resources[logical_id].get("Properties", {})), f"Resources.{logical_id}")
        resolver.resources[logical_id] = creator(ctx, logical_id, props)
    return LocalDeployment(stack_name, region, account, dict(resolver.resources), types, skipped)
