"""The steps :func:`~ctxwise.compaction.compact` runs, in order.

``compact()`` reads the live window (:func:`read_window`), stops early when nothing
needs compacting (:func:`settled`, :func:`safe_cuts`), reads what must stay
(:func:`keep`), then:

1. **plan the cut** (:func:`plan_cut`): where the verbatim tail starts, or a window
   with no room for a summary (:class:`BareCut`), or nothing to do (:class:`Skip`);
2. **budget the summary** (:func:`budget_summary`): what the summary may spend,
   the user's earlier messages it keeps verbatim, the turns the summarizer reads;
3. **archive** the input (:func:`~ctxwise.compaction.archive.archive`), before
   anything can fail in the summarizer;
4. **summarize** (:func:`summarize`): one call of the summarizer, checked;
5. **fit** (:func:`fit`): the window within its limit, the free part of the summary
   cut back when a counter does not add up block by block.

Each step is a function of the values before it, with no side effect but the
archive; the results (:func:`no_change`, :func:`bare_result`, :func:`compacted`)
are built from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ctxwise.assembly import fit_as_sent
from ctxwise.compaction.cuts import cuts, head, is_real_user, is_summary
from ctxwise.compaction.errors import (
    CompactionBudgetError,
    EmptyTranscriptError,
    SummarizerError,
    largest_item,
)
from ctxwise.compaction.pinned import PinnedState, system_part
from ctxwise.compaction.result import Compaction, DroppedMedia, dropped_media, media_note
from ctxwise.compaction.settings import CompactionSettings
from ctxwise.compaction.summary import (
    PreviousSummary,
    SummaryCall,
    compose,
    extra_blocks,
    fit_lines,
    read_previous,
    strip_rules,
    user_lines,
)
from ctxwise.memory.facts import MAX_TEXT_CHARS as FACT_TEXT_CHARS
from ctxwise.memory.facts import CaseFacts, Fact, Rule, Rules
from ctxwise.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    Transcript,
    block_text,
)
from ctxwise.pairing import PairingError, placement_for, repair_pairing
from ctxwise.summarize import render_turns
from ctxwise.tokens import TokenCounter, truncate_to_tokens

__all__: list[str] = []

MIN_EMPTY_CHECK = 64
"""A summarizer given at least this many tokens for a range with text must say
something; an empty answer then is a failure (:class:`SummarizerError`)."""

FIT_ROUNDS = 8
"""How many times :func:`fit` cuts the summary's free part back before it falls
back to the smallest summary."""


# ---- the window --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    """The live window of a checked transcript, every message counted once.

    ``head`` is the first message after the system part, ``start`` the first after
    the system part and a previous summary; ``suffix[i]`` is the tokens of
    ``messages[i:]`` without the counter's per-request framing."""

    source: Transcript
    work: Transcript
    head: int
    start: int
    framing: int
    sizes: tuple[int, ...]
    suffix: tuple[int, ...]
    tokens_before: int
    repaired: tuple[str, ...]
    counter: TokenCounter
    budget: int | None

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.work.messages

    @property
    def n(self) -> int:
        return len(self.work.messages)

    def tokens_of(self, part: Sequence[Message]) -> int:
        """The tokens of ``part`` without the counter's per-request framing."""
        return self.counter.count_messages(part) - self.framing if part else 0

    def transcript(self, messages: Sequence[Message]) -> Transcript:
        """``messages`` as a transcript of the window's parameters, source and format."""
        w = self.work
        return Transcript(tuple(messages), w.params, (), w.source, w.format)


