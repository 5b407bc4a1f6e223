"""EventBridge rules for the job and instance events the ingest Lambda reads, delivered through SQS.

SQS between EventBridge and the function gives batching, partial-batch retries (the handler reports failed
records) and a dead-letter queue for events that keep failing, instead of EventBridge's fire-and-forget
invocation.

The queue's policy denies ``sqs:SendMessage`` to every sender but the three rules (``aws:SourceArn``): an IAM
principal of the account that may send to any queue still cannot feed ingest forged job events.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from osprey_control.wiring import EVENT_SOURCES

__all__ = ["EVENT_PATTERNS", "EventIngestion"]


def _by_source(sources: Mapping[str, str]) -> dict[str, list[str]]:
    patterns: dict[str, list[str]] = {}
    for detail_type, source in sources.items():
        patterns.setdefault(source, []).append(detail_type)
    return patterns


# source → detail-types: exactly what osprey_control.ingest parses (one rule per source).
EVENT_PATTERNS: dict[str, list[str]] = _by_source(EVENT_SOURCES)
MAX_RECEIVES = 5


class EventIngestion(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, ingest: lambda_.IFunction, ingest_timeout_seconds: int
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.queue = sqs.Queue(
            self,
            "Events",
            # AWS's guidance for Lambda event sources: at least six times the function timeout.
            visibility_timeout=cdk.Duration.seconds(6 * ingest_timeout_seconds),
            retention_period=cdk.Duration.days(4),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVES
            ),
        )
        self.rules: list[events.Rule] = []
        for source, detail_types in EVENT_PATTERNS.items():
            rule = events.Rule(
                self,
                source.replace("aws.", "").capitalize() + "Events",
                description=f"Osprey: {', '.join(detail_types)}",
                event_pattern=events.EventPattern(source=[source], detail_type=detail_types),
            )
            rule.add_target(targets.SqsQueue(self.queue))
            self.rules.append(rule)
        # The rule targets add Allow statements for events.amazonaws.com; an identity policy could still allow
        # anyone else in the account. An explicit Deny wins over both. A request without aws:SourceArn (any
        # direct SendMessage) matches ArnNotEquals, so it is denied too.
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyOspreyEventRulesSend",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sqs:SendMessage"],
                resources=[self.queue.queue_arn],
                conditions={"ArnNotEquals": {"aws:SourceArn": [rule.rule_arn for rule in self.rules]}},
            )
        )
        ingest.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=10,
                max_batching_window=cdk.Duration.seconds(5),
                report_batch_item_failures=True,
            )
        )
