"""The subset of CEL that Osprey's admission policy uses, evaluated in Python (tests only).

No CEL implementation is installed here, and the API server that runs the policy for real arrives with issue 29;
until then this evaluator checks that the policy's expressions *mean* what docs/eks.md claims. It follows CEL's
semantics for what the policy uses: string and list literals, ``has(a.b)``, field selection and ``[key]`` on maps
(a missing key is an error, as in CEL), ``==`` ``!=`` ``in`` ``+`` ``!`` ``&&`` ``||`` ``? :``, the macros
``all`` and ``exists`` over maps (their keys) and lists, and ``lowerAscii()``. Anything else is a SyntaxError,
so an expression that strays outside the subset fails the test instead of passing untested.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CelError", "evaluate"]

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*')|(?P<op>==|!=|&&|\|\||[!?:.,()\[\]+])|(?P<id>[A-Za-z_]\w*))"
)
Env = Mapping[str, Any]
Node = Callable[[Env], Any]


class CelError(Exception):
    """A CEL evaluation error (no such key, wrong type): the API server treats it as a failed validation."""


def _tokens(text: str) -> list[tuple[str, str]]:
    found, position = [], 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise SyntaxError(f"outside the CEL subset at {text[position : position + 20]!r}")
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        position = match.end()
    return [*found, ("end", "")]


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens, self.at = _tokens(text), 0

    def peek(self) -> str:
        return self.tokens[self.at][1]

    def take(self, expected: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.at]
        if expected is not None and token[1] != expected:
            raise SyntaxError(f"expected {expected!r}, got {token[1]!r}")
        self.at += 1
        return token

    def expression(self) -> Node:
        condition = self.binary(0)
        if self.peek() != "?":
            return condition
        self.take("?")
        yes = self.expression()
        self.take(":")
        no = self.expression()
        return lambda env: yes(env) if _bool(condition(env)) else no(env)

    _LEVELS = (("||",), ("&&",), ("==", "!=", "in"), ("+",))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _combine(op, left, right)
        return left

    def unary(self) -> Node:
        if self.peek() == "!":
            self.take()
            inner = self.unary()
            return lambda env: not _bool(inner(env))
        return self.postfix(self.primary())

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "str":
            value = text[1:-1].replace("\\'", "'")
            return lambda env: value
        if text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if text == "[":
            items: list[Node] = []
            while self.peek() != "]":
                items.append(self.expression())
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return lambda env: [item(env) for item in items]
        if kind == "id" and text in ("true", "false"):
            return lambda env: text == "true"
        if kind == "id" and text == "has":
            self.take("(")
            target, field = self.select_chain()
            self.take(")")
            return lambda env: isinstance(container := target(env), Mapping) and field in container
        if kind == "id":
            return lambda env: _lookup(env, text)
        raise SyntaxError(f"unexpected {text!r}")

    def select_chain(self) -> tuple[Node, str]:
        """``a.b.c`` inside ``has()``: the node for ``a.b`` and the field ``c``."""
        node = self.primary()
        while True:
            self.take(".")
            field = self.take()[1]
            if self.peek() != ".":
                return node, field
            node = _select(node, field)

    def postfix(self, node: Node) -> Node:
        while self.peek() in (".", "["):
            if self.take()[1] == "[":
                key = self.expression()
                self.take("]")
                node = _index(node, key)
                continue
            name = self.take()[1]
            if self.peek() != "(":
                node = _select(node, name)
                continue
            self.take("(")
            if name in ("all", "exists"):
                variable = self.take()[1]
                self.take(",")
                body = self.expression()
                self.take(")")
                node = _macro(name, node, variable, body)
            elif name == "lowerAscii":
                self.take(")")
                node = _lower(node)
            else:
                raise SyntaxError(f"method {name!r} is outside the CEL subset")
        return node


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError(f"expected a bool, got {type(value).__name__}")
    return value


def _lookup(env: Env, name: str) -> Any:
    if name not in env:
        raise CelError(f"undeclared reference {name!r}")
    return env[name]


def _select(node: Node, field: str) -> Node:
    def run(env: Env) -> Any:
        container = node(env)
        if not isinstance(container, Mapping) or field not in container:
            raise CelError(f"no such key: {field}")
        value = container[field]
        return value() if callable(value) else value  # variables are evaluated when first read

    return run


def _index(node: Node, key: Node) -> Node:
    def run(env: Env) -> Any:
        container, wanted = node(env), key(env)
        if not isinstance(container, Mapping) or wanted not in container:
            raise CelError(f"no such key: {wanted}")
        return container[wanted]

    return run


def _lower(node: Node) -> Node:
    return lambda env: str(node(env)).lower()


def _macro(name: str, node: Node, variable: str, body: Node) -> Node:
    def run(env: Env) -> bool:
        items = node(env)
        if not isinstance(items, Mapping | list):
            raise CelError(f"{name}() needs a list or a map")
        results = (_bool(body({**env, variable: item})) for item in items)
        return all(results) if name == "all" else any(results)

    return run


def _combine(op: str, left: Node, right: Node) -> Node:
    if op == "||":
        return lambda env: _bool(left(env)) or _bool(right(env))
    if op == "&&":
        return lambda env: _bool(left(env)) and _bool(right(env))
    if op == "==":
        return lambda env: left(env) == right(env)
    if op == "!=":
        return lambda env: left(env) != right(env)
    if op == "in":
        return lambda env: left(env) in right(env)
    return lambda env: left(env) + right(env)


def evaluate(expression: str, env: Env) -> Any:
    """The value of ``expression`` in ``env`` (callables in ``env`` maps are evaluated on first read)."""
    parser = _Parser(expression)
    node = parser.expression()
    parser.take("")
    return node(env)