def read_window(
    transcript: Transcript, cfg: CompactionSettings, ctr: TokenCounter, budget: int | None
) -> Window:
    """The window ``compact()`` works on: pairing checked (or repaired with
    ``cfg.repair``), the messages after the last compaction boundary, each counted.

    Raises:
        EmptyTranscriptError: no messages, or only system messages.
        PairingError: tool pairing problems and ``cfg.repair`` is off.
    """
    messages = transcript.messages
    if not messages:
        raise EmptyTranscriptError(transcript.source, "the transcript has no messages")
    s, _ = head(messages)
    if s == len(messages):
        raise EmptyTranscriptError(transcript.source, "the transcript has only system messages")
    repaired: tuple[str, ...] = ()
    rule = placement_for(transcript)
    if cfg.repair:
        work, problems = repair_pairing(transcript, placement=rule)
        repaired = tuple(
            f"message {p.message_index}: {p.kind.value} {p.tool_use_id}" for p in problems
        )
    else:
        found = tuple(transcript.problems(rule))
        if found:
            raise PairingError(found, rule, transcript.source)
        work = transcript
    # one window: the messages after the last compaction boundary (indices below
    # are that window's)
    work = work.live_window()
    messages = work.messages
    s, start = head(messages)
    # a counter's per-request overhead (tiktoken's reply priming) is in every
    # count_messages() but once in a window: the parts below are counted without it
    probe = (Message.text_message("user", ""),)
    framing = max(0, 2 * ctr.count_messages(probe) - ctr.count_messages(probe * 2))
    sizes = [ctr.count_messages((m,)) - framing for m in messages]
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    return Window(
        source=transcript,
        work=work,
        head=s,
        start=start,
        framing=framing,
        sizes=tuple(sizes),
        suffix=tuple(suffix),
        tokens_before=ctr.count_messages(messages),
        repaired=repaired,
        counter=ctr,
        budget=budget,
    )


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing is compacted, for ``reason``."""

    reason: str


def settled(w: Window, cfg: CompactionSettings, users: Sequence[int]) -> Skip | None:
    """Why the window needs no compaction as it is (it fits the budget, or the
    tail bound alone keeps it whole), or ``None``."""
    budget = w.budget
    if budget is not None and w.tokens_before <= budget:
        return Skip(f"the transcript ({w.tokens_before:,} tokens) already fits the budget")
    if (
        budget is None
        and cfg.keep_tail_tokens is not None
        and w.suffix[w.start] <= cfg.keep_tail_tokens
    ):
        return Skip(
            f"the conversation after the system part ({w.suffix[w.head]:,} tokens) already "
            f"fits keep_tail_tokens={cfg.keep_tail_tokens:,}"
        )
    if budget is None and cfg.keep_tail_turns is not None and cfg.keep_tail_turns > len(users):
        return Skip(
            f"the conversation has {len(users)} user turn(s) after the summary; "
            f"keep_tail_turns={cfg.keep_tail_turns} keeps them all"
        )
    return None


def safe_cuts(w: Window) -> list[int]:
    """The safe cuts of the window, ascending (see :mod:`ctxwise.compaction.cuts`);
    with a budget, a previous summary can be summarized again on its own, to shrink
    it, so the cut right after it counts too."""
    safe = cuts(w.messages, w.start)
    if w.start > w.head and w.budget is not None:
        safe = [w.start, *safe]
    return safe


# ---- what must stay ----------------------------------------------------------------------


def scannable(m: Message) -> Message:
    """``m`` with every text and tool result cut to what the fact extractor accepts
    (its first :data:`~ctxwise.memory.facts.MAX_TEXT_CHARS` characters)."""
    if all(len(block_text(b)) <= FACT_TEXT_CHARS for b in m.content):
        return m
    blocks: list[ContentBlock] = []
    for b in m.content:
        text = block_text(b)
        if len(text) <= FACT_TEXT_CHARS:
            blocks.append(b)
        elif isinstance(b, ToolResultBlock):
            blocks.append(ToolResultBlock(b.tool_use_id, text[:FACT_TEXT_CHARS], b.is_error))
        elif isinstance(b, TextBlock):
            blocks.append(TextBlock(text[:FACT_TEXT_CHARS]))
    return replace(m, content=tuple(blocks))


def pinned_state(
    messages: Sequence[Message],
    s: int,
    start: int,
    facts: CaseFacts | Iterable[Fact] | None,
    rules: Rules | Iterable[Rule | str] | None,
    cfg: CompactionSettings,
) -> PinnedState:
    """Earlier pinned state, then given rules, then what the extractor finds in the
    new conversation, then the given facts (a given fact wins)."""
    carriers = [*messages[:s], *(messages[s : s + 1] if start > s else ())]
    state = PinnedState.read(carriers)
    state.add_rules(rules or ())
    if cfg.extract:
        scanned = [scannable(m) for m in messages[start:]]
        state.facts.update_from_messages(scanned, offset=start, extractor=cfg.extractor)
        state.rules.capture_messages(scanned, offset=start)
    state.add_facts(facts or ())
    return state


FloorKey = tuple[bool, int, int]
"""(the latest user message is summarized, images, documents leaving)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """What stays whatever the cut: the system part with the pinned block, the task
    (the latest user message, or else the previous summary's last kept one), and
    the smallest summary each cut needs (:meth:`floor`, cached by what it holds)."""

    window: Window
    state: PinnedState
    system: tuple[Message, ...]
    """The system part with the pinned block."""
    system_tokens: int
    bare_tokens: int
    """The system part's tokens without the pinned block."""
    previous: PreviousSummary
    users: tuple[int, ...]
    latest: int | None
    task_at: int | None
    """The message holding the task: the latest user message, or else the previous
    summary, whose last kept user message is the task (its media are its blocks)."""
    media_before: tuple[tuple[int, int], ...]
    """(images, documents) leaving with ``messages[head:c]``, at ``c``; the task's
    media stay with it."""
    floors: dict[FloorKey, tuple[Message, int]] = field(default_factory=dict)

    def required(self, c: int) -> tuple[list[str], tuple[ContentBlock, ...]]:
        """The user lines and blocks the summary must hold for a cut at ``c``."""
        messages = self.window.messages
        if self.latest is not None:
            if self.latest < c:
                latest = messages[self.latest]
                return user_lines(self.latest, latest), extra_blocks(latest)
            return [], ()
        if not self.previous.users:
            return [], ()
        return list(self.previous.users[-1]), extra_blocks(messages[self.window.head])

    def floor(self, c: int) -> tuple[Message, int]:
        """The smallest summary message for a cut at ``c``, and its tokens."""
        key = (self.latest is not None and self.latest < c, *self.media_before[c])
        if key not in self.floors:
            lines, blocks = self.required(c)
            note = media_note(self.dropped(c), None) if key[1] + key[2] else ""
            msg = compose(lines, "", note, blocks)
            self.floors[key] = (msg, self.window.tokens_of((msg,)))
        return self.floors[key]

    def need(self, c: int) -> int:
        """The tokens of the smallest window cut at ``c``: framing, the system part
        with the pinned block, the smallest summary and the tail."""
        w = self.window
        return w.framing + self.system_tokens + self.floor(c)[1] + w.suffix[c]

    def dropped(self, c: int) -> tuple[DroppedMedia, ...]:
        """Media leaving with ``messages[head:c]``, except the task's (kept with it)."""
        messages, lo = self.window.messages, self.window.head
        return tuple(d for d in dropped_media(messages, lo, c) if d.message_index != self.task_at)


