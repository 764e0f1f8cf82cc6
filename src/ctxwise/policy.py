"""Policy gates: standing rules enforced in code, checked before a tool runs.

A rule the model is merely *told* ("do not refund order 4417 until the address
check is done") can be lost to a summary, diluted in a long window, or ignored.
A :class:`PolicyGate` holds rules as code, outside the transcript, and the agent
loop asks it before every tool call::

    gate = PolicyGate([RequireFact(
        name="refund-4417-after-address-check",
        text="Do not refund order 4417 until the address check is done",
        tools=("issue_refund",), when={"order_id": "4417"},
        fact="address_check:{order_id}", satisfied_by="address_check",
    )])
    decision = gate.check("issue_refund", {"order_id": "4417"}, facts)
    if not decision:                       # Blocked is falsy, Allowed truthy
        return tool_error(decision.reason)  # the rule's own words, verbatim
    ...
    gate.observe("address_check", {"order_id": "4417"}, result_text, facts)

Rules fail closed: a rule that cannot be evaluated (a fact template whose field
the tool input lacks) blocks, and says why. Built-in rule kinds serialize with
:meth:`PolicyGate.to_dict`, so a gate persists beside the case facts, never
inside the conversation that a compaction rewrites. :func:`compile_rule` turns
the common "do not <action> [order] <id> [until <check> is done]" sentence into
a rule, given a vocabulary from phrases to tool names; anything it does not
understand is refused rather than guessed.

The gates are exported from the top level (``from ctxwise import PolicyGate,
compile_rule``); this module owns them and nothing else (which tools exist and
how their results are trimmed is not a policy question).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import ValidationError

from ctxwise._io import parse_json
from ctxwise._policy_schema import RULE_KINDS, ForbidItem, GateFile, RequireFactItem
from ctxwise._schema import as_dict, describe
from ctxwise.errors import FormatError, UsageError
from ctxwise.memory.facts import CaseFacts
from ctxwise.text import STOPWORDS, Analyzer

__all__ = [
    "Allowed",
    "Blocked",
    "Forbid",
    "GateDecision",
    "PolicyGate",
    "PolicyRule",
    "RequireFact",
    "compile_rule",
    "tool_outcome",
]

_FORMAT_VERSION = 1


@runtime_checkable
class PolicyRule(Protocol):
    """A rule as code. ``text`` is the rule as a person stated it (shown as the reason)."""

    @property
    def name(self) -> str: ...

    @property
    def text(self) -> str: ...

    def check(self, tool_name: str, tool_input: Mapping[str, Any], facts: CaseFacts) -> str | None:
        """``None`` when the call may run, else why it may not."""
        ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Allowed:
    """The call may run. ``checked`` names the rules that applied to it."""

    tool: str
    checked: tuple[str, ...] = ()

    allowed: Literal[True] = True

    def __bool__(self) -> bool:
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"allowed": True, "tool": self.tool, "checked": list(self.checked)}


@dataclass(frozen=True, slots=True)
class Blocked:
    """The call must not run. ``reason`` quotes the rule; ``rule`` is the rule itself."""

    tool: str
    reason: str
    rule: PolicyRule

    allowed: Literal[False] = False

    def __bool__(self) -> bool:
        return False

    def to_dict(self) -> dict[str, Any]:
        return {"allowed": False, "tool": self.tool, "reason": self.reason, "rule": self.rule.name}


GateDecision: TypeAlias = Allowed | Blocked


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)", re.ASCII)


def _id_text(value: object, *, numeric: bool = True) -> str:
    """An input value as the text of an id: NFKC (full-width ``４４１７`` is ``4417``),
    without invisible format characters (a zero-width space), trimmed, without a
    leading ``#``; a JSON number (``4417.0``, ``5e2``) as its plain decimal value
    (``4417``, ``500``), and, when ``numeric``, a string that spells a number too
    (``"500.00"``, ``"0042"`` → ``500``, ``42``)."""
    if isinstance(value, float) and math.isfinite(value):
        return _plain(format(Decimal(repr(value)), "f"))  # 1e+20 written out, exactly
    text = unicodedata.normalize("NFKC", str(value))
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    text = text.strip().lstrip("#").strip()
    return _plain(text) if numeric and _NUMBER.fullmatch(text) else text


def _plain(number: str) -> str:
    """A decimal number's digits without a sign of plus, leading or trailing zeros
    (every digit kept: two 30-digit ids never round to one)."""
    whole, _, frac = number.lstrip("+-").partition(".")
    digits = (whole.lstrip("0") or "0") + ("." + frac.rstrip("0") if frac.rstrip("0") else "")
    return digits if digits == "0" or not number.startswith("-") else f"-{digits}"


def _norm_value(value: object) -> str:
    """How input values compare: as id text (:func:`_id_text`), case-folded."""
    return _id_text(value).casefold()


def _check_str(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _check_tools(tools: object, what: str) -> tuple[str, ...]:
    if isinstance(tools, str) or not isinstance(tools, Iterable):
        raise UsageError(f"{what}: tools must be a sequence of tool names, got {tools!r}")
    out = tuple(tools)
    if not out:
        raise UsageError(f"{what}: a rule needs at least one tool")
    for t in out:
        _check_str(t, f"{what}: tool name")
    return out


def _check_when(when: object, what: str) -> dict[str, str]:
    if not isinstance(when, Mapping):
        raise UsageError(f"{what}: when must be a mapping of input field → value, got {when!r}")
    out: dict[str, str] = {}
    for k, v in when.items():
        _check_str(k, f"{what}: when field")
        finite = not isinstance(v, float) or math.isfinite(v)
        if not isinstance(v, str | int | float) or not finite:
            # str() of a list or None is a value no input ever has: a rule that never applies
            raise UsageError(
                f"{what}: when[{k!r}] must be a string or a number to compare the input "
                f"with, got {v!r}"
            )
        out[k] = _id_text(v) if isinstance(v, float) else str(v)  # 1e20 as its digits
    return out


def _applies(
    tools: Sequence[str], when: Mapping[str, str], tool_name: str, tool_input: Mapping[str, Any]
) -> bool:
    if tool_name not in tools:
        return False
    return all(k in tool_input and _holds(tool_input[k], _norm_value(v)) for k, v in when.items())


def _holds(value: object, expected: str) -> bool:
    """Whether an input value is ``expected`` (a normalized value), or, for a list or
    an object (a batch call: ``{"order_id": ["4416", "4417"]}``), holds it at any depth."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping | list | tuple | set | frozenset):
            if id(item) not in seen:  # a list that holds itself is walked once
                seen.add(id(item))
                stack.extend(item.values() if isinstance(item, Mapping) else item)
        elif _norm_value(item) == expected:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Forbid:
    """Never run ``tools`` (for inputs matching ``when``, e.g. ``{"order_id": "4417"}``)."""

    name: str
    text: str
    tools: tuple[str, ...]
    when: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_str(self.name, "rule name")
        _check_str(self.text, f"rule {self.name!r}: text")
        object.__setattr__(self, "tools", _check_tools(self.tools, f"rule {self.name!r}"))
        object.__setattr__(self, "when", _check_when(self.when, f"rule {self.name!r}"))

    def check(self, tool_name: str, tool_input: Mapping[str, Any], facts: CaseFacts) -> str | None:
        if _applies(self.tools, self.when, tool_name, tool_input):
            return self.text
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "forbid",
            "name": self.name,
            "text": self.text,
            "tools": list(self.tools),
            "when": dict(self.when),
        }


