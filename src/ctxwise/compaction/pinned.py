"""The pinned state a compaction carries: case facts and standing rules, as data.

Facts and rules are never summarized. :func:`~ctxwise.compaction.compact` puts them
in one *pinned block*, a text block that starts with :data:`PINNED_HEADER`, in the
system part (or, where a format has no system part, as the first block of the
summary message), and a later compaction reads them back.

They travel as data: the pinned block's ``extra`` holds
``{"ctxwise.pinned": {"facts": CaseFacts.to_dict(), "rules": Rules.to_dict()}}``,
and a Claude Code file stores the same mapping on its summary event (key
``ctxwisePinned``), which the reader puts in the summary message's ``extra``. Only
a block that lost its data (a transcript written as an Anthropic or OpenAI JSON
request, whose text blocks cannot carry extra keys) is read from its rendering:
``Case facts:`` then ``- key: value (source, at)`` lines (an empty slot where the
line would be misread: ``(, at)`` for a time without a source, ``()`` after a value
that ends in a parenthesis and cites nothing), ``Rules:`` then ``- rule`` lines,
the exact inverse of :meth:`PinnedState.render` (property-tested).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ctxwise.errors import CtxwiseError, UsageError
from ctxwise.memory.facts import CaseFacts, Fact, Rule, Rules
from ctxwise.messages import ContentBlock, Message, TextBlock

__all__ = ["PINNED_HEADER", "PINNED_KEY", "PinnedState"]

PINNED_HEADER = "[Pinned through compaction]"
"""First line of the block holding case facts and rules (kept verbatim, never
summarized; short, since it is paid for on every call)."""
LEGACY_PINNED_HEADERS = ("Pinned through compaction (kept verbatim, never summarized):",)
"""Headers earlier ctxwise versions wrote, still recognised."""
PINNED_KEY = "ctxwise.pinned"
"""``extra`` key of a pinned block (or summary message) holding the state as data."""


@dataclass(slots=True)
class PinnedState:
    """Case facts and standing rules, merged in order of arrival."""

    facts: CaseFacts = field(default_factory=CaseFacts)
    rules: Rules = field(default_factory=Rules)

    def __bool__(self) -> bool:
        return bool(len(self.facts) or len(self.rules))

    # ------------------------------------------------------------------ merging

    def add_facts(self, facts: Iterable[Fact]) -> None:
        for f in facts:
            self.facts.set(f.key, f.value, source=f.source, at=f.at)

    def add_rules(self, rules: Iterable[Rule | str]) -> None:
        for r in rules:
            if isinstance(r, Rule):
                self.rules.add(r.text, source=r.source)
            else:
                self.rules.add(r)

    def merge(self, other: PinnedState) -> None:
        self.add_facts(other.facts)
        self.add_rules(other.rules)

    # ------------------------------------------------------------------ as data

    def to_dict(self) -> dict[str, Any]:
        return {"facts": self.facts.to_dict(), "rules": self.rules.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PinnedState:
        """The state from :meth:`to_dict`; raises :class:`~ctxwise.errors.FormatError`
        (a :class:`~ctxwise.errors.UsageError`) for a mapping it did not write."""
        if not isinstance(data, Mapping):
            raise UsageError(f"pinned state must be a mapping, got {type(data).__name__}")
        return cls(
            CaseFacts.from_dict(data.get("facts", {})), Rules.from_dict(data.get("rules", {}))
        )

    # ------------------------------------------------------------------ as text

    def render(self) -> str:
        """The pinned block's text ("" when there is nothing to pin)."""
        parts = [p for p in (_render_facts(self.facts), self.rules.render()) if p]
        return "\n".join([PINNED_HEADER, *parts]) if parts else ""

    def block(self) -> TextBlock | None:
        """The pinned block, its state attached as data; ``None`` when empty."""
        text = self.render()
        return TextBlock(text, {PINNED_KEY: self.to_dict()}) if text else None

    @classmethod
    def parse(cls, text: str) -> PinnedState:
        """The state back from a rendered block (the inverse of :meth:`render`).

        Lines ctxwise did not write are skipped: they leave with the old block.
        """
        state = cls()
        section = ""
        for line in text.splitlines()[1:]:
            if line in ("Case facts:", "Rules:"):
                section = line
                continue
            if not line.startswith("- "):
                continue
            body = line[2:]
            if section == "Rules:":
                if body.strip():
                    state.rules.add(body)
                continue
            if section != "Case facts:":
                continue
            key, sep, rest = body.partition(": ")
            if not sep:
                continue
            source = at = None
            if rest.endswith(")") and " (" in rest:
                rest, where = rest[:-1].rsplit(" (", 1)
                src, _, when = where.partition(", ")
                source, at = src or None, when or None
            try:
                state.facts.set(key, rest, source=source, at=at)
            except UsageError:
                continue
        return state

    # ------------------------------------------------------------------ in transcripts

    @classmethod
    def read(cls, carriers: Sequence[Message]) -> PinnedState:
        """The state held by the pinned blocks of ``carriers`` (the system part and a
        leading summary message): their data when they carry it, else their text."""
        state = cls()
        for m in carriers:
            message_data = m.extra.get(PINNED_KEY)
            for b in m.content:
                if not is_pinned(b):
                    continue
                assert isinstance(b, TextBlock)
                data = b.extra.get(PINNED_KEY, message_data)
                try:
                    found = cls.from_dict(data) if isinstance(data, Mapping) else cls.parse(b.text)
                except CtxwiseError:
                    found = cls.parse(b.text)
                state.merge(found)
        return state