def keep(
    w: Window,
    cfg: CompactionSettings,
    users: Sequence[int],
    facts: CaseFacts | Iterable[Fact] | None,
    rules: Rules | Iterable[Rule | str] | None,
) -> Kept:
    """What must stay: the pinned state (:func:`pinned_state`), the system part with
    and without its pinned block, the previous summary, the task and its media."""
    messages, s, start = w.messages, w.head, w.start
    state = pinned_state(messages, s, start, facts, rules, cfg)
    system = list(messages[:s])
    new_system = system_part(system, state.block(), w.work.format)
    bare_system = system_part(system, None, w.work.format)
    previous = read_previous(messages[s] if start > s else None)
    latest = users[-1] if users else None
    task_at = latest if latest is not None else (s if previous.users else None)
    media_before = [(0, 0)] * (w.n + 1)
    images = docs = 0
    for i in range(w.n):
        if i >= s and i != task_at:
            for d in dropped_media(messages, i, i + 1):
                images, docs = (images + 1, docs) if d.media == "image" else (images, docs + 1)
        media_before[i + 1] = (images, docs)
    return Kept(
        window=w,
        state=state,
        system=tuple(new_system),
        system_tokens=w.tokens_of(new_system),
        bare_tokens=w.tokens_of(bare_system),
        previous=previous,
        users=tuple(users),
        latest=latest,
        task_at=task_at,
        media_before=tuple(media_before),
    )