_FIELDS = string.Formatter()


@dataclass(frozen=True, slots=True)
class RequireFact:
    """Run ``tools`` only once the case fact ``fact`` holds one of ``accept``.

    ``fact`` is a template filled from the tool input (``"address_check:{order_id}"``),
    so one rule covers every order. ``satisfied_by`` names the tool whose result
    :meth:`PolicyGate.observe` records under that key (its :func:`tool_outcome`).
    """

    name: str
    text: str
    tools: tuple[str, ...]
    fact: str
    accept: tuple[str, ...] = ("ok",)
    when: Mapping[str, str] = field(default_factory=dict)
    satisfied_by: str | None = None

    def __post_init__(self) -> None:
        _check_str(self.name, "rule name")
        what = f"rule {self.name!r}"
        _check_str(self.text, f"{what}: text")
        object.__setattr__(self, "tools", _check_tools(self.tools, what))
        object.__setattr__(self, "when", _check_when(self.when, what))
        _check_str(self.fact, f"{what}: fact")
        try:
            fields = [(f, s, c) for _, f, s, c in _FIELDS.parse(self.fact) if f is not None]
        except ValueError as exc:
            raise UsageError(f"{what}: bad fact template {self.fact!r}: {exc}") from None
        # a format spec or a conversion ('{order_id:d}', '{order_id!r}') is refused: the
        # values are text, so ':d' raised in observe, and '!r' quoted the id in the key
        if any(not f.isidentifier() or s or c for f, s, c in fields):
            raise UsageError(
                f"{what}: fact template fields must be plain names, as in "
                f"'address_check:{{order_id}}' (no format spec or conversion): {self.fact!r}"
            )
        accept: object = self.accept
        values = (
            () if isinstance(accept, str) or not isinstance(accept, Iterable) else tuple(accept)
        )
        # read once: a generator was emptied by the check, so no fact could satisfy the rule;
        # str() of None or a list is a value no fact holds
        if not values or any(
            isinstance(a, bool) or not isinstance(a, str | int) or not str(a).strip()
            for a in values
        ):
            raise UsageError(
                f"{what}: accept must be a non-empty sequence of values (strings or "
                f"integers), got {accept!r}"
            )
        object.__setattr__(self, "accept", tuple(str(a) for a in values))
        if self.satisfied_by is not None:
            _check_str(self.satisfied_by, f"{what}: satisfied_by")

    def fact_key(self, tool_input: Mapping[str, Any]) -> str:
        """The fact key for this input; :class:`KeyError` names a missing field.

        Ids fill it as the rules compare them (``ORD-1``, ``ord-1`` and ``#ORD-1`` are
        one order, the key is ``address_check:ord-1`` for all three), so a later failed
        check under another spelling revokes an earlier pass; but a string that spells
        a number keeps its digits (``"0042"`` is not the order ``42``: a key that merged
        them would let one order's check pass the other)."""
        fields = [f for _, f, _, _ in _FIELDS.parse(self.fact) if f]
        values = {f: _id_text(tool_input[f], numeric=False).casefold() for f in fields}
        return self.fact.format(**values)

    def check(self, tool_name: str, tool_input: Mapping[str, Any], facts: CaseFacts) -> str | None:
        if not _applies(self.tools, self.when, tool_name, tool_input):
            return None
        try:
            key = self.fact_key(tool_input)
        except KeyError as exc:
            return f"{self.text} (the call has no {exc.args[0]!r}, so the rule cannot be checked)"
        found = facts.get(key)
        if found is not None and _norm_value(found.value) in {_norm_value(a) for a in self.accept}:
            return None
        state = f"{key} is {found.value!r}" if found is not None else f"{key} is not recorded"
        return f"{self.text} ({state}; needs {' or '.join(self.accept)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "require_fact",
            "name": self.name,
            "text": self.text,
            "tools": list(self.tools),
            "fact": self.fact,
            "accept": list(self.accept),
            "when": dict(self.when),
            "satisfied_by": self.satisfied_by,
        }


