"""Which specifics survive a compaction: Claude Code's own summary vs ctxwise's.

Each long Claude Code session in the shared data was auto-compacted by Claude
Code itself (a ``compact_boundary`` event, then a user message with
``isCompactSummary``). For each, the *compacted range* is every message before
the boundary. Its specifics (file paths, ids, numbers, error strings; see
:mod:`ctxwise.retention`) are listed, then checked against

- Claude Code's summary (the ``isCompactSummary`` message), and
- ctxwise's summary of the same range at the same size: the summarizer
  :func:`ctxwise.compaction.compact` uses by default (the offline extractive one),
  with a budget equal to Claude Code's summary's token count (CharCounter), as
  ``compact`` hands it the summarized range.

Matching is generous to both: case-insensitive, and a path counts as kept when
its file name alone is. Specifics are split by origin: ``conversation`` (what the
user and the agent wrote, tool calls included) and ``tool_output`` (tool results,
which a tool call can fetch again). The JSON lists every specific and who kept it.
"""

from __future__ import annotations

import time
from typing import Any

from _common import fmt_ms, long_sessions, print_table, say, write_results
from ctxwise import CharCounter, read_transcript
from ctxwise.retention import retention
from ctxwise.summarize import ExtractiveSummarizer


def main() -> None:
    counter = CharCounter()
    rows: list[list[object]] = []
    sessions: list[dict[str, Any]] = []
    for path in long_sessions():
        t = read_transcript(path)
        for boundary in t.compactions:
            summary_msg = t.messages[boundary.index]
            if summary_msg.kind != "compact_summary":
                continue
            compacted = t.messages[: boundary.index]
            if t.compactions[0] is not boundary:  # a later boundary: its range starts after
                continue  # the previous summary (none of the shared sessions has two)
            budget = counter.count(summary_msg.text)
            start = time.perf_counter()
            ours = ExtractiveSummarizer(counter).summarize("", compacted, budget)
            ms = (time.perf_counter() - start) * 1000
            theirs_r = retention(compacted, summary_msg.text)
            ours_r = retention(compacted, ours)
            entry: dict[str, Any] = {
                "session": path.name,
                "boundary_index": boundary.index,
                "pre_tokens_claude_code": boundary.pre_tokens,
                "compacted_messages": len(compacted),
                "compacted_tokens": counter.count_messages(compacted),
                "summary_tokens": {"claude_code": budget, "ctxwise": counter.count(ours)},
                "ctxwise_summarize_ms": round(ms, 1),
                "counts": {"claude_code": theirs_r.counts(), "ctxwise": ours_r.counts()},
                "specifics": {},
            }
            for origin, present in theirs_r.present.items():
                entry["specifics"][origin] = [
                    {
                        "kind": s.kind,
                        "value": s.key,
                        "claude_code": s in theirs_r.kept[origin],
                        "ctxwise": s in ours_r.kept[origin],
                    }
                    for s in sorted(present, key=lambda s: (s.kind, s.key))
                ]
            sessions.append(entry)
            for origin in ("conversation", "tool_output"):
                for kind in ("path", "id", "number", "error"):
                    cc = theirs_r.counts()[origin].get(kind, [0, 0])
                    ow = ours_r.counts()[origin].get(kind, [0, 0])
                    if cc[1]:
                        rows.append([path.name[:8], origin, kind, cc[1], cc[0], ow[0]])
            total_cc, total_ow = theirs_r.counts()["total"], ours_r.counts()["total"]
            rows.append([path.name[:8], "all", "all", total_cc[1], total_cc[0], total_ow[0]])
            say(
                f"{path.name}: {len(compacted)} messages, "
                f"{entry['compacted_tokens']:,} tokens compacted into {budget:,}; "
                f"kept {total_cc[0]} (Claude Code) vs {total_ow[0]} (ctxwise) of {total_cc[1]} "
                f"specifics; ctxwise summarized in {fmt_ms(ms)} ms"
            )
    print_table(
        "specifics kept by the summary of the same compacted range, at the same size",
        ["session", "origin", "kind", "present", "Claude Code kept", "ctxwise kept"],
        rows,
        align="lllrrr",
    )
    write_results("bench_retention", {"sessions": sessions})


if __name__ == "__main__":
    main()
