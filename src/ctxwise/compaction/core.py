"""``compact()``: summarize the older part of a transcript, keep a verbatim tail,
and fit a total budget."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Unpack

from ctxwise.compaction.archive import archive
from ctxwise.compaction.cuts import cuts, head, is_real_user, is_summary, user_messages
from ctxwise.compaction.errors import (
    CompactionBudgetError,
    EmptyTranscriptError,
    SummarizerError,
    largest_item,
)
from ctxwise.compaction.pinned import PinnedState, system_part
from ctxwise.compaction.result import Compaction, DroppedMedia, dropped_media, media_note
from ctxwise.compaction.settings import CompactionSettings, SettingsOverrides, positive
from ctxwise.compaction.summary import (
    compose,
    extra_blocks,
    fit_lines,
    read_previous,
    strip_rules,
    summarizer_call,
    user_lines,
)
from ctxwise.errors import UsageError
from ctxwise.memory.facts import MAX_TEXT_CHARS as FACT_TEXT_CHARS
from ctxwise.memory.facts import CaseFacts, Fact, Rule, Rules
from ctxwise.memory.store import Store, check_namespace
from ctxwise.messages import (
    ContentBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    Transcript,
    block_text,
)
from ctxwise.pairing import PairingError, placement_for, refuse_malformed, repair_pairing
from ctxwise.summarize import ExtractiveSummarizer, Summarizer, render_turns
from ctxwise.tokens import CharCounter, TokenCounter, truncate_to_tokens

__all__ = ["compact", "scannable"]

_MIN_EMPTY_CHECK = 64
"""A summarizer given at least this many tokens for a range with text must say
something; an empty answer then is a failure (:class:`SummarizerError`)."""


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


def _pinned(
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


def compact(
    transcript: Transcript,
    summarizer: Summarizer | None = None,
    *,
    budget: int | None = None,
    settings: CompactionSettings | None = None,
    facts: CaseFacts | Iterable[Fact] | None = None,
    rules: Rules | Iterable[Rule | str] | None = None,
    store: Store | None = None,
    counter: TokenCounter | None = None,
    **overrides: Unpack[SettingsOverrides],
) -> Compaction:
    """Summarize the older part of ``transcript`` and keep a verbatim tail (see the
    package doc for every rule). A transcript with compaction boundaries is
    compacted as its :meth:`~ctxwise.messages.Transcript.live_window`; indices in
    the result are that window's.

    ``budget``: the whole output window (system part, pinned block, summary and
    tail) holds at most this many tokens by ``counter``, or
    :class:`CompactionBudgetError` names the parts that alone exceed it. Without a
    budget, give ``keep_tail_tokens`` or ``keep_tail_turns`` (in ``settings`` or as
    keywords): only the tail is bounded then, and the summary comes on top, cut back
    so that the window still shrinks (nothing is compacted when even the smallest
    summary is no smaller than what it replaces). When the
    conversation already fits, nothing is compacted and ``reason`` says so.
    """
    if not isinstance(transcript, Transcript):
        raise UsageError(f"compact() takes a Transcript, got {type(transcript).__name__}")
    refuse_malformed(transcript)
    cfg = (settings if settings is not None else CompactionSettings()).with_overrides(overrides)
    if budget is not None:
        positive("budget", budget)
    elif cfg.keep_tail_tokens is None and cfg.keep_tail_turns is None:
        raise UsageError("give a budget, keep_tail_tokens or keep_tail_turns")
    ns = check_namespace(cfg.namespace) if store is not None else tuple(cfg.namespace)
    ctr = counter if counter is not None else CharCounter()
    chosen: Summarizer = summarizer if summarizer is not None else ExtractiveSummarizer(ctr)
    run_summarizer = summarizer_call(chosen, cfg.instructions)

    messages = transcript.messages
    if not messages:
        raise EmptyTranscriptError(transcript.source, "the transcript has no messages")
    s, start = head(messages)
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
    n = len(messages)
    s, start = head(messages)
    # a counter's per-request overhead (tiktoken's reply priming) is in every
    # count_messages() but once in a window: the parts below are counted without it
    probe = (Message.text_message("user", ""),)
    framing = max(0, 2 * ctr.count_messages(probe) - ctr.count_messages(probe * 2))

    def tokens_of(part: Sequence[Message]) -> int:
        return ctr.count_messages(part) - framing if part else 0

    sizes = [tokens_of((m,)) for m in messages]
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    tokens_before = ctr.count_messages(messages)

    def noop(reason: str) -> Compaction:
        return Compaction(
            transcript=work,
            summary="",
            cut_index=s,
            tokens_before=tokens_before,
            tokens_after=tokens_before,
            tail_tokens=suffix[s],
            summary_tokens=0,
            summarized_messages=0,
            dropped_media=(),
            archive_id=None,
            facts=(),
            rules=(),
            counter=ctr.name,
            reason=reason,
            repaired=repaired,
            budget=budget,
        )

    if budget is not None and tokens_before <= budget:
        return noop(f"the transcript ({tokens_before:,} tokens) already fits the budget")
    if (
        budget is None
        and cfg.keep_tail_tokens is not None
        and suffix[start] <= cfg.keep_tail_tokens
    ):
        return noop(
            f"the conversation after the system part ({suffix[s]:,} tokens) already fits "
            f"keep_tail_tokens={cfg.keep_tail_tokens:,}"
        )
    users = user_messages(messages, start)
    if budget is None and cfg.keep_tail_turns is not None and cfg.keep_tail_turns > len(users):
        return noop(
            f"the conversation has {len(users)} user turn(s) after the summary; "
            f"keep_tail_turns={cfg.keep_tail_turns} keeps them all"
        )
    safe = cuts(messages, start)
    if start > s and budget is not None:
        # a previous summary can be summarized again on its own, to shrink it
        safe = [start, *safe]
    if not safe:
        return noop("nothing after the system part and the summary can be summarized")

    # ---- what must stay: the system part with the pinned block, and the task
    state = _pinned(messages, s, start, facts, rules, cfg)
    pinned_block = state.block()
    system = list(messages[:s])
    new_system = system_part(system, pinned_block, work.format)
    bare_system = system_part(system, None, work.format)
    system_tokens = tokens_of(new_system)
    bare_tokens = tokens_of(bare_system)
    previous = read_previous(messages[s] if start > s else None)
    latest = users[-1] if users else None
    # the message holding the task: the latest user message, or else the previous
    # summary, whose last kept user message is the task (its media are its blocks)
    task_at = latest if latest is not None else (s if previous.users else None)

    def required(c: int) -> tuple[list[str], tuple[ContentBlock, ...]]:
        """The user lines and blocks the summary must hold for a cut at ``c``."""
        if latest is not None:
            if latest < c:
                return user_lines(latest, messages[latest]), extra_blocks(messages[latest])
            return [], ()
        if not previous.users:
            return [], ()
        return list(previous.users[-1]), extra_blocks(messages[s])

    # media leaving with messages[s:c], counted once: (images, documents) before c
    media_before = [(0, 0)] * (n + 1)
    images = docs = 0
    for i in range(n):
        if i >= s and i != task_at:
            for d in dropped_media(messages, i, i + 1):
                images, docs = (images + 1, docs) if d.media == "image" else (images, docs + 1)
        media_before[i + 1] = (images, docs)
    floors: dict[tuple[bool, int, int], tuple[Message, int]] = {}

    def floor(c: int) -> tuple[Message, int]:
        """The smallest summary message for a cut at ``c``, and its tokens."""
        key = (latest is not None and latest < c, *media_before[c])
        if key not in floors:
            lines, blocks = required(c)
            note = media_note(_dropped(messages, s, c, task_at), None) if key[1] + key[2] else ""
            msg = compose(lines, "", note, blocks)
            floors[key] = (msg, tokens_of((msg,)))
        return floors[key]

    def floor_message(c: int) -> Message:
        return floor(c)[0]

    def need(c: int) -> int:
        return framing + system_tokens + floor(c)[1] + suffix[c]

    # ---- the cut
    if budget is not None:
        room = budget - framing - system_tokens
        reserve = min(cfg.summary_tokens, max(0, room) // 4)
        if cfg.keep_tail_tokens is not None:
            target = cfg.keep_tail_tokens
        else:
            target = max(0, int((room - tokens_of((floor_message(n),))) * cfg.tail_share))
        candidates = safe
        if cfg.keep_tail_turns is not None and cfg.keep_tail_turns <= len(users):
            at = users[-cfg.keep_tail_turns]
            candidates = [c for c in safe if c >= at] or safe
            target = suffix[candidates[0]]
        cut = next(
            (c for c in candidates if suffix[c] <= target and need(c) + reserve <= budget),
            None,
        )
        if cut is None:
            cut = next((c for c in candidates if need(c) <= budget), None)
        if cut is None:
            c = candidates[-1]
            # the least a window can be: the system part, the task as the user wrote
            # it (no summary framing) and whatever tail cannot be cut
            if latest is not None:
                task: tuple[Message, ...] = (messages[latest],) if latest < c else ()
            elif previous.written:  # the task, as the user wrote it, from the summary
                blocks = (TextBlock(previous.written[-1]), *required(c)[1])
                task = (Message("user", blocks, plain=len(blocks) == 1),)
            else:
                task = ()
            bare = (*new_system, *task, *messages[c:])
            first = next((m for m in bare if m.role != "system"), None)
            if first is not None and first.role == "user" and ctr.count_messages(bare) <= budget:
                archive_id = archive(store, ns, transcript) if store is not None else None
                return Compaction(
                    transcript=Transcript(bare, work.params, (), work.source, work.format),
                    summary="",
                    cut_index=c,
                    tokens_before=tokens_before,
                    tokens_after=ctr.count_messages(bare),
                    tail_tokens=suffix[c],
                    summary_tokens=0,
                    summarized_messages=c - s,
                    dropped_media=_dropped(messages, s, c, task_at),
                    archive_id=archive_id,
                    facts=tuple(state.facts),
                    rules=tuple(state.rules),
                    counter=ctr.name,
                    reason=(
                        f"the budget holds only the system part and the latest user message: "
                        f"messages {s}–{c - 1} left with no summary"
                        + (", the latest user message kept as it was" if task else "")
                    ),
                    repaired=repaired,
                    budget=budget,
                    user_messages=(latest,) if task and latest is not None and latest < c else (),
                    mid_turn=c < n and not is_real_user(messages[c]),
                )
            parts = {
                "system": bare_tokens,
                "pinned": system_tokens - bare_tokens,
                "latest user message": sizes[latest] if latest is not None and latest < c else 0,
            }
            if first is not None and first.role == "user":
                # the least is the bare window above (no summary, no framing): name
                # its size, so a budget of `required` compacts
                if latest is None:
                    parts["latest user message"] = tokens_of(task)
                parts["message framing"] = (
                    ctr.count_messages(bare) - suffix[c] - sum(parts.values())
                )
            else:
                parts["summary framing"] = need(c) - suffix[c] - sum(parts.values())
            if suffix[c]:
                parts["tail"] = suffix[c]
            big = largest_item(messages, latest, latest + 1, ctr) if latest is not None else None
            raise CompactionBudgetError(budget, parts, big, source=transcript.source)
    elif cfg.keep_tail_turns is not None:
        at = users[-cfg.keep_tail_turns]
        if at <= start:
            return noop(
                f"nothing lies before the last {cfg.keep_tail_turns} user turn(s) but the "
                "system part and the summary"
            )
        at_turn = next((c for c in safe if c >= at), None)
        if at_turn is None:
            return noop("no safe cut at or after the kept user turns")
        cut = at_turn
    else:
        assert cfg.keep_tail_tokens is not None
        fitting = next((c for c in safe if suffix[c] <= cfg.keep_tail_tokens), None)
        if fitting is None:
            return noop("no safe cut leaves a tail within keep_tail_tokens")
        cut = fitting

    # ---- the summary's budget
    tail = messages[cut:]
    must_lines, must_blocks = required(cut)
    base = floor_message(cut)
    # without a budget the window must still shrink: a summary no smaller than the
    # messages it replaces would make the compacted window larger than the input
    limit = budget if budget is not None else tokens_before - 1
    if budget is None and need(cut) > limit:
        pinned_cost = system_tokens - bare_tokens
        return noop(
            f"compacting would not shrink the window: the smallest summary of messages "
            f"{s}–{cut - 1} ({floor(cut)[1]:,} tokens"
            + (f", and {pinned_cost:,} for the pinned block" if pinned_cost else "")
            + f") is no smaller than the {suffix[s] - suffix[cut]:,} tokens it would replace"
        )
    content_budget = cfg.summary_tokens
    if budget is not None:
        content_budget = min(content_budget, budget - need(cut))
    content_budget = max(0, content_budget)

    kept_users: list[int] = [latest] if latest is not None and latest < cut else []
    earlier_lines: list[list[str]] = []
    user_budget = int(content_budget * cfg.user_share)
    used = 0
    pool: list[tuple[int | None, list[str]]] = [(None, list(g)) for g in previous.users]
    pool += [(i, user_lines(i, messages[i])) for i in users if i < cut and i != latest]
    if latest is None and previous.users:
        pool = pool[:-1]  # the required one
    for idx, lines in reversed(pool):
        lines = [x for x in lines if strip_rules(x, state.rules)]  # a pinned rule is pinned
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
    summarizer_budget = content_budget - used

    # turns for the summarizer: the range; an extractive one would quote the user
    # messages kept verbatim a second time, so it gets them blanked
    blank = set(kept_users) if isinstance(chosen, ExtractiveSummarizer) else set()
    turns = [
        Message(m.role, (), m.kind, m.plain, m.id, m.timestamp) if start + k in blank else m
        for k, m in enumerate(messages[start:cut])
    ]

    # archive first: the full input, in one atomic write, before the summarizer runs
    archive_id = archive(store, ns, transcript) if store is not None else None
    dropped = _dropped(messages, s, cut, task_at)
    note = media_note(dropped, archive_id)

    name = type(chosen).__name__
    body = ""
    if summarizer_budget >= 1:
        try:
            raw = run_summarizer(previous.rest, turns, summarizer_budget, start)
        except Exception as exc:
            raise SummarizerError(
                name,
                f"{type(exc).__name__}: {exc}",
                archive_id=archive_id,
                archived_messages=len(transcript.messages) if archive_id else 0,
            ) from exc
        if not isinstance(raw, str):
            raise SummarizerError(
                name,
                f"returned {type(raw).__name__}, not text",
                archive_id=archive_id,
                archived_messages=len(transcript.messages) if archive_id else 0,
            )
        has_text = bool(previous.rest.strip() or render_turns(turns).strip())
        # an empty extractive summary is a finding (no line carried anything worth a
        # token: a bare tool call, say), not a failure as an LLM's empty reply is
        failed = not isinstance(chosen, ExtractiveSummarizer)
        if not raw.strip() and has_text and failed and summarizer_budget >= _MIN_EMPTY_CHECK:
            raise SummarizerError(
                name,
                "it returned an empty summary",
                archive_id=archive_id,
                archived_messages=len(transcript.messages) if archive_id else 0,
            )
        body = strip_rules(raw.strip(), state.rules).strip()
        if ctr.count(body) > summarizer_budget:
            body = truncate_to_tokens(body, summarizer_budget, ctr)

    summary_msg = compose(user_part, body, note, must_blocks)
    out = (*new_system, summary_msg, *tail)
    total = ctr.count_messages(out)
    if total > limit:
        # a counter that does not add up block by block, or (without a budget) a summary
        # larger than its range: shrink the free part until the window fits
        for _ in range(8):
            excess = total - limit
            if body:
                body = truncate_to_tokens(body, max(0, ctr.count(body) - excess - 1), ctr)
            elif len(user_part) > len(must_lines):
                extra = user_part[: len(user_part) - len(must_lines)]
                keep = fit_lines(extra, max(0, ctr.count("\n".join(extra)) - excess - 1), ctr)
                user_part = [*([keep] if keep else []), *must_lines]
            else:
                note = ""
            summary_msg = compose(user_part, body, note, must_blocks)
            out = (*new_system, summary_msg, *tail)
            total = ctr.count_messages(out)
            if total <= limit:
                break
        else:
            summary_msg = base
            out = (*new_system, summary_msg, *tail)
            total = ctr.count_messages(out)
        if total > limit and budget is None:
            return noop(
                f"the summary of messages {s}–{cut - 1} would leave the window no smaller "
                f"({total:,} tokens)"
            )
        if budget is not None and total > budget:
            raise CompactionBudgetError(
                budget,
                {
                    "system": bare_tokens,
                    "pinned": system_tokens - bare_tokens,
                    "summary": tokens_of((summary_msg,)),
                    "tail": suffix[cut],
                },
                source=transcript.source,
            )
    summary_text = summary_msg.content[0].text if summary_msg.content else ""  # type: ignore[union-attr]
    result = Transcript(out, work.params, (), work.source, work.format)
    return Compaction(
        transcript=result,
        summary=summary_text,
        cut_index=cut,
        tokens_before=tokens_before,
        tokens_after=total,
        tail_tokens=suffix[cut],
        summary_tokens=tokens_of((summary_msg,)),
        summarized_messages=cut - s,
        dropped_media=dropped,
        archive_id=archive_id,
        facts=tuple(state.facts),
        rules=tuple(state.rules),
        counter=ctr.name,
        reason=(
            f"summarized messages {s}–{cut - 1}"
            + (f"; the tail from message {cut} is verbatim" if cut < n else "; no tail kept")
        ),
        repaired=repaired,
        budget=budget,
        user_messages=tuple(sorted(kept_users)),
        mid_turn=cut < n and not is_real_user(messages[cut]) and not is_summary(messages[cut]),
    )


def _dropped(
    messages: Sequence[Message], lo: int, hi: int, task_at: int | None
) -> tuple[DroppedMedia, ...]:
    """Media leaving with ``messages[lo:hi]``, except the task's (kept with it)."""
    return tuple(d for d in dropped_media(messages, lo, hi) if d.message_index != task_at)
