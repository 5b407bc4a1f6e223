"""A deliberately small YAML reader for policy files.

It accepts the safe subset only: no explicit tags (``!!python/object``, ``!Ref``, ``!!binary``), no anchors or
aliases (which is also what makes billion-laughs documents harmless), no duplicate keys, string keys only,
bounded nesting. Timestamps stay strings. Every problem is reported as :class:`UnsafeYamlError` with the field
path when one is known, else the line and column.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from osprey_control.policy.yaml_errors import UnsafeYamlError

__all__ = ["read_documents"]

MAX_NESTING = 32
_STR_TAG = "tag:yaml.org,2002:str"


def _position(mark: Any) -> str:
    if mark is None:
        return "(document)"
    return f"line {mark.line + 1}, column {mark.column + 1}"


class _SafeSubsetLoader(yaml.SafeLoader):
    """SafeLoader that refuses tags, anchors and aliases while composing, and tracks nesting depth."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self.document_index = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            raise UnsafeYamlError(
                self.document_index,
                _position(event.start_mark),
                f"aliases (*{event.anchor}) are not allowed; write the value out in full",
            )
        if isinstance(event, NodeEvent) and event.anchor is not None:
            raise UnsafeYamlError(
                self.document_index,
                _position(event.start_mark),
                f"anchors (&{event.anchor}) are not allowed; write the value out in full",
            )
        if isinstance(event, ScalarEvent | CollectionStartEvent) and event.tag not in (None, "!"):
            raise UnsafeYamlError(
                self.document_index,
                _position(event.start_mark),
                f"explicit YAML tags ({event.tag}) are not allowed; use plain YAML values",
            )
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise UnsafeYamlError(
                    self.document_index,
                    _position(event.start_mark),
                    f"nesting deeper than {MAX_NESTING} levels is not allowed",
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# Dates and times stay strings: a policy has no timestamp fields, and a converted date would only
# produce a confusing type error later.
_SafeSubsetLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_keys(node: Node, path: str, document: int) -> None:
    """Reject duplicate and non-string keys, naming the path of the offending mapping."""
    if isinstance(node, MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag == "tag:yaml.org,2002:merge":
                raise UnsafeYamlError(
                    document,
                    path or _position(key_node.start_mark),
                    "merge keys (<<) are not allowed; write the fields out in full",
                )
            if not isinstance(key_node, ScalarNode) or key_node.tag != _STR_TAG:
                where = f" ({_position(key_node.start_mark)})" if path else ""
                raise UnsafeYamlError(
                    document, path or _position(key_node.start_mark), f"mapping keys must be strings{where}"
                )
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            if key in seen:
                raise UnsafeYamlError(
                    document,
                    child,
                    f"duplicate key '{key}' ({_position(key_node.start_mark)}); each key may appear once",
                )
            seen.add(key)
            _check_keys(value_node, child, document)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _check_keys(item, f"{path}[{index}]", document)


def read_documents(text: str) -> list[tuple[int, Any]]:
    """Parse every document of ``text`` into ``(1-based document number, value)`` pairs.

    Empty documents (nothing, or only ``null``) are dropped. Raises :class:`UnsafeYamlError`.
    """
    documents: list[tuple[int, Any]] = []
    loader: _SafeSubsetLoader | None = None
    document_index = 1
    try:
        # The reader rejects control characters as soon as the loader is built, so that is inside the try.
        loader = _SafeSubsetLoader(text)
        while True:
            loader.document_index = document_index
            if not loader.check_node():
                break
            node = loader.get_node()
            if node is not None:
                _check_keys(node, "", document_index)
                document = loader.construct_document(node)
                if document is not None:
                    documents.append((document_index, document))
            document_index += 1
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise UnsafeYamlError(
            document_index, _position(mark), f"not valid YAML: {error.problem or error}"
        ) from None
    except yaml.YAMLError as error:
        raise UnsafeYamlError(document_index, "(document)", f"not valid YAML: {error}") from None
    except (ValueError, OverflowError) as error:
        # e.g. an integer literal of more digits than Python converts (sys.get_int_max_str_digits()).
        raise UnsafeYamlError(document_index, "(document)", f"value out of range: {error}") from None
    except RecursionError:
        raise UnsafeYamlError(document_index, "(document)", "nesting is too deep") from None
    finally:
        if loader is not None:
            loader.dispose()
    return documents
