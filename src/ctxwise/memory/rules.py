"""Standing rules: instructions the user gave that hold for the rest of the
conversation ("never call me before 9am"), recognised by pattern, kept verbatim and
pinned in every window (see :class:`Rules` for the exact patterns). Harness text is
never read as a rule (:mod:`ctxwise.memory.facts`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.assembly import Section
from ctxwise.errors import FormatError, UsageError
from ctxwise.memory._extract import check_optional, check_text, words
from ctxwise.memory._facts_schema import FORMAT_VERSION, RulesFile, items, parse_file
from ctxwise.memory._prose import MASK, without_harness
from ctxwise.messages import Message

__all__ = ["Rule", "Rules"]

_I = re.IGNORECASE
_APOS = "['’]"


@dataclass(frozen=True, slots=True)
class Rule:
    """A standing instruction, verbatim, and where it was stated."""

    text: str
    source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise UsageError(f"a rule needs non-empty text, got {self.text!r}")
        check_text(self.text, "rule")
        check_optional(self.source, "rule source")


def _normalize_rule(text: str) -> str:
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.casefold().split()).rstrip(" .!;")


_LEAD = (
    r"(?:(?:yes|yeah|yep|no|nope|ok|okay|sure|thanks|thank you|great|alright|all right|also|"
    r"and|but|so|oh|well|hi|hello|hey|btw|by the way|one more thing|just|please|kindly|plus)"
    r"\b[\s,!:.\-–—]*){0,6}"
)
_ALWAYS_NEVER_STOP = words(
    """the a an my your our their his her its it this that these those so such too more
    been being was were is are be have has had do does did mind again ever before after
    happy glad welcome late busy sure good nice great ready available here there same
    once when what how worked works work heard seen got received gotten arrived"""
)
_DONT_STOP = words(
    """worry worried bother mind hesitate apologize apologise rush panic know think remember
    understand have see care recall get got want need like seem believe feel see mean
    you we they i he she it this that"""
)
_TEMPORARY = re.compile(
    r"\b(?:yet|for now|right now|at the moment|just now|today|tonight|this time)\b", _I
)
_DIRECTIVE = (
    r"(?:(?:make|be)\s+sure\s+(?:to\s+|that\s+(?:you\s+)?|you\s+)?|remember\s+to\s+|"
    rf"I\s+(?:want|need|would\s+like|{_APOS}d\s+like)\s+you\s+to\s+|"
    r"you\s+(?:must|should|need\s+to|have\s+to)\s+)?"
)
_ALWAYS_NEVER = re.compile(
    rf"{_LEAD}{_DIRECTIVE}(?P<word>always|never)\s+(?P<verb>[A-Za-z]+)(?P<rest>[^.!?]*)", _I
)
_DONT = re.compile(
    rf"{_LEAD}(?:do\s+not|don{_APOS}t)\s+(?P<ever>ever\s+)?(?P<verb>[A-Za-z]+)(?P<rest>.*)",
    _I | re.S,
)
_STOP = re.compile(rf"{_LEAD}stop\s+[a-z]+ing\b", _I)
_REMEMBER = re.compile(
    rf"{_LEAD}(?:remember|keep\s+in\s+mind|note|bear\s+in\s+mind)(?:\s*,|\s+that)?\s+"
    rf"(?:I\b|I{_APOS}m\b|my\b)",
    _I,
)
_SCOPE_START = re.compile(
    rf"{_LEAD}(?:going\s+forward|in\s+(?:the\s+)?future|from\s+here\s+on(?:\s+out)?)\b", _I
)
_SCOPE_ANYWHERE = re.compile(
    r"\bfrom\s+now\s+on\b|\bfor\s+the\s+rest\s+of\s+(?:this|the|our)\s+"
    r"(?:conversation|chat|call|session)\b",
    _I,
)
_ASK = re.compile(
    rf"{_LEAD}(?:can|could|would|will)\s+you\s+(?:please\s+)?"
    r"(?:always\b|never\b|from\s+now\s+on\b|stop\s+[a-z]+ing\b)",
    _I,
)
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[“‘]?[A-Z0-9])|\n+")
_ABBREVIATION = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|e\.g|i\.e|No|Nr)\.$", _I)


def _sentences(text: str) -> Iterator[str]:
    """Split on sentence ends and line breaks, not after "Dr.", "e.g." and the like."""
    start = 0
    for m in _SENTENCE.finditer(text):
        if "\n" not in m.group() and _ABBREVIATION.search(
            text, max(start, m.start() - 6), m.start()
        ):
            continue
        yield text[start : m.start()]
        start = m.end()
    yield text[start:]


_BLANKED = re.compile(f"{MASK}+")  # harness text: a rule is read on either side of it
_CLAUSE = re.compile(r"(?:[,;:]|\s[-–—])\s*(?=(?:and|also|but|so|please|plus|oh)\b)", _I)


_MAX_CLAUSES = 50  # clause starts examined in one sentence
_CLAUSE_CHARS = 300  # how much of a clause the patterns look at


def _is_rule_clause(clause: str) -> bool:
    m = _ALWAYS_NEVER.match(clause)
    if m:
        verb = m.group("verb").lower()
        words_after = 1 + len(m.group("rest").split())
        return verb not in _ALWAYS_NEVER_STOP and words_after >= 2
    m = _DONT.match(clause)
    if m:
        if m.group("ever"):
            return True
        verb = m.group("verb").lower()
        return verb not in _DONT_STOP and not _TEMPORARY.search(m.group("rest"))
    return bool(_STOP.match(clause) or _REMEMBER.match(clause) or _SCOPE_START.match(clause))


def _is_rule(sentence: str) -> bool:
    s = sentence.strip()
    if not s:
        return False
    if s.rstrip("\"')").endswith("?"):
        return bool(_ASK.match(s))
    if _SCOPE_ANYWHERE.search(s):
        return True
    starts = [0, *(m.end() for m in itertools.islice(_CLAUSE.finditer(s), _MAX_CLAUSES))]
    return any(_is_rule_clause(s[i : i + _CLAUSE_CHARS]) for i in starts)


class Rules:
    """Standing instructions, kept verbatim and pinned in every window.

    :meth:`capture` recognises a rule stated mid-conversation. A sentence is a rule
    when it (after leading "yes,", "thanks,", "also", "please", … and also at a
    clause starting "and"/"also"/"but"/"so"/"please"):

    - starts "always …" / "never …" + a verb and at least one more word, optionally
      after "make sure to", "be sure to", "remember to", "I want/need you to", "you
      must/should": "Never call me before 9am", "Please make sure to always CC my wife";
    - starts "don't ever …" / "do not ever …";
    - starts "don't …" / "do not …" + a verb that is not "worry", "bother", "mind",
      "know", "have", … and nothing temporary ("yet", "for now", "right now",
      "today", "this time");
    - starts "stop …ing": "Stop sending me promotional emails";
    - starts "remember (that) I/my …", "keep in mind (that) I/my …", "note that I/my …";
    - starts "going forward", "in (the) future", "from here on";
    - contains "from now on" or "for the rest of this conversation".

    A question is a rule only as "can/could/would/will you (please) always / never /
    from now on / stop …ing". Statements about the past ("I never received my
    order"), complaints ("you never listen"), "never mind", "don't worry" and
    one-off requests ("don't cancel it yet", "can you not charge it today?") are not.
    Harness text is never read (see the module doc): Claude Code's "DO NOT respond
    to these messages …" caveat and its compaction prompt's "Do not start on
    tangential requests …" are not the user's rules.
    """

    def __init__(self, rules: Iterable[Rule | str] = ()) -> None:
        self._rules: list[Rule] = []
        self._seen: set[str] = set()
        for rule in items(rules, "Rules takes an iterable of rules (Rule or str)"):
            if isinstance(rule, Rule):
                self.add(rule.text, source=rule.source)
            else:
                self.add(rule)

    def __repr__(self) -> str:
        return f"Rules({self._rules!r})"

    def add(self, text: str, *, source: str | None = None) -> bool:
        """Keep ``text`` as a rule; False if the same rule (ignoring case, spacing and
        trailing punctuation) is already kept."""
        rule = Rule(text.strip() if isinstance(text, str) else text, source)
        norm = _normalize_rule(rule.text)
        if norm in self._seen:
            return False
        self._seen.add(norm)
        self._rules.append(rule)
        return True

    def __iter__(self) -> Iterator[Rule]:
        return iter(list(self._rules))

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and _normalize_rule(text) in self._seen

    def capture(self, text: str, *, source: str | None = None) -> list[str]:
        """Find rules stated in ``text`` (see the class doc), keep them verbatim, and
        return the ones that were new."""
        text = check_text(text, "text")
        check_optional(source, "source")
        added: list[str] = []
        for piece in _BLANKED.split(without_harness(text)):
            for sentence in _sentences(piece):
                sentence = sentence.strip()
                if _is_rule(sentence) and self.add(sentence, source=source):
                    added.append(sentence)
        return added

    def capture_messages(self, messages: Sequence[Message], *, offset: int = 0) -> list[str]:
        """:meth:`capture` over the text of the user messages (tool results are not
        the user speaking); the source is ``f"message {offset + i}"``."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise UsageError(f"offset must be a non-negative integer, got {offset!r}")
        added: list[str] = []
        for i, msg in enumerate(messages):
            if not isinstance(msg, Message):
                raise UsageError(f"messages[{i}] is not a Message: {type(msg).__name__}")
            if msg.role == "user" and msg.kind == "message" and msg.text.strip():
                added += self.capture(msg.text, source=f"message {offset + i}")
        return added

    def render(self) -> str:
        """``Rules:`` and one ``- rule`` line each; "" when there are none."""
        if not self._rules:
            return ""
        return "\n".join(["Rules:", *(f"- {' '.join(r.text.split())}" for r in self._rules)])

    def section(self, name: str = "rules", priority: float = 100) -> Section:
        """The rules as a pinned section: in every window, whole, never summarized."""
        return Section(name, self.render(), priority=priority, pinned=True)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"version": 1, "rules": [{text, source}, …]}``."""
        return {
            "version": FORMAT_VERSION,
            "rules": [{"text": r.text, "source": r.source} for r in self._rules],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rules:
        """Read :meth:`to_dict` output; anything else raises :class:`FormatError`."""
        doc = parse_file(RulesFile, data, "rules")
        out = cls()
        for i, item in enumerate(doc.rules):
            try:
                out.add(item.text, source=item.source)
            except UsageError as exc:
                raise FormatError("rules", f"rules[{i}]: {exc}") from None
        return out