_NOT_OK = re.compile(
    r"\b(not ok|not okay|fail(?:ed|ure|s)?|error|errors|mismatch(?:ed)?|invalid|denied|"
    r"rejected|unverified|not verified|not found|pending)\b",
    re.IGNORECASE,
)
_OK_WORDS = (
    r"(?:ok|okay|pass(?:ed)?|verified|success(?:ful(?:ly)?)?|succeeded|confirmed|valid|"
    r"approved|complete[d]?|done|cleared)"
)
_OK = re.compile(rf"\b{_OK_WORDS}\b", re.IGNORECASE)
# "could not be verified", "wasn't approved", "has not yet been completed": a success
# word after a negation (up to three words before it, no punctuation between) says
# the opposite of the word
_NEGATED_OK = re.compile(
    rf"(?:\b(?:not|never|cannot|no longer)|n['\u2019]t)(?:\s+\w+){{0,3}}?\s+{_OK_WORDS}\b",
    re.IGNORECASE,
)


def tool_outcome(result: str | Mapping[str, Any], *, is_error: bool = False) -> str:
    """``"ok"`` or ``"failed"``: what a prerequisite tool's result says.

    An error result is ``"failed"``. A JSON object (or mapping) is judged by its
    ``status`` / ``result`` / ``outcome`` field when it has one, else by its
    fields at any depth: a flag named by a success word (``ok``, ``verified``,
    ``address_valid``) that is false or empty fails it and one that is ``true``
    passes it; a field named by a failure word (``error``, ``errors``, ``failed``)
    that holds anything fails it; its string values are then judged as text (a
    key is a name, not a verdict: ``{"verified": false}`` is not ok). Text is
    ``"ok"`` when it says ok / passed / verified / success / confirmed / valid /
    approved / completed and nothing like failed / error / mismatch / invalid /
    denied / rejected / not found / pending, nor a negated success ("not
    verified", "could not be confirmed", "wasn't approved"). Anything else is
    ``"failed"``: an unclear result never satisfies a rule.
    """
    if is_error:
        return "failed"
    data: Any = result
    if isinstance(result, str):
        try:
            data = parse_json(result)
        except (ValueError, RecursionError):  # not JSON, or nested past the decoder: text
            data = result
    if isinstance(data, Mapping):
        for key in ("status", "result", "outcome"):
            if isinstance(data.get(key), str | bool):
                value = data[key]
                if isinstance(value, bool):
                    return "ok" if value else "failed"
                return tool_outcome(value)
    if isinstance(data, Mapping | list | tuple | set | frozenset):
        return _object_outcome(data)
    return _text_outcome(str(data))


