"""Case facts and standing rules: the small, exact state pinned in every window.

A conversation turns on a few exact facts (a date, an e-mail address; in support
work the order number, the reservation, the customer's user id, an amount, a
status) and on standing instructions the user gave ("never call me before 9am").
Summaries blur both, so they are kept apart, updated in place, and pinned every
turn, never summarized. A wrong fact pinned that way is never corrected, so the
default reads little and reads it carefully.

:class:`FactExtractor` pulls facts from text with rules (offline, deterministic).
What it reads is chosen explicitly; :data:`PRESETS` names two configurations:

- ``"prose"``, the default (``FactExtractor()``, and what
  :meth:`CaseFacts.update_from_messages` / :meth:`CaseFacts.update_from_text` use
  when given no extractor): the generic kinds in :data:`DEFAULT_KINDS`, ``date``
  and ``email``, from what the user and the assistant wrote. Code is blanked out
  first (Markdown code fences of backticks or tildes, inline code spans,
  ``<bash-input>``); tool results are not scanned at all. Dates
  are in the default because a date means the same in any conversation; the
  domain kinds are not, because their cues ("order", "$", "user") occur in any
  code or log (an Elixir ``{:"$1", id}`` pattern reads as ``USD 1.00``).
- ``"support"``: every kind in :data:`KINDS`, from everything, tool results
  included (JSON ones by field name, below): a support or booking agent whose
  ids, amounts and statuses come back from its tools. Opt in with
  ``extractor=FactExtractor.preset("support")``, or build any mix:
  ``FactExtractor(["order_id", "amount"], tool_output=True)``; ``code=True``
  reads code too.

**Harness text is never read**, by any extractor or preset, as a fact or a rule:
the elements a harness puts into user text (Claude Code's ``<system-reminder>``,
``<local-command-caveat>``, ``<command-name>`` / ``<command-message>`` /
``<command-args>``, ``<local-command-stdout>``, ``<task-notification>``, …) and the
messages it writes itself (its compaction prompt, the "This session is being
continued from a previous conversation …" summary). One function,
:func:`ctxwise.memory._prose.harness_spans`, says what that is; :class:`CaseFacts`
hands every extractor the text with it blanked (:data:`~ctxwise.memory._prose.MASK`,
offsets kept) and :class:`Rules` reads around it.

Every :class:`Extraction` has a ``key`` from a small vocabulary, a normalized
``value`` and the ``start``/``end`` span of the text it came from (blanking keeps
every offset):

- ``order_id``: "order W2378156", "order number 8812", "#W2378156" → ``W2378156``
  (the ``#`` is dropped; a ``#`` with no "order" cue needs a letter prefix and 4+
  digits). Years after a bare "order", dates and phone numbers are not order ids.
- ``reservation_id``: 6 uppercase letters/digits introduced as a reservation,
  booking, confirmation, record locator or PNR ("reservation ID is ZFA04Y",
  "reservations XEHM4B and UDMOP1", numbered lists after "reservation IDs:"). An
  all-letter code needs an id noun ("ID", "number", "code", "#", ":") or to follow
  the cue directly, and shouted text ("MY RESERVATION PLEASE …") gives none.
- ``user_id``: a login-style id (lowercase, with ``_``/``.``/``-`` and digits, like
  ``mia_li_3668``) after "user id", "username", "customer id/number", "account id",
  "member id", "my id", "profile", "user"; or a ``name_name_1234`` id after "I'm",
  "it's", "here it is", "this is". After an explicit cue ("user id", "username", …)
  an all-digit id (4+) or a digitless handle ("john.smith") also counts. Uppercase
  codes, payment-method ids (``credit_card_…``) and e-mail addresses never do.
- ``amount``: "$250", "250 USD", "EUR 49.00", "€12.50", "£3", "30 dollars" →
  ``USD 250.00`` (ISO code, two decimals). A number with no currency (a phone
  number, a card's last four, a weight) is never an amount.
- ``date``: "2024-05-20", "May 20, 2024", "20 May 2024", "3rd of Sept. 2024",
  "2024/05/20" → ``2024-05-20``; "13/05/2024" and "05/13/2024" → ISO because only
  one reading is a date, "05/06/2024" stays verbatim; "May 20" (no year) →
  ``May 20``. Dates of birth, impossible dates and bare years are skipped.
- ``status``: delivered, pending, cancelled (or canceled → cancelled), shipped,
  processed, refunded — within 80 characters of an order, reservation, booking,
  package, parcel, shipment, refund, return or exchange, in a statement: not in a
  question, not negated ("not", "never", "n't"), not wished for or future ("want",
  "would like", "please", "can/will be …"), not conditional ("if", "once", "when").
- ``tracking_number``: after "tracking number/id/code/#", 8–40 letters and digits
  with a digit; or any UPS ``1Z…`` number.
- ``flight_number``: after "flight(s)" or right before "flight": an airline code
  and 1–4 digits ("HAT136"; "UA 123" → ``UA123``).
- ``email``: an e-mail address.

A text that looks like JSON (its first non-space character is ``{`` or ``[``, as
in most JSON tool results) is read by its field names only (``user_id``,
``reservation_id``, ``order_id``, ``tracking_id`` / ``tracking_number``, ``status``
when the payload names an order or reservation) plus e-mail addresses: flight
search results are full of dates and prices that are options, not facts of the
case.

Text over :data:`MAX_TEXT_CHARS` characters, empty keys and empty values raise
:class:`~ctxwise.errors.UsageError`.

:class:`CaseFacts` folds extractions in with one rule: **list kinds accumulate,
scalar kinds take the latest value**. Reservation ids and flight numbers are
stored as ``reservation_ids`` / ``flight_numbers``: distinct values joined with
``", "`` in first-seen order (:data:`LIST_KEYS`). Every other key holds the value
mentioned last.

:class:`Rules` keeps standing instructions verbatim; :meth:`Rules.capture` finds them
in conversation text by pattern (see its docstring for the exact patterns).

The extraction rules and :class:`FactExtractor` live in ``ctxwise.memory._extract``,
:class:`Rule` and :class:`Rules` in :mod:`ctxwise.memory.rules`; every name above is
importable from here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ctxwise.assembly import Section
from ctxwise.errors import FormatError, UsageError
from ctxwise.memory._extract import (
    DEFAULT_EXTRACTOR,
    DEFAULT_KINDS,
    KINDS,
    MAX_TEXT_CHARS,
    PRESETS,
    Extraction,
    Extractor,
    FactExtractor,
    check_optional,
    check_text,
)
from ctxwise.memory._facts_schema import FORMAT_VERSION, CaseFactsFile, items, parse_file
from ctxwise.memory._prose import without_harness
from ctxwise.memory.rules import Rule, Rules
from ctxwise.messages import Message, TextBlock, ToolResultBlock, block_text

__all__ = [
    "DEFAULT_KINDS",
    "KINDS",
    "LIST_KEYS",
    "MAX_TEXT_CHARS",
    "PRESETS",
    "CaseFacts",
    "Extraction",
    "Extractor",
    "Fact",
    "FactExtractor",
    "Rule",
    "Rules",
]

LIST_KEYS: Mapping[str, str] = {
    "reservation_id": "reservation_ids",
    "flight_number": "flight_numbers",
}
"""Extraction keys that accumulate in :class:`CaseFacts`, and the key they accumulate under."""

_LIST_SEP = ", "


@dataclass(frozen=True, slots=True)
class Fact:
    """One case fact: ``key`` → ``value``, where it was stated and when."""

    key: str
    value: str
    source: str | None = None
    at: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.strip():
            raise UsageError(f"a fact needs a non-empty key, got {self.key!r}")
        if len(f"{self.key}x".splitlines()) > 1:  # any line break str.splitlines knows
            raise UsageError(f"a fact key must be one line, got {self.key!r}")
        if not isinstance(self.value, str) or not self.value.strip():
            raise UsageError(f"fact {self.key!r} needs a non-empty value, got {self.value!r}")
        check_text(self.value, f"fact {self.key!r}")
        check_optional(self.source, f"fact {self.key!r}: source")
        check_optional(self.at, f"fact {self.key!r}: at")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "source": self.source, "at": self.at}


class CaseFacts:
    """Structured case state: key → :class:`Fact`, updated in place, in first-seen order.

    Built from facts of distinct keys (two facts of one key are a
    :class:`~ctxwise.errors.UsageError`, as they are a ``FormatError`` in
    :meth:`from_dict`); :meth:`set` replaces a key's value.

    Pin it every turn with :meth:`section`. Feed it text with :meth:`update_from_text`
    or messages with :meth:`update_from_messages`; list kinds accumulate and scalar
    kinds take the latest value (:data:`LIST_KEYS`).
    """

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._facts: dict[str, Fact] = {}
        for fact in items(facts, "CaseFacts takes an iterable of Fact values"):
            if not isinstance(fact, Fact):
                raise UsageError(f"CaseFacts takes Fact values, got {type(fact).__name__}")
            if fact.key in self._facts:
                raise UsageError(
                    f"two facts have the key {fact.key!r} ({self._facts[fact.key].value!r}"
                    f" and {fact.value!r}): a key holds one value"
                )
            self._facts[fact.key] = fact

    def __repr__(self) -> str:
        return f"CaseFacts({list(self._facts.values())!r})"

    def set(
        self, key: str, value: str, *, source: str | None = None, at: str | None = None
    ) -> bool:
        """Set ``key`` to ``value``; True if the value changed (or the key is new).

        A changed value replaces the fact in place (the key keeps its position) with
        the new ``source`` and ``at``. Restating the same value changes nothing and
        keeps where and when it was first stated.
        """
        fact = Fact(key, value, source, at)
        old = self._facts.get(key)
        if old is not None and old.value == value:
            return False
        self._facts[key] = fact
        return True

    def get(self, key: str) -> Fact | None:
        return self._facts.get(key)

    def values(self, key: str) -> list[str]:
        """The values under ``key``: a list key split into its items, else zero or one value."""
        fact = self._facts.get(key)
        if fact is None:
            return []
        if key in LIST_KEYS.values():
            return fact.value.split(_LIST_SEP)
        return [fact.value]

    def __contains__(self, key: object) -> bool:
        return key in self._facts

    def __iter__(self) -> Iterator[Fact]:
        return iter(list(self._facts.values()))

    def __len__(self) -> int:
        return len(self._facts)

    def remove(self, key: str) -> bool:
        """Forget ``key``; True if it was there."""
        return self._facts.pop(key, None) is not None

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"version": 1, "facts": [{key, value, source, at}, …]}``."""
        return {"version": FORMAT_VERSION, "facts": [f.to_dict() for f in self._facts.values()]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseFacts:
        """Read :meth:`to_dict` output; anything else raises :class:`FormatError`."""
        doc = parse_file(CaseFactsFile, data, "case facts")
        facts: list[Fact] = []
        seen: set[str] = set()
        for i, item in enumerate(doc.facts):
            try:
                fact = Fact(item.key, item.value, item.source, item.at)
            except UsageError as exc:
                raise FormatError("case facts", f"facts[{i}]: {exc}") from None
            if fact.key in seen:
                raise FormatError("case facts", f"facts[{i}].key: {fact.key!r} appears twice")
            seen.add(fact.key)
            facts.append(fact)
        return cls(facts)

    # ------------------------------------------------------------------ rendering

    def render(self) -> str:
        """``Case facts:`` and one ``- key: value (source, at)`` line a fact (runs of
        whitespace in the value, source and time as one space); "" when empty."""
        if not self._facts:
            return ""
        lines = ["Case facts:"]
        for f in self._facts.values():
            where = " ".join(", ".join(x for x in (f.source, f.at) if x).split())
            value = " ".join(f.value.split())
            lines.append(f"- {f.key}: {value}" + (f" ({where})" if where else ""))
        return "\n".join(lines)

    def section(self, name: str = "case facts", priority: float = 95) -> Section:
        """The facts as a pinned section: in every window, whole, never summarized."""
        return Section(name, self.render(), priority=priority, pinned=True)

    # ------------------------------------------------------------------ updates

    def update_from_text(
        self,
        text: str,
        *,
        source: str | None = None,
        at: str | None = None,
        extractor: Extractor | None = None,
    ) -> list[Fact]:
        """Extract facts from ``text`` and set them; return the facts that changed.

        ``extractor`` defaults to the ``"prose"`` preset (dates and e-mail addresses
        outside code). The extractor reads ``text`` with its harness text blanked
        (see the module doc). Each changed key appears once, with its final value, in the
        order it first changed. All or nothing: when the extractor raises or gives
        a value a fact cannot hold, the error propagates and no fact changes.
        """
        text = check_text(text, "text")
        check_optional(source, "source")
        check_optional(at, "at")
        before = {k: f.value for k, f in self._facts.items()}
        with self._all_or_nothing():
            found = (extractor or DEFAULT_EXTRACTOR).extract(without_harness(text))
            return self._changed(before, self._apply(found, source, at))

    def update_from_messages(
        self,
        messages: Sequence[Message],
        *,
        offset: int = 0,
        at: str | None = None,
        extractor: Extractor | None = None,
    ) -> list[Fact]:
        """Scan user and assistant text (and tool results, when the extractor reads
        tool output); return the facts that changed.

        ``extractor`` defaults to the ``"prose"`` preset. Tool results are scanned
        only when ``extractor.tool_output`` is ``True`` (the ``"support"`` preset, or
        ``FactExtractor(tool_output=True)``); an extractor without that attribute
        gets none. The source of a fact is ``f"message {offset + i}"`` for
        ``messages[i]``; pass ``offset`` when feeding a conversation in increments.
        ``at`` is the message's own ``timestamp`` when it has one (not blank), else
        the ``at`` given. System messages, thinking and tool calls are never scanned,
        and the extractor gets each text with its harness text blanked.
        All or nothing: when a message cannot be read (not a Message, a text over
        :data:`MAX_TEXT_CHARS`) or the extractor fails, the error propagates and no
        fact changes, not even those of the messages before it.
        """
        check_optional(at, "at")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise UsageError(f"offset must be a non-negative integer, got {offset!r}")
        chosen = extractor or DEFAULT_EXTRACTOR
        tool_results = getattr(chosen, "tool_output", False) is True
        before = {k: f.value for k, f in self._facts.items()}
        touched: list[str] = []
        with self._all_or_nothing():
            for i, msg in enumerate(messages):
                if not isinstance(msg, Message):
                    raise UsageError(f"messages[{i}] is not a Message: {type(msg).__name__}")
                if msg.role == "system":
                    continue
                blank = isinstance(msg.timestamp, str) and not msg.timestamp.strip()
                when = at if blank else msg.timestamp or at
                for block in msg.content:
                    if isinstance(block, TextBlock):
                        text = block.text
                    elif isinstance(block, ToolResultBlock) and tool_results:
                        text = block_text(block)
                    else:
                        continue
                    if not text.strip():
                        continue
                    text = without_harness(check_text(text, f"messages[{i}]"))
                    found = chosen.extract(text)
                    touched += self._apply(found, f"message {offset + i}", when)
            return self._changed(before, touched)

    @contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """Put the facts back as they were when the block raises."""
        saved = dict(self._facts)
        try:
            yield
        except BaseException:
            self._facts = saved
            raise

    def _apply(self, found: Sequence[Extraction], source: str | None, at: str | None) -> list[str]:
        """Set what ``found`` says; the keys that were set, in order."""
        touched: list[str] = []
        for e in found:
            key = LIST_KEYS.get(e.key)
            if key is None:
                key, value = e.key, e.value
            else:
                items = self.values(key)
                if e.value in items:
                    continue
                value = _LIST_SEP.join([*items, e.value])
            if self.set(key, value, source=source, at=at):
                touched.append(key)
        return touched

    def _changed(self, before: Mapping[str, str], touched: Sequence[str]) -> list[Fact]:
        """Facts whose value differs from ``before``, once each, in first-touched order."""
        keys = dict.fromkeys(touched)
        return [
            self._facts[k]
            for k in keys
            if k in self._facts and before.get(k) != self._facts[k].value
        ]
