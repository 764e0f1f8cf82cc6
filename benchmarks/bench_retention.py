"""Which specifics survive a compaction: Claude Code's own summary, a greedy
baseline and ctxwise's, at the same size.

Each long Claude Code session in the shared data was auto-compacted by Claude
Code itself (a ``compact_boundary`` event, then a user message with
``isCompactSummary``). For each, the *compacted range* is every message before
the boundary. Its specifics (file paths, ids, numbers, error strings; see
:mod:`ctxwise.retention`) are listed, then checked against

- ``claude_code``: Claude Code's summary (the ``isCompactSummary`` message);
- ``greedy``: the naive greedy extractive baseline of issue 10: the lines of
  ``render_turns`` ranked by not-yet-covered specifics per character, best first
  while they fit (:func:`_common.greedy_summary`);
- ``greedy_excerpts``: the same greedy held to the rules of a ctxwise summary
  line (each line whole, with its origin ``[m12 Bash result]``, no numbering-only
  line; :func:`_common.greedy_excerpts`);
- ``ctxwise``: :class:`ctxwise.summarize.ExtractiveSummarizer`, the offline
  summarizer compaction uses by default.

Every summary gets the same budget, the token count (CharCounter) of Claude
Code's summary, and the same counter. The excerpt summaries are measured without
their origin prefixes (a message number ``[m42 …]`` would otherwise count as a
kept number 42); the JSON also gives their counts as written.

About half the numbers in these ranges occur only as the line-number gutter of a
file read (``  12→code``): where a line was, not what it said. The measure does not
count them (:mod:`ctxwise.retention`); the table also gives every count with them
(``count_gutters=True``; the JSON: ``total_with_gutters``), where the naive greedy,
which fills its summary with bare gutter lines, keeps more.

``ctxwise compact`` is the summary message :func:`ctxwise.compaction.compact`
writes for the same range at the same size (the user's messages verbatim first,
then the summarizer's excerpts; the header line left out).

Matching is generous to all: case-insensitive, and a path counts as kept when
its file name alone is. Specifics are split by origin: ``conversation`` (what the
user and the agent wrote, tool calls included) and ``tool_output`` (tool results,
which a tool call can fetch again). The JSON lists every specific and who kept it,
and ctxwise's summarize time (p50 of ``--repeat`` runs), also on a 150k-token
range (the sessions one after the other).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from _common import (
    excerpt_texts,
    greedy_excerpts,
    greedy_summary,
    long_sessions,
    percentile,
    print_table,
    say,
    write_results,
)
from ctxwise import CharCounter, Message, Transcript, read_transcript
from ctxwise.compaction import compact
from ctxwise.retention import retention
from ctxwise.summarize import ExtractiveSummarizer

KINDS = ("path", "id", "number", "error")


def _every(by_origin: dict[Any, frozenset[Any]]) -> frozenset[Any]:
    return frozenset().union(*by_origin.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed summarize runs")
    args = parser.parse_args()
    counter = CharCounter()
    rows: list[list[object]] = []
    sessions: list[dict[str, Any]] = []
    for path in long_sessions():
        t = read_transcript(path)
        boundary = t.compactions[0]  # none of the shared sessions has two
        summary_msg = t.messages[boundary.index]
        if summary_msg.kind != "compact_summary":
            continue
        compacted = t.messages[: boundary.index]
        budget = counter.count(summary_msg.text)
        summarizer = ExtractiveSummarizer(counter)
        times = []
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            ours = summarizer.summarize("", compacted, budget)
            times.append((time.perf_counter() - start) * 1000)
        written = {
            "claude_code": summary_msg.text,
            "greedy": greedy_summary(compacted, budget, counter),
            "greedy_excerpts": greedy_excerpts(compacted, budget, counter),
            "ctxwise": ours,
            "ctxwise compact": _compaction_summary(compacted, budget, counter),
        }
        measured = {
            name: text if name in ("claude_code", "greedy") else excerpt_texts(text)
            for name, text in written.items()
        }
        results = {name: retention(compacted, text) for name, text in measured.items()}
        raw = {
            name: retention(compacted, text, count_gutters=True) for name, text in measured.items()
        }
        entry: dict[str, Any] = {
            "session": path.name,
            "boundary_index": boundary.index,
            "pre_tokens_claude_code": boundary.pre_tokens,
            "compacted_messages": len(compacted),
            "compacted_tokens": counter.count_messages(compacted),
            "budget_tokens": budget,
            "summary_tokens": {name: counter.count(text) for name, text in written.items()},
            "summary_lines": {name: len(text.splitlines()) for name, text in written.items()},
            "ctxwise_summarize_ms": {
                "p50": round(percentile(times, 50), 1),
                "min": round(min(times), 1),
                "runs": len(times),
            },
            "counts": {name: r.counts() for name, r in results.items()},
            "total_with_gutters": {name: r.counts()["total"] for name, r in raw.items()},
            "counts_as_written": {
                name: retention(compacted, written[name]).counts()["total"]
                for name in ("greedy_excerpts", "ctxwise", "ctxwise compact")
            },
            "specifics": {},
        }
        base = results["claude_code"]
        for origin, present in base.present.items():
            entry["specifics"][origin] = [
                {"kind": s.kind, "value": s.key}
                | {name: s in r.kept[origin] for name, r in results.items()}
                for s in sorted(present, key=lambda s: (s.kind, s.key))
            ]
        sessions.append(entry)
        for name, r in results.items():
            c = r.counts()
            kept, present = c["total"]
            raw_kept, raw_present = entry["total_with_gutters"][name]
            by_kind = [
                sum(c[o].get(k, [0, 0])[0] for o in ("conversation", "tool_output")) for k in KINDS
            ]
            rows.append(
                [
                    path.name[:8],
                    name,
                    entry["summary_tokens"][name],
                    entry["summary_lines"][name],
                    f"{kept} / {present}",
                    f"{raw_kept} / {raw_present}",
                    len(r.kept["conversation"]),
                    len(r.kept["tool_output"]),
                    *by_kind,
                ]
            )
        totals = {name: r.counts()["total"][0] for name, r in results.items()}
        say(
            f"{path.name}: {len(compacted)} messages, {entry['compacted_tokens']:,} tokens "
            f"compacted into {budget:,}; kept "
            + ", ".join(f"{v} ({k})" for k, v in totals.items())
            + f"; ctxwise summarized in {entry['ctxwise_summarize_ms']['p50']} ms p50"
        )
    print_table(
        "specifics kept by the summary of the same compacted range, at the same size",
        [
            "session",
            "summary",
            "tokens",
            "lines",
            "kept / present",
            "with gutter numbers",
            "conversation",
            "tool output",
            *KINDS,
        ],
        rows,
        align="llrrrrrrrrrr",
        caption="with gutter numbers: also counting the line numbers of file reads "
        "('  12→code'), which the measure leaves out",
    )
    speed = _time_150k(counter, args.repeat)
    say(
        f"summarize a {speed['range_tokens']:,}-token range (the sessions one after the "
        f"other) into {speed['budget_tokens']:,} tokens: {speed['p50_ms']} ms p50, "
        f"{speed['min_ms']} ms min"
    )
    write_results("bench_retention", {"sessions": sessions, "range_150k": speed})


def _compaction_summary(messages: Sequence[Message], budget: int, counter: CharCounter) -> str:
    """The summary :func:`compact` writes for all of ``messages`` (no tail), its header
    line left out, at most ``budget`` tokens: the summary budget is lowered until the
    text fits (the latest user message is kept on top of ``summary_tokens``)."""
    t = Transcript(tuple(messages), format="claude-code")
    size = budget
    while size > 0:
        r = compact(t, keep_tail_tokens=1, summary_tokens=size, extract=False, counter=counter)
        text = "\n".join(r.summary.splitlines()[1:])
        if counter.count(text) <= budget:
            return text
        size -= max(1, counter.count(text) - budget)
    return ""


def _time_150k(counter: CharCounter, repeat: int) -> dict[str, Any]:
    """The summarizer's time on a 150k-token range: the long sessions' messages one
    after the other, up to the first at or past 150,000 tokens, into 4,000 tokens
    (compaction's default summary size)."""
    messages: list[Any] = []
    for path in long_sessions():
        for m in read_transcript(path).messages:
            messages.append(m)
            if counter.count_messages(messages) >= 150_000:
                break
        else:
            continue
        break
    summarizer = ExtractiveSummarizer(counter)
    times = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        summarizer.summarize("", messages, 4_000)
        times.append((time.perf_counter() - start) * 1000)
    return {
        "range_messages": len(messages),
        "range_tokens": counter.count_messages(messages),
        "budget_tokens": 4_000,
        "p50_ms": round(percentile(times, 50), 1),
        "min_ms": round(min(times), 1),
        "runs": len(times),
    }


if __name__ == "__main__":
    main()