def _text_outcome(text: str) -> str:
    if _NOT_OK.search(text) or _NEGATED_OK.search(text) or not _OK.search(text):
        return "failed"
    return "ok"


_KEY_WORD = re.compile(r"[^\W_]+")
_FAIL_KEYS = frozenset(
    {"error", "errors", "fail", "fails", "failed", "failure", "failures", "mismatch"}
    | {"mismatched", "invalid", "denied", "rejected", "unverified", "pending"}
)
_NEGATORS = frozenset({"not", "no", "non", "un"})
_MAX_DEPTH = 100


def _object_outcome(data: object) -> str:
    """:func:`tool_outcome` of a JSON object or array (see its docstring); one that
    holds itself or nests past 100 levels says nothing clear: ``"failed"``."""
    passed = failed = False
    texts: list[str] = []
    stack: list[tuple[object, object, int]] = [(None, data, 0)]
    seen: set[int] = set()
    while stack:
        key, value, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple | set | frozenset):
            if id(value) in seen or depth > _MAX_DEPTH:
                return "failed"
            seen.add(id(value))
            if isinstance(value, Mapping):
                stack.extend((k, v, depth + 1) for k, v in value.items())
                continue
            stack.extend((key, v, depth + 1) for v in value)  # items share their key
            if value:
                continue
        words = [w.casefold() for w in _KEY_WORD.findall(key)] if isinstance(key, str) else []
        negated = bool(_NEGATORS.intersection(words))
        last = words[-1] if words else ""
        if _OK.fullmatch(last) and not negated:
            passed |= value is True
            failed |= not value
        elif _OK.fullmatch(last) or (last in _FAIL_KEYS and not negated):
            failed |= bool(value)  # "not_verified": true, "errors": ["PO box"]
        if isinstance(value, str):
            texts.append(value)
    text = "\n".join(texts)
    if failed or _NOT_OK.search(text) or _NEGATED_OK.search(text):
        return "failed"
    return "ok" if passed or _OK.search(text) else "failed"