# ---- 1. plan the cut ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BareCut:
    """A budget that holds no summary: the system part, the task as the user wrote
    it, and the tail from ``cut``."""

    cut: int
    messages: tuple[Message, ...]
    task: tuple[Message, ...]


def plan_cut(kept: Kept, cfg: CompactionSettings, safe: Sequence[int]) -> int | BareCut | Skip:
    """Where the verbatim tail starts.

    With a budget: the first safe cut whose tail is within the target
    (``keep_tail_tokens``, or ``tail_share`` of the room the smallest summary leaves)
    and that leaves the summary its reserve; else the first that fits at all; else
    the bare window (:class:`BareCut`) when it fits.
    Without one: at the ``keep_tail_turns``-th last user message, or the longest tail
    within ``keep_tail_tokens``.

    Raises:
        CompactionBudgetError: not even the bare window fits the budget; it names
            the parts that alone exceed it.
    """
    w, budget = kept.window, kept.window.budget
    users = kept.users
    if budget is not None:
        room = budget - w.framing - kept.system_tokens
        reserve = min(cfg.summary_tokens, max(0, room) // 4)
        if cfg.keep_tail_tokens is not None:
            target = cfg.keep_tail_tokens
        else:
            smallest = w.tokens_of((kept.floor(w.n)[0],))
            target = max(0, int((room - smallest) * cfg.tail_share))
        candidates = list(safe)
        if cfg.keep_tail_turns is not None and cfg.keep_tail_turns <= len(users):
            at = users[-cfg.keep_tail_turns]
            candidates = [c for c in safe if c >= at] or list(safe)
            target = w.suffix[candidates[0]]
        cut = next(
            (c for c in candidates if w.suffix[c] <= target and kept.need(c) + reserve <= budget),
            None,
        )
        if cut is None:
            cut = next((c for c in candidates if kept.need(c) <= budget), None)
        if cut is None:
            return bare_cut(kept, candidates[-1], budget)
        return cut
    if cfg.keep_tail_turns is not None:
        at = users[-cfg.keep_tail_turns]
        if at <= w.start:
            return Skip(
                f"nothing lies before the last {cfg.keep_tail_turns} user turn(s) but the "
                "system part and the summary"
            )
        at_turn = next((c for c in safe if c >= at), None)
        if at_turn is None:
            return Skip("no safe cut at or after the kept user turns")
        return at_turn
    assert cfg.keep_tail_tokens is not None
    fitting = next((c for c in safe if w.suffix[c] <= cfg.keep_tail_tokens), None)
    if fitting is None:
        return Skip("no safe cut leaves a tail within keep_tail_tokens")
    return fitting


def bare_cut(kept: Kept, c: int, budget: int) -> BareCut:
    """The least a window cut at ``c`` can be: the system part, the task as the user
    wrote it (no summary framing) and whatever tail cannot be cut, when it opens with
    a user message and fits ``budget``.

    Raises:
        CompactionBudgetError: it does not; the parts named are the ones that alone
            exceed ``budget``.
    """
    w, latest = kept.window, kept.latest
    messages, ctr = w.messages, w.counter
    task: tuple[Message, ...]
    if latest is not None:
        task = (messages[latest],) if latest < c else ()
    elif kept.previous.written:  # the task, as the user wrote it, from the summary
        blocks = (TextBlock(kept.previous.written[-1]), *kept.required(c)[1])
        task = (Message("user", blocks, plain=len(blocks) == 1),)
    else:
        task = ()
    bare = (*kept.system, *task, *messages[c:])
    first = next((m for m in bare if m.role != "system"), None)
    if first is not None and first.role == "user" and ctr.count_messages(bare) <= budget:
        return BareCut(c, bare, task)
    parts = {
        "system": kept.bare_tokens,
        "pinned": kept.system_tokens - kept.bare_tokens,
        "latest user message": w.sizes[latest] if latest is not None and latest < c else 0,
    }
    if first is not None and first.role == "user":
        # the least is the bare window above (no summary, no framing): name
        # its size, so a budget of `required` compacts
        if latest is None:
            parts["latest user message"] = w.tokens_of(task)
        parts["message framing"] = ctr.count_messages(bare) - w.suffix[c] - sum(parts.values())
    else:
        parts["summary framing"] = kept.need(c) - w.suffix[c] - sum(parts.values())
    if w.suffix[c]:
        parts["tail"] = w.suffix[c]
    big = largest_item(messages, latest, latest + 1, ctr) if latest is not None else None
    raise CompactionBudgetError(budget, parts, big, source=w.source.source)


# ---- 2. budget the summary ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SummaryPlan:
    """What the summary of ``messages[head:cut]`` may hold."""

    cut: int
    limit: int
    """The most tokens the compacted window may have: the budget, or (without one)
    one less than the window had, so that it shrinks."""
    must_lines: tuple[str, ...]
    must_blocks: tuple[ContentBlock, ...]
    smallest: Message
    """The smallest summary (the task and the media note alone)."""
    user_part: tuple[str, ...]
    """The user's messages kept verbatim, oldest first, then the required ones."""
    kept_users: tuple[int, ...]
    """Indices of the user messages the summary keeps verbatim (unsorted)."""
    summarizer_budget: int
    turns: tuple[Message, ...]
    """The messages the summarizer reads (``messages[start:cut]``)."""


def budget_summary(
    kept: Kept, cfg: CompactionSettings, cut: int, *, blank_kept: bool
) -> SummaryPlan | Skip:
    """The summary's budget for a cut at ``cut``: ``summary_tokens`` (within what
    the budget leaves), of which ``user_share`` goes first to the user's earlier
    messages, newest first and whole, and the rest to the summarizer. With
    ``blank_kept`` (an extractive summarizer, which would quote them a second time)
    the user messages kept verbatim reach the summarizer empty."""
    w, latest, previous = kept.window, kept.latest, kept.previous
    messages, s, ctr = w.messages, w.head, w.counter
    must_lines, must_blocks = kept.required(cut)
    # without a budget the window must still shrink: a summary no smaller than the
    # messages it replaces would make the compacted window larger than the input
    limit = w.budget if w.budget is not None else w.tokens_before - 1
    if w.budget is None and kept.need(cut) > limit:
        pinned_cost = kept.system_tokens - kept.bare_tokens
        return Skip(
            f"compacting would not shrink the window: the smallest summary of messages "
            f"{s}–{cut - 1} ({kept.floor(cut)[1]:,} tokens"
            + (f", and {pinned_cost:,} for the pinned block" if pinned_cost else "")
            + f") is no smaller than the {w.suffix[s] - w.suffix[cut]:,} tokens it would replace"
        )
    content_budget = cfg.summary_tokens
    if w.budget is not None:
        content_budget = min(content_budget, w.budget - kept.need(cut))
    content_budget = max(0, content_budget)

    kept_users: list[int] = [latest] if latest is not None and latest < cut else []
    earlier_lines: list[list[str]] = []
    user_budget = int(content_budget * cfg.user_share)
    used = 0
    pool: list[tuple[int | None, list[str]]] = [(None, list(g)) for g in previous.users]
    pool += [(i, user_lines(i, messages[i])) for i in kept.users if i < cut and i != latest]
    if latest is None and previous.users:
        pool = pool[:-1]  # the required one
    for idx, lines in reversed(pool):
        lines = [x for x in lines if strip_rules(x, kept.state.rules)]  # a pinned rule is pinned
        if not lines:
            continue
        cost = ctr.count("\n".join(lines)) + 1
        if used + cost > user_budget:
            continue
        used += cost
        earlier_lines.insert(0, lines)
        if idx is not None:
            kept_users.append(idx)
    user_part = [line for group in earlier_lines for line in group] + must_lines

    blank = set(kept_users) if blank_kept else set()
    start = w.start
    turns = tuple(
        Message(m.role, (), m.kind, m.plain, m.id, m.timestamp) if start + k in blank else m
        for k, m in enumerate(messages[start:cut])
    )
    return SummaryPlan(
        cut=cut,
        limit=limit,
        must_lines=tuple(must_lines),
        must_blocks=must_blocks,
        smallest=kept.floor(cut)[0],
        user_part=tuple(user_part),
        kept_users=tuple(kept_users),
        summarizer_budget=content_budget - used,
        turns=turns,
    )


# ---- 4. summarize ------------------------------------------------------------------------


def summarize(
    run: SummaryCall,
    kept: Kept,
    plan: SummaryPlan,
    *,
    name: str,
    extractive: bool,
    archive_id: str | None,
) -> str:
    """The summarizer's text for ``plan.turns`` (with the previous summary's rest),
    within ``plan.summarizer_budget`` tokens and without the pinned rules; ``""``
    when the plan leaves it no token (the summarizer is not called then).

    Raises:
        SummarizerError: it raised, returned something that is not text, or (an LLM
            one, given room and text) returned nothing; it names ``archive_id``.
    """
    budget = plan.summarizer_budget
    if budget < 1:
        return ""
    w, previous, ctr = kept.window, kept.previous, kept.window.counter
    archived = len(w.source.messages) if archive_id else 0
    try:
        raw = run(previous.rest, plan.turns, budget, w.start)
    except Exception as exc:
        raise SummarizerError(
            name, f"{type(exc).__name__}: {exc}", archive_id=archive_id, archived_messages=archived
        ) from exc
    if not isinstance(raw, str):
        raise SummarizerError(
            name,
            f"returned {type(raw).__name__}, not text",
            archive_id=archive_id,
            archived_messages=archived,
        )
    has_text = bool(previous.rest.strip() or render_turns(plan.turns).strip())
    # an empty extractive summary is a finding (no line carried anything worth a
    # token: a bare tool call, say), not a failure as an LLM's empty reply is
    if not raw.strip() and has_text and not extractive and budget >= MIN_EMPTY_CHECK:
        raise SummarizerError(
            name, "it returned an empty summary", archive_id=archive_id, archived_messages=archived
        )
    body = strip_rules(raw.strip(), kept.state.rules).strip()
    if ctr.count(body) > budget:
        body = truncate_to_tokens(body, budget, ctr)
    return body


# ---- 5. fit ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Draft:
    """A summary being fit: its parts, the message, and the window it makes."""

    user_part: list[str]
    body: str
    note: str
    summary: Message
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Fitted:
    """The compacted window: the system part, ``summary`` and the tail."""

    summary: Message
    messages: tuple[Message, ...]
    tokens: int


def fit(kept: Kept, plan: SummaryPlan, body: str, note: str) -> Fitted | Skip:
    """The window with the summary (the user part, ``body``, the media ``note``),
    within ``plan.limit``. A counter that does not add up block by block, or (without
    a budget) a summary larger than its range, makes it larger: then the free part
    (the body, else the earlier user lines, else the note) is cut back by the excess
    up to :data:`FIT_ROUNDS` times, and then the smallest summary is used.

    Raises:
        CompactionBudgetError: with a budget, not even that fits.
    """
    w, ctr, cut = kept.window, kept.window.counter, plan.cut
    tail = w.messages[cut:]
    must_lines = list(plan.must_lines)

    def built(user_part: list[str], body: str, note: str) -> _Draft:
        summary = compose(user_part, body, note, plan.must_blocks)
        return _Draft(user_part, body, note, summary, (*kept.system, summary, *tail))

    def shrink(d: _Draft, excess: int) -> _Draft:
        user_part, body, note = d.user_part, d.body, d.note
        if body:
            body = truncate_to_tokens(body, max(0, ctr.count(body) - excess - 1), ctr)
        elif len(user_part) > len(must_lines):
            extra = user_part[: len(user_part) - len(must_lines)]
            keep_line = fit_lines(extra, max(0, ctr.count("\n".join(extra)) - excess - 1), ctr)
            user_part = [*([keep_line] if keep_line else []), *must_lines]
        else:
            note = ""
        return built(user_part, body, note)

    draft, total, fits = fit_as_sent(
        built(list(plan.user_part), body, note),
        lambda d: ctr.count_messages(d.messages),
        plan.limit,
        shrink,
        FIT_ROUNDS,
    )
    if fits:
        return Fitted(draft.summary, draft.messages, total)
    summary = plan.smallest
    out = (*kept.system, summary, *tail)
    total = ctr.count_messages(out)
    if total > plan.limit and w.budget is None:
        return Skip(
            f"the summary of messages {w.head}–{cut - 1} would leave the window no smaller "
            f"({total:,} tokens)"
        )
    if w.budget is not None and total > w.budget:
        raise CompactionBudgetError(
            w.budget,
            {
                "system": kept.bare_tokens,
                "pinned": kept.system_tokens - kept.bare_tokens,
                "summary": w.tokens_of((summary,)),
                "tail": w.suffix[cut],
            },
            source=w.source.source,
        )
    return Fitted(summary, out, total)


# ---- results -----------------------------------------------------------------------------


def no_change(w: Window, reason: str) -> Compaction:
    """The window unchanged, with the ``reason`` nothing was compacted."""
    return Compaction(
        transcript=w.work,
        summary="",
        cut_index=w.head,
        tokens_before=w.tokens_before,
        tokens_after=w.tokens_before,
        tail_tokens=w.suffix[w.head],
        summary_tokens=0,
        summarized_messages=0,
        dropped_media=(),
        archive_id=None,
        facts=(),
        rules=(),
        counter=w.counter.name,
        reason=reason,
        repaired=w.repaired,
        budget=w.budget,
    )


def bare_result(kept: Kept, bare: BareCut, archive_id: str | None) -> Compaction:
    """The compaction to a bare window (:class:`BareCut`): no summary."""
    w, s, c, latest = kept.window, kept.window.head, bare.cut, kept.latest
    task = bare.task
    return Compaction(
        transcript=w.transcript(bare.messages),
        summary="",
        cut_index=c,
        tokens_before=w.tokens_before,
        tokens_after=w.counter.count_messages(bare.messages),
        tail_tokens=w.suffix[c],
        summary_tokens=0,
        summarized_messages=c - s,
        dropped_media=kept.dropped(c),
        archive_id=archive_id,
        facts=tuple(kept.state.facts),
        rules=tuple(kept.state.rules),
        counter=w.counter.name,
        reason=(
            f"the budget holds only the system part and the latest user message: "
            f"messages {s}–{c - 1} left with no summary"
            + (", the latest user message kept as it was" if task else "")
        ),
        repaired=w.repaired,
        budget=w.budget,
        user_messages=(latest,) if task and latest is not None and latest < c else (),
        mid_turn=c < w.n and not is_real_user(w.messages[c]),
    )


def compacted(
    kept: Kept,
    plan: SummaryPlan,
    fitted: Fitted,
    dropped: tuple[DroppedMedia, ...],
    archive_id: str | None,
) -> Compaction:
    """The compaction to ``fitted``: the summary of ``messages[head:cut]`` and the
    verbatim tail."""
    w, s, cut, n = kept.window, kept.window.head, plan.cut, kept.window.n
    summary = fitted.summary
    summary_text = summary.content[0].text if summary.content else ""  # type: ignore[union-attr]
    return Compaction(
        transcript=w.transcript(fitted.messages),
        summary=summary_text,
        cut_index=cut,
        tokens_before=w.tokens_before,
        tokens_after=fitted.tokens,
        tail_tokens=w.suffix[cut],
        summary_tokens=w.tokens_of((summary,)),
        summarized_messages=cut - s,
        dropped_media=dropped,
        archive_id=archive_id,
        facts=tuple(kept.state.facts),
        rules=tuple(kept.state.rules),
        counter=w.counter.name,
        reason=(
            f"summarized messages {s}–{cut - 1}"
            + (f"; the tail from message {cut} is verbatim" if cut < n else "; no tail kept")
        ),
        repaired=w.repaired,
        budget=w.budget,
        user_messages=tuple(sorted(plan.kept_users)),
        mid_turn=cut < n and not is_real_user(w.messages[cut]) and not is_summary(w.messages[cut]),
    )
