"""Resolving a synthesized template's tokens against created resources: names a user can trace, no tokens left."""

from __future__ import annotations

import pytest

from osprey.local.deploy import references
from osprey.local.template import LocalTemplateError, Physical, Resolver


@pytest.fixture
def resolver() -> Resolver:
    return Resolver(
        region="eu-west-1",
        account="111122223333",
        stack_name="Osprey",
        resources={
            "Table": Physical(
                "osprey-jobs", {"Arn": "arn:aws:dynamodb:eu-west-1:111122223333:table/osprey-jobs"}
            ),
            "Fn": Physical(
                "osprey-derive", {"Arn": "arn:aws:lambda:eu-west-1:111122223333:function:osprey-derive"}
            ),
        },
    )


def test_join_getatt_ref_and_pseudo_parameters_resolve_to_the_created_names(resolver: Resolver) -> None:
    definition = {
        "Fn::Join": [
            "",
            ['{"Resource":"', {"Fn::GetAtt": ["Fn", "Arn"]}, '","Table":"', {"Ref": "Table"}, '"}'],
        ]
    }
    assert resolver.resolve(definition) == (
        '{"Resource":"arn:aws:lambda:eu-west-1:111122223333:function:osprey-derive","Table":"osprey-jobs"}'
    )
    assert resolver.resolve({"Fn::Sub": "cdk-assets-${AWS::AccountId}-${AWS::Region}"}) == (
        "cdk-assets-111122223333-eu-west-1"
    )
    assert resolver.resolve({"Fn::Sub": ["${T}/${Fn.Arn}", {"T": {"Ref": "Table"}}]}) == (
        "osprey-jobs/arn:aws:lambda:eu-west-1:111122223333:function:osprey-derive"
    )
    assert resolver.resolve({"Fn::Select": [1, ["a", {"Ref": "AWS::Partition"}]]}) == "aws"
    # Plain values and nested structures pass through, with tokens inside them resolved
    assert resolver.resolve({"Variables": {"T": {"Ref": "Table"}, "N": "16"}}) == {
        "Variables": {"T": "osprey-jobs", "N": "16"}
    }


def test_an_unresolvable_token_names_its_path_instead_of_leaving_a_token(resolver: Resolver) -> None:
    with pytest.raises(LocalTemplateError, match=r"\$\.Environment\.Ref: Ref 'Queue' names no resource"):
        resolver.resolve({"Environment": {"Ref": "Queue"}})
    with pytest.raises(
        LocalTemplateError, match=r"Fn::GetAtt Table\.StreamArn is not known \(attributes: Arn\)"
    ):
        resolver.resolve({"Fn::GetAtt": ["Table", "StreamArn"]})
    with pytest.raises(LocalTemplateError, match="Fn::If is not supported"):
        resolver.resolve({"Fn::If": ["Cond", "a", "b"]})


def test_references_finds_what_a_resource_depends_on() -> None:
    props = {
        "Role": {"Fn::GetAtt": ["Role", "Arn"]},
        "Env": {"Fn::Sub": ["${Table}-${Queue.Arn}", {"X": {"Ref": "Other"}}]},
    }
    assert references(props) == {"Role", "Table", "Queue", "Other"}