class PolicyGate:
    """Rules as code, checked before a tool runs; kept outside the transcript."""

    def __init__(self, rules: Iterable[PolicyRule] = ()) -> None:
        self._rules: dict[str, PolicyRule] = {}
        for rule in rules:
            self.add(rule)

    def __repr__(self) -> str:
        return f"PolicyGate({list(self._rules.values())!r})"

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[PolicyRule]:
        return iter(list(self._rules.values()))

    def add(self, rule: PolicyRule) -> None:
        """Add a rule; a rule with the same name is an error (remove it first)."""
        if not isinstance(rule, PolicyRule):
            raise UsageError(f"a policy rule needs name, text, check and to_dict; got {rule!r}")
        if rule.name in self._rules:
            raise UsageError(f"a rule named {rule.name!r} is already in the gate")
        self._rules[rule.name] = rule

    def remove(self, name: str) -> bool:
        """Drop the rule named ``name``; True if it was there."""
        return self._rules.pop(name, None) is not None

    def check(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any] | None = None,
        facts: CaseFacts | None = None,
    ) -> GateDecision:
        """May ``tool_name`` run with ``tool_input``, given the case ``facts``?

        Rules are checked in the order they were added; the first that objects
        blocks the call. A rule that raises blocks too (fails closed).
        """
        _check_str(tool_name, "tool name")
        inputs: Mapping[str, Any] = {} if tool_input is None else tool_input
        if not isinstance(inputs, Mapping):
            raise UsageError(f"tool input must be a mapping, got {type(inputs).__name__}")
        known = facts if facts is not None else CaseFacts()
        if not isinstance(known, CaseFacts):  # a dict of facts made every rule block
            raise UsageError(f"facts must be CaseFacts, got {type(known).__name__}")
        checked: list[str] = []
        for rule in self._rules.values():
            try:
                reason = rule.check(tool_name, inputs, known)
            except Exception as exc:  # a broken rule must not let the call through
                reason = f"{rule.text} (the rule could not be checked: {exc})"
            if reason is not None:
                return Blocked(tool_name, reason, rule)
            checked.append(rule.name)
        return Allowed(tool_name, tuple(checked))

    def observe(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any] | None,
        result: str | Mapping[str, Any],
        facts: CaseFacts,
        *,
        is_error: bool = False,
        at: str | None = None,
    ) -> list[str]:
        """Record what a tool's result means for the rules it satisfies.

        For each :class:`RequireFact` rule with ``satisfied_by == tool_name``, the
        fact key (filled from ``tool_input``) is set to :func:`tool_outcome` of the
        result. Returns the keys set. A later failure overwrites an earlier "ok".
        """
        _check_str(tool_name, "tool name")
        inputs: Mapping[str, Any] = {} if tool_input is None else tool_input
        if not isinstance(inputs, Mapping):  # as check(): a JSON string is not yet an input
            raise UsageError(f"tool input must be a mapping, got {type(inputs).__name__}")
        if not isinstance(facts, CaseFacts):
            raise UsageError(f"facts must be CaseFacts, got {type(facts).__name__}")
        outcome = tool_outcome(result, is_error=is_error)
        keys: list[str] = []
        for rule in self._rules.values():
            if not isinstance(rule, RequireFact) or rule.satisfied_by != tool_name:
                continue
            try:
                key = rule.fact_key(inputs)
            except KeyError:
                continue
            facts.set(key, outcome, source=f"tool {tool_name}", at=at)
            keys.append(key)
        return keys

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """``{"version": 1, "rules": [...]}``: every rule's own ``to_dict``."""
        return {"version": _FORMAT_VERSION, "rules": [r.to_dict() for r in self._rules.values()]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyGate:
        """Read :meth:`to_dict` output (built-in rules); anything else is a ``FormatError``
        naming the field (``rules[2].tools: Input should be a valid list``)."""
        if not isinstance(data, Mapping):
            raise FormatError("policy gate", f"expected a mapping, got {type(data).__name__}")
        try:
            doc = GateFile.model_validate(as_dict(data))
        except ValidationError as exc:
            raise FormatError("policy gate", describe(exc, tags=RULE_KINDS)) from None
        gate = cls()
        for i, item in enumerate(doc.rules):
            try:
                gate.add(_rule_from_item(item))
            except UsageError as exc:
                raise FormatError("policy gate", f"rules[{i}]: {exc}") from None
        return gate


def _rule_from_item(item: ForbidItem | RequireFactItem) -> PolicyRule:
    if isinstance(item, ForbidItem):
        return Forbid(item.name, item.text, tuple(item.tools), item.when or {})
    return RequireFact(
        item.name,
        item.text,
        tuple(item.tools),
        item.fact,
        tuple(item.accept or ("ok",)),
        item.when or {},
        item.satisfied_by,
    )


_RULE = re.compile(
    r"^\s*(?:please\s*,?\s+)?(?:do not|don't|never|must not|mustn't)\s+(?P<action>\D+?)\s+"
    r"(?:(?:for|on)\s+)?(?:the\s+)?(?P<noun>[a-z]+)\s+#?(?P<id>[A-Z]*[-_]?\d[\w-]*)"
    r"(?:\s+(?:until|unless|before)\s+(?:the\s+|its\s+|an?\s+)?(?P<cond>.+?)\s+"
    r"(?:is|has been|have been|are)\s+(?:done|complete|completed|finished|verified|passed|ok|"
    r"cleared|through))?\s*[.!]?\s*$",
    re.IGNORECASE,
)
"""The action holds no digit: in "refund order 4417 or 4418" the id is the first
one, and the rest is not understood (it read as the action "refund order 4417",
noun "or", id 4418)."""
_ID_PAIR = re.compile(r"\b(?P<noun>[a-z]+)\s+#?(?P<id>[A-Z]*[-_]?\d[\w-]*)", re.IGNORECASE)
_NOT_NOUNS = STOPWORDS | {"over", "under", "above", "below", "exceeding", "past", "more", "less"}
"""Words before a number that do not name what the number is the id of ("more than
500", "over 500", "by 2026"): such a rule is refused, not read as ``than_id=500``."""


@lru_cache(maxsize=1)
def _analyzer() -> Analyzer:
    return Analyzer()


def _words(text: str) -> tuple[str, ...]:
    return tuple(_analyzer().words(text))


def _names(phrase: tuple[str, ...], words: tuple[str, ...]) -> bool:
    """Whether the words of a vocabulary phrase are words of the rule, in order (stemmed:
    "refund" names "refunds"), not letters inside one ("fund" is not in "refund")."""
    n = len(words)
    return n > 0 and any(phrase[i : i + n] == words for i in range(len(phrase) - n + 1))


def _lookup(phrase: str, vocabulary: Mapping[str, str], what: str, text: str) -> str:
    said = _words(phrase)
    hits = [tool for words, tool in vocabulary.items() if _names(said, _words(words))]
    if len(set(hits)) != 1:
        found = "no tool" if not hits else f"several tools ({', '.join(sorted(set(hits)))})"
        raise UsageError(
            f"cannot compile rule {text!r}: the {what} {phrase!r} names {found} in the vocabulary"
        )
    return hits[0]


def compile_rule(
    text: str,
    vocabulary: Mapping[str, str],
    *,
    id_fields: Mapping[str, str] | None = None,
    name: str | None = None,
) -> PolicyRule:
    """Turn a stated rule into code, or refuse.

    Understood: "Do not <action> <noun> <id> until <check> is done" (also
    "don't"/"never"/"must not"; "until"/"unless"/"before"; "is done / complete /
    verified / passed / ok") → :class:`RequireFact`, and the same without the
    "until" clause → :class:`Forbid`. ``vocabulary`` maps phrases to tool names
    (``{"refund": "issue_refund", "address check": "address_check"}``): the action
    must name exactly one tool, and so must the check. ``id_fields`` maps the
    noun to the tool input field holding the id (default ``{noun}_id``: "order" →
    ``order_id``). The rule keeps ``text`` verbatim as its reason.
    """
    _check_str(text, "rule text")
    if not isinstance(vocabulary, Mapping) or not vocabulary:
        raise UsageError("compile_rule needs a vocabulary of phrase → tool name")
    for phrase, tool_name in vocabulary.items():
        # an empty phrase is in every sentence; a tool named None became the fact 'None:{id}'
        _check_str(phrase, "compile_rule: a vocabulary phrase")
        _check_str(tool_name, f"compile_rule: the tool for {phrase!r}")
        if not _words(phrase):
            raise UsageError(f"compile_rule: the vocabulary phrase {phrase!r} holds no word")
    # "Don't" typed with U+2019 (a phone, an editor), runs of spaces, a line break: read
    # as the sentence they are (the rule keeps the text verbatim)
    m = _RULE.match(" ".join(text.replace("\u2019", "'").split()))
    if m is None:
        raise UsageError(
            f"cannot compile rule {text!r}: expected 'do not <action> <noun> <id> "
            "[until <check> is done]'; state it as code (Forbid, RequireFact) instead"
        )
    noun = m["noun"].casefold()
    if noun in _NOT_NOUNS:
        raise UsageError(
            f"cannot compile rule {text!r}: {m['noun']!r} {m['id']!r} does not name what "
            f"{m['id']!r} is the id of; state it as code (Forbid, RequireFact) instead"
        )
    other = [
        f"{p['noun']} {p['id']}"
        for p in _ID_PAIR.finditer(m["cond"] or "")
        if _norm_value(p["id"]) != _norm_value(m["id"])
    ]
    if other:  # "until the address check for order 4418 is done": not this order's check
        raise UsageError(
            f"cannot compile rule {text!r}: its condition names {other[0]!r}, not "
            f"{m['noun']} {m['id']}; state it as code (Forbid, RequireFact) instead"
        )
    tool = _lookup(m["action"], vocabulary, "action", text)
    id_field = (id_fields or {}).get(noun, f"{noun}_id")
    ident = m["id"]
    rule_name = name or f"{tool}:{ident}" + (f":after:{m['cond']}" if m["cond"] else "")
    if m["cond"] is None:
        return Forbid(rule_name, text.strip(), (tool,), {id_field: ident})
    check_tool = _lookup(m["cond"], vocabulary, "condition", text)
    return RequireFact(
        rule_name,
        text.strip(),
        (tool,),
        f"{check_tool}:{{{id_field}}}",
        ("ok",),
        {id_field: ident},
        check_tool,
    )
