"""``compact()``: summarize the older part of a transcript, keep a verbatim tail,
and fit a total budget, as the sequence of named steps in :mod:`._steps`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Unpack

from ctxwise.compaction._steps import (
    BareCut,
    Skip,
    bare_result,
    budget_summary,
    compacted,
    fit,
    keep,
    no_change,
    plan_cut,
    read_window,
    safe_cuts,
    scannable,
    settled,
    summarize,
)
from ctxwise.compaction.archive import archive
from ctxwise.compaction.cuts import user_messages
from ctxwise.compaction.result import Compaction, media_note
from ctxwise.compaction.settings import CompactionSettings, SettingsOverrides, positive
from ctxwise.compaction.summary import summarizer_call
from ctxwise.errors import UsageError
from ctxwise.memory.facts import CaseFacts, Fact, Rule, Rules
from ctxwise.memory.store import Store, check_namespace
from ctxwise.messages import Transcript
from ctxwise.pairing import refuse_malformed
from ctxwise.summarize import ExtractiveSummarizer, Summarizer
from ctxwise.tokens import CharCounter, TokenCounter

__all__ = ["compact", "scannable"]


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

    The steps, in order (:mod:`ctxwise.compaction._steps`): read the window; stop when
    it is settled; keep what must stay; plan the cut; budget the summary; archive;
    summarize (the summarizer is called at most once); fit.
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
    extractive = isinstance(chosen, ExtractiveSummarizer)
    run_summarizer = summarizer_call(chosen, cfg.instructions)

    window = read_window(transcript, cfg, ctr, budget)
    users = user_messages(window.messages, window.start)
    if (done := settled(window, cfg, users)) is not None:
        return no_change(window, done.reason)
    safe = safe_cuts(window)
    if not safe:
        return no_change(window, "nothing after the system part and the summary can be summarized")
    kept = keep(window, cfg, users, facts, rules)

    cut = plan_cut(kept, cfg, safe)
    if isinstance(cut, Skip):
        return no_change(window, cut.reason)
    if isinstance(cut, BareCut):
        archive_id = archive(store, ns, transcript) if store is not None else None
        return bare_result(kept, cut, archive_id)

    plan = budget_summary(kept, cfg, cut, blank_kept=extractive)
    if isinstance(plan, Skip):
        return no_change(window, plan.reason)

    # archive first: the full input, in one atomic write, before the summarizer runs
    archive_id = archive(store, ns, transcript) if store is not None else None
    dropped = kept.dropped(cut)

    body = summarize(
        run_summarizer,
        kept,
        plan,
        name=type(chosen).__name__,
        extractive=extractive,
        archive_id=archive_id,
    )

    fitted = fit(kept, plan, body, media_note(dropped, archive_id))
    if isinstance(fitted, Skip):
        return no_change(window, fitted.reason)
    return compacted(kept, plan, fitted, dropped, archive_id)
