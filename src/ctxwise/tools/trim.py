"""Trimming tool results: keep the fields that matter, cap lists, fit a token budget.

:func:`trim` takes a JSON tool result (a string holding JSON, or a parsed ``dict`` /
``list``) and cuts it in three passes, each optional:

1. ``fields``: keep only the named fields. A field is a dotted path from the root
   (``"reservations.flights.origin"``); lists on the way are transparent, so a path
   applies to every item of a list it meets. A named field is kept whole. Objects on
   the way to a named field are kept (with only the keys some path names, possibly
   none); a value that is not an object where a path goes on (``"a.b"`` where ``a`` is
   a string) is dropped with its key. Every removed field is listed in
   :attr:`Trimmed.dropped_paths`. A path may mark the lists it crosses with ``[]`` as
   those paths do (``"flights[].price"`` is ``"flights.price"``).
2. ``max_items``: every list outside a named field keeps its first ``max_items`` items,
   and a final string item says how many more there were: ``"… 207 more items"``
   (:data:`MORE_ITEMS`). A named field's value is never changed, so its lists are not
   capped.
3. ``max_tokens``: when the result still counts more than ``max_tokens``, it is cut in
   document order: the output keeps the longest pre-order prefix of list items and
   object members that fits (so earlier items survive whole, later ones go first), a
   list notes what it lost with the same final item, and an object with a sibling key
   ``"…"`` whose value is ``"N more keys"`` (:data:`MORE_KEYS`; ``"……"`` and so on when the
   object already has that key). The budget can be met when it holds the smallest form
   (the root with every child cut, e.g. ``["… 12 more items"]``) or the result uncut;
   when it holds neither, the smaller of the two is returned and :attr:`Trimmed.fits`
   is ``False``. A scalar root, or a named field, is never cut inside.

Byte identity: the result is parsed into a tree that remembers where every value sits
in the original text, and every kept value (a named field, or any scalar) is written
out as its original slice. Key order, number formatting (``1.50``, ``1e3``), string
escapes (``"\\u00e9"``) and whitespace inside a kept value are therefore unchanged by
construction. Containers that were cut are written with ``", "`` and ``": "``
separators (the ``json.dumps`` default). A parsed ``dict`` / ``list`` is first
serialized with ``json.dumps(result, ensure_ascii=False)``, and that text is the
original. When nothing is cut, the original text comes back unchanged.

A string that is not JSON (or JSON nested deeper than :data:`MAX_DEPTH` levels) cannot
have fields or items cut; :func:`trim` then trims it as text (:func:`trim_text`) when
``max_tokens`` is given, and returns it unchanged otherwise; :attr:`Trimmed.kind` says
which happened.

:func:`trim_text` keeps the head and the tail of a text and puts a marker between them
saying how many characters were cut (``" [… 1234 characters cut …] "``).
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ctxwise._io import parse_json
from ctxwise.errors import BudgetError, UsageError
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = [
    "DEFAULT_TEXT_MARKER",
    "MAX_DEPTH",
    "MORE_ITEMS",
    "MORE_KEYS",
    "Trimmed",
    "trim",
    "trim_text",
]

MORE_ITEMS = "… {n} more items"
"""The final string item of a list that lost ``n`` items."""

MORE_KEYS = "{n} more keys"
"""The value of the ``"…"`` key of an object that lost ``n`` members to the budget."""

DEFAULT_TEXT_MARKER = " [… {cut} characters cut …] "
"""What :func:`trim_text` puts between head and tail; ``{cut}`` is the number cut."""

_SEP = ", "
_COLON = ": "


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Trimmed:
    """A trimmed tool result and what the trimming did, for the trace.

    ``dropped_paths`` are the fields removed by the allowlist (dotted, ``[]`` marking a
    list on the way: ``"flights[].price"``), each once, in document order.
    ``dropped_items`` counts list items removed (by ``max_items`` and by the budget);
    ``dropped_keys`` counts object members removed by the budget; ``dropped_chars``
    counts characters :func:`trim_text` cut. ``fits`` is ``False`` only when a
    ``max_tokens`` was given and even the smallest form is over it.
    """

    text: str
    tokens_before: int
    tokens_after: int
    kind: Literal["json", "text"]
    dropped_paths: tuple[str, ...] = ()
    dropped_items: int = 0
    dropped_keys: int = 0
    dropped_chars: int = 0
    fits: bool = True

    @property
    def changed(self) -> bool:
        """Whether anything was cut."""
        return bool(
            self.dropped_paths or self.dropped_items or self.dropped_keys or self.dropped_chars
        )


# -- a JSON tree that remembers its original slices ------------------------------------


@dataclass(slots=True)
class _Raw:
    """A value kept as its original text (a scalar, or a named field's whole value)."""

    text: str


@dataclass(slots=True)
class _Obj:
    members: list[tuple[str, str, _Node]]  # (key, key as written, value)
    text: str
    cut: int = 0  # members cut by the budget


@dataclass(slots=True)
class _Arr:
    items: list[_Node]
    text: str
    more: int = 0  # items dropped (max_items and budget)


_Node: TypeAlias = _Raw | _Obj | _Arr

_scanstring: Callable[[str, int], tuple[str, int]] = vars(json.decoder)["scanstring"]
"""``json``'s own string scanner (not in the type stubs): the string whose body starts
at the given offset (after its quote), and the offset after its closing quote."""


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class _Parser:
    """Recursive descent over text already validated by ``json.loads``."""

    def __init__(self, text: str) -> None:
        self.s = text

    def ws(self, i: int) -> int:
        m = _WS.match(self.s, i)
        assert m is not None
        return m.end()

    def value(self, i: int) -> tuple[_Node, int]:
        s = self.s
        c = s[i]
        if c == "{":
            return self.obj(i)
        if c == "[":
            return self.arr(i)
        if c == '"':
            _, end = _scanstring(s, i + 1)
            return _Raw(s[i:end]), end
        for word in ("true", "false", "null", "NaN", "Infinity", "-Infinity"):
            if s.startswith(word, i):
                return _Raw(word), i + len(word)
        m = _NUMBER.match(s, i)
        if m is None:  # pragma: no cover - json.loads accepted the text
            raise UsageError(f"not JSON at offset {i}")
        return _Raw(m.group()), m.end()

    def obj(self, start: int) -> tuple[_Obj, int]:
        s = self.s
        members: list[tuple[str, str, _Node]] = []
        i = self.ws(start + 1)
        if s[i] == "}":
            return _Obj(members, s[start : i + 1]), i + 1
        while True:
            key, kend = _scanstring(s, i + 1)
            raw_key = s[i:kend]
            i = self.ws(self.ws(kend) + 1)  # past ':'
            node, i = self.value(i)
            members.append((key, raw_key, node))
            i = self.ws(i)
            if s[i] == "}":
                return _Obj(members, s[start : i + 1]), i + 1
            i = self.ws(i + 1)  # past ','

    def arr(self, start: int) -> tuple[_Arr, int]:
        s = self.s
        items: list[_Node] = []
        i = self.ws(start + 1)
        if s[i] == "]":
            return _Arr(items, s[start : i + 1]), i + 1
        while True:
            node, i = self.value(i)
            items.append(node)
            i = self.ws(i)
            if s[i] == "]":
                return _Arr(items, s[start : i + 1]), i + 1
            i = self.ws(i + 1)


MAX_DEPTH = 100
"""How deep objects and arrays may nest for :func:`trim` to cut inside them; a deeper
result is trimmed as text (the passes recurse, one level per level)."""


def json_depth(value: Any, limit: int | None = None) -> int:
    """How deep objects and arrays nest in ``value`` (iterative: no recursion); with
    ``limit``, counting stops at the first level past it."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, Mapping):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if limit is not None and deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _parse(text: str) -> _Node:
    """The tree of ``text``; ``ValueError`` when it is not JSON or nests deeper than
    :data:`MAX_DEPTH`."""
    try:
        data = parse_json(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if json_depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise ValueError("nested too deeply")
    start = _Parser(text).ws(0)
    node, _ = _Parser(text).value(start)
    return node


# -- passes ------------------------------------------------------------------------------


_PathTree: TypeAlias = dict[str, "_PathTree | None"]  # None: keep the value whole


def _strip_list_marks(part: str) -> str:
    while part.endswith("[]"):
        part = part[:-2]
    return part


def _path_tree(fields: Iterable[str]) -> _PathTree:
    tree: _PathTree = {}
    for field in fields:
        if not isinstance(field, str) or not field or any(not p for p in field.split(".")):
            raise UsageError(f"a field is a dotted path of non-empty names, got {field!r}")
        # "flights[].price", as dropped_paths writes it, is "flights.price": lists are
        # transparent either way
        parts = [_strip_list_marks(p) for p in field.split(".")]
        parts = [p for p in parts if p]
        if not parts:
            raise UsageError(f"a field names at least one key, got {field!r}")
        node = tree
        for k, part in enumerate(parts):
            if k == len(parts) - 1:
                node[part] = None  # a shorter path wins: keep the whole value
                break
            child = node.get(part, {})
            if child is None:
                break  # an ancestor is already kept whole
            node[part] = child
            node = child
    return tree


class _Pruner:
    def __init__(self, max_items: int | None) -> None:
        self.max_items = max_items
        self.paths: dict[str, None] = {}
        self.items = 0

    def select(self, node: _Node, tree: _PathTree | None, path: str) -> _Node | None:
        """``node`` restricted to ``tree`` (``None``: keep whole); ``None`` if dropped."""
        if tree is None:  # a named field: its original text, one unit for the budget
            return node if isinstance(node, _Raw) else _Raw(node.text)
        if isinstance(node, _Arr):
            capped = self.cap(node)
            kept: list[_Node] = []
            for item in capped.items:
                sub = self.select(item, tree, path + "[]")
                if sub is None:
                    self.paths[path + "[]"] = None
                else:
                    kept.append(sub)
            return _Arr(kept, node.text, capped.more)
        if isinstance(node, _Obj):
            members = []
            for key, raw_key, value in node.members:
                child_path = f"{path}.{key}" if path else key
                if key not in tree:
                    self.paths[child_path] = None
                    continue
                sub = self.select(value, tree[key], child_path)
                if sub is None:
                    self.paths[child_path] = None
                    continue
                members.append((key, raw_key, sub))
            return _Obj(members, node.text)
        return None  # a scalar where the path goes on

    def cap_all(self, node: _Node) -> _Node:
        """Every list under ``node`` capped (``fields`` not given)."""
        if isinstance(node, _Arr):
            capped = self.cap(node)  # first: items inside a dropped item are not counted
            return _Arr([self.cap_all(i) for i in capped.items], node.text, capped.more)
        if isinstance(node, _Obj):
            return _Obj([(k, rk, self.cap_all(v)) for k, rk, v in node.members], node.text)
        return node

    def cap(self, node: _Arr) -> _Arr:
        if self.max_items is not None and len(node.items) > self.max_items:
            extra = len(node.items) - self.max_items
            self.items += extra
            return _Arr(node.items[: self.max_items], node.text, node.more + extra)
        return node


def _more_key(node: _Obj) -> str:
    keys = {k for k, _, _ in node.members}
    name = "…"
    while name in keys:
        name += "…"
    return name


def _render(node: _Node, keep: list[int] | None = None, counter: list[int] | None = None) -> str:
    """``node`` as JSON; with ``keep``, only the first ``keep[0]`` pre-order slots."""
    if isinstance(node, _Raw):
        return node.text
    if isinstance(node, _Arr):
        parts: list[str] = []
        more = node.more
        for k, item in enumerate(node.items):
            if keep is not None and keep[0] <= 0:
                more += len(node.items) - k
                if counter is not None:
                    counter[0] += len(node.items) - k
                break
            if keep is not None:
                keep[0] -= 1
            parts.append(_render(item, keep, counter))
        if more:
            parts.append(_dumps(MORE_ITEMS.format(n=more)))
        return "[" + _SEP.join(parts) + "]"
    parts = []
    cut = node.cut
    for k, (_, raw_key, value) in enumerate(node.members):
        if keep is not None and keep[0] <= 0:
            cut += len(node.members) - k
            if counter is not None:
                counter[1] += len(node.members) - k
            break
        if keep is not None:
            keep[0] -= 1
        parts.append(raw_key + _COLON + _render(value, keep, counter))
    if cut:
        parts.append(_dumps(_more_key(node)) + _COLON + _dumps(MORE_KEYS.format(n=cut)))
    return "{" + _SEP.join(parts) + "}"


def _slots(node: _Node) -> int:
    if isinstance(node, _Arr):
        return sum(1 + _slots(i) for i in node.items)
    if isinstance(node, _Obj):
        return sum(1 + _slots(v) for _, _, v in node.members)
    return 0


def _fit(node: _Node, max_tokens: int, tc: TokenCounter) -> tuple[str, int, int, bool]:
    """The longest pre-order prefix of ``node`` that counts at most ``max_tokens``
    (the smallest form if none does): ``(text, items cut, keys cut, fits)``."""

    def at(k: int) -> tuple[str, int, int]:
        cut = [0, 0]
        return _render(node, [k], cut), cut[0], cut[1]

    total = _slots(node)
    lo, hi = 0, total  # invariant: the answer is in [lo, hi]
    while lo < hi:  # bisect on the largest k that fits (counts are nearly monotonic)
        mid = (lo + hi + 1) // 2
        if tc.count(at(mid)[0]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    for k in range(lo, -1, -1):  # re-check: a note's digits can break monotonicity
        text, items, keys = at(k)
        if tc.count(text) <= max_tokens:
            return text, items, keys, True
    text, items, keys = at(0)
    return text, items, keys, False


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise BudgetError(value if isinstance(value, int) else -1, f"{name} must be 0 or more")


def trim(
    result: str | Mapping[str, Any] | Sequence[Any],
    *,
    fields: Iterable[str] | None = None,
    max_items: int | None = None,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> Trimmed:
    """``result`` with only ``fields``, lists capped at ``max_items``, and cut to
    ``max_tokens`` (see the module docstring for each pass and the notes it leaves).

    Raises:
        BudgetError: ``max_items`` or ``max_tokens`` is negative.
        UsageError: a field is not a dotted path of non-empty names, or a parsed
            ``result`` holds something JSON cannot write (a date, a cycle).
    """
    _check_limit("max_items", max_items)
    _check_limit("max_tokens", max_tokens)
    tc = counter if counter is not None else CharCounter()
    tree = None if fields is None else _path_tree(fields)
    if isinstance(result, str):
        text = result
    else:
        try:
            text = _dumps(result)
        except (TypeError, ValueError, RecursionError) as e:
            raise UsageError(f"a parsed tool result must hold JSON values only: {e}") from None
    before = tc.count(text)
    try:
        root = _parse(text)
    except ValueError:
        if max_tokens is None:
            return Trimmed(text, before, before, "text")
        return trim_text(text, max_tokens=max_tokens, counter=tc)
    pruner = _Pruner(max_items)
    selected = pruner.cap_all(root) if tree is None else pruner.select(root, tree, "")
    node = root if selected is None else selected  # a scalar root has no fields to select
    out = text if not (pruner.paths or pruner.items) else _render(node)
    items, keys, fits = pruner.items, 0, True
    if max_tokens is not None and tc.count(out) > max_tokens:
        cut, cut_items, cut_keys, fits = _fit(node, max_tokens, tc)
        if fits or tc.count(cut) < tc.count(out):  # over budget either way: the smaller
            out, items, keys = cut, items + cut_items, cut_keys
    return Trimmed(
        out,
        before,
        tc.count(out),
        "json",
        dropped_paths=tuple(pruner.paths),
        dropped_items=items,
        dropped_keys=keys,
        fits=fits,
    )


def trim_text(
    text: str,
    *,
    max_tokens: int,
    counter: TokenCounter | None = None,
    marker: str = DEFAULT_TEXT_MARKER,
) -> Trimmed:
    """The head and the tail of ``text`` around ``marker`` (its ``{cut}`` filled with the
    number of characters cut), as long as it counts at most ``max_tokens``.

    The text comes back unchanged when it fits. Head and tail get equal shares of the
    kept characters (the head one more when odd). When not even the marker fits, the
    result is ``""`` (as :func:`ctxwise.tokens.truncate_to_tokens` does) and
    ``fits`` is ``False`` only if ``max_tokens`` could not hold ``""`` either.

    Raises:
        BudgetError: ``max_tokens`` is negative.
        UsageError: ``marker`` is not a string whose only field is ``{cut}``.
    """
    _check_limit("max_tokens", max_tokens)
    try:
        marker.format(cut=0)
    except (AttributeError, LookupError, ValueError):  # not a str, {other}, {0}, "{"
        raise UsageError(
            f"marker is a string whose only field is {{cut}} (write '{{{{' for a brace), "
            f"got {marker!r}"
        ) from None
    tc = counter if counter is not None else CharCounter()
    before = tc.count(text)
    if before <= max_tokens:
        return Trimmed(text, before, before, "text")

    def at(n: int) -> str:
        head = (n + 1) // 2
        tail = n - head
        return text[:head] + marker.format(cut=len(text) - n) + (text[-tail:] if tail else "")

    lo, hi = 0, len(text) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tc.count(at(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    for n in range(lo, -1, -1):
        out = at(n)
        after = tc.count(out)
        if after <= max_tokens:
            return Trimmed(out, before, after, "text", dropped_chars=len(text) - n)
    empty = tc.count("")
    return Trimmed("", before, empty, "text", dropped_chars=len(text), fits=empty <= max_tokens)