def _render_facts(facts: CaseFacts) -> str:
    """:meth:`CaseFacts.render`, with the one change :meth:`PinnedState.parse` needs
    to read every line back as it was: a fact whose ``(source, at)`` would be
    misread keeps an empty slot. A value that ends in a parenthesis and has no
    source or time (``shipped (partial)``) is written ``shipped (partial) ()``, not
    read as the value ``shipped`` from the source ``partial``; a time without a
    source is written ``(, 2024-05-01)``, not read as the source."""
    text = facts.render()
    if not text:
        return text
    lines = ["Case facts:"]
    for f, line in zip(facts, text.split("\n")[1:], strict=True):
        value = " ".join(f.value.split())
        if f.source is None and f.at is not None:
            line = line.removesuffix(f" ({f.at})") + f" (, {f.at})"
        elif f.source is None and f.at is None and value.endswith(")") and " (" in value:
            line += " ()"
        lines.append(line)
    return "\n".join(lines)


def is_pinned(block: ContentBlock) -> bool:
    return isinstance(block, TextBlock) and block.text.startswith(
        (PINNED_HEADER, *LEGACY_PINNED_HEADERS)
    )


def without_pinned(message: Message) -> Message | None:
    """``message`` without its pinned blocks (``None`` when nothing else is left)."""
    blocks = tuple(b for b in message.content if not is_pinned(b))
    if len(blocks) == len(message.content):
        return message
    if not blocks:
        return None
    extra = {k: v for k, v in message.extra.items() if k != PINNED_KEY}
    return replace(message, content=blocks, extra=extra)


def system_part(
    system: Sequence[Message], block: TextBlock | None, fmt: str | None
) -> list[Message]:
    """The leading system messages without an old pinned block, plus ``block``.

    OpenAI: its own ``system`` message. Otherwise a text block appended to the last
    system message (an Anthropic request has one ``system`` field, so a second
    system message would not come back as one), or a new system message.
    """
    out = [x for x in (without_pinned(m) for m in system) if x is not None]
    if block is None:
        return out
    if fmt == "openai" or not out:
        return [*out, Message("system", (block,), plain=True)]
    last = out[-1]
    return [*out[:-1], replace(last, content=(*last.content, block), plain=False)]
