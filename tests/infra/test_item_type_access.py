"""Given the synthesized control plane with every backend, an EKS cluster and a Slurm cluster, when each
function's IAM statements are evaluated for a write to one item of every type in the registry table, then each
function may write exactly the item types it owns: every write statement carries ``dynamodb:LeadingKeys``
(``ForAllValues:StringLike`` on the types' partition-key prefixes), only the lease and finish functions may write
the lease item, and the fenced writers may only ConditionCheck it (issue 28 item 6)."""

from __future__ import annotations

from typing import Any

import pytest

from osprey_control.registry import ITEM_PREFIXES
from tests.infra.iam import DynamoCall, actions, allowed, leading_keys, string_like

LEASE_KEY = "LEASE#cycle"
SHARES_KEY = "SHARES#batch"
WRITES_KEY = "WRITES#cycle"
# One partition key of each item type (docs/registry.md "Items"): what a write would name.
ITEM_KEYS = {
    "job": "JOB#batch#j-1",
    "decision": "DECISION#batch#j-1",
    "apply outcome": "APPLY#batch#j-1",
    "status": "STATUS#eks#gpu-a/team/train",
    "gang": "GANG#eks#gpu-a/team/train",
    "plan request": "PLANREQ#batch#j-1",
    "plan": "PLAN#batch#j-1",
    "instance link": "INSTANCE#i-0abc",
    "risk": "RISK#i-0abc",
    "collection": "COLLECTION#3",
    "lease": LEASE_KEY,
    "shares": SHARES_KEY,
    "write intent": WRITES_KEY,
}
WRITES = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLUpdate",
    "dynamodb:PartiQLDelete",
)


@pytest.mark.parametrize("module", ["lease", "finish"])
def test_the_lease_and_finish_functions_may_touch_only_the_lease_item(
    statements: dict[str, list[dict[str, Any]]], module: str
) -> None:
    # Given the function's DynamoDB statements
    table = [s for s in statements[module] if any(a.startswith("dynamodb:") for a in actions(s))]
    # Then every one is conditioned on the lease's partition key, so neither can write a job or another item
    assert table
    for statement in table:
        assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [LEASE_KEY]}}


# The item types each function writes, measured: the recorded cycle (test_least_privilege.py), and the code each
# TableAccess names.
PUT, UPDATE, DELETE, CHECK = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)
OWNED = {
    "ingest": {PUT: {"job", "instance link"}, UPDATE: {"risk"}},
    "lease": {UPDATE: {"lease"}},
    "finish": {UPDATE: {"lease"}},
    "shards": {},
    "collect": {PUT: {"collection"}, CHECK: {"lease"}},
    "derive": {PUT: {"job", "decision"}, CHECK: {"lease"}},
    "apply": {
        PUT: {"job", "apply outcome", "shares", "write intent"},
        DELETE: {"shares", "write intent"},
        CHECK: {"lease"},
    },
    "eks_discovery": {PUT: {"job", "instance link", "status"}},
    "slurm_discovery": {PUT: {"job", "instance link", "status"}},
    "gang_watch": {PUT: {"gang"}},
    "plan": {PUT: {"plan"}, UPDATE: {"plan request"}, CHECK: {"lease"}},
}


def test_every_write_statement_names_the_partition_key_prefixes_it_may_touch(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    # Given every function's statements that grant a write on the registry table
    assert set(statements) == set(OWNED)
    for module, found in statements.items():
        for statement in found:
            if not set(WRITES) & actions(statement):
                continue
            # Then each carries a LeadingKeys condition whose patterns are item types' prefixes (or one key)
            condition = leading_keys(statement)
            assert condition is not None, (module, statement)
            operator, patterns = condition
            assert operator == "ForAllValues:StringLike", (module, statement)
            for pattern in patterns:
                assert pattern.removesuffix("*") in ITEM_PREFIXES, (module, pattern)
                assert "*" not in pattern.removesuffix("*"), (module, pattern)


@pytest.mark.parametrize("module", sorted(OWNED))
def test_each_function_writes_only_the_item_types_it_owns(
    statements: dict[str, list[dict[str, Any]]], module: str
) -> None:
    # Given a write of each kind to one item of every type in the table
    for action in WRITES:
        # When the function's statements are evaluated for it (IAM's StringLike on LeadingKeys)
        writable = {
            kind
            for kind, pk in ITEM_KEYS.items()
            if allowed(DynamoCall(action, "table", pk), statements[module])
        }
        # Then exactly the item types it owns are writable, and only by the actions it calls
        assert writable == OWNED[module].get(action, set()), (module, action)


def test_only_the_lease_steps_write_the_lease_and_the_fenced_writers_may_only_check_it(
    statements: dict[str, list[dict[str, Any]]],
) -> None:
    def may(module: str, action: str) -> bool:
        return allowed(DynamoCall(action, "table", LEASE_KEY), statements[module])

    writers = {m for m in statements for a in WRITES if a != CHECK and may(m, a)}
    checkers = {m for m in statements if may(m, CHECK)}
    assert writers == {"lease", "finish"}
    assert checkers == {"collect", "derive", "apply", "plan"}


def test_no_item_type_pattern_matches_another_types_keys() -> None:
    # Given every item type's LeadingKeys pattern (its prefix and *, or its one key)
    patterns = {p if p in (LEASE_KEY, SHARES_KEY, WRITES_KEY) else p + "*" for p in ITEM_PREFIXES}
    # Then each matches the keys of exactly one item type (PLAN#* does not match PLANREQ#...)
    for pattern in patterns:
        matched = {kind for kind, pk in ITEM_KEYS.items() if string_like(pattern, pk)}
        assert len(matched) == 1, (pattern, matched)
