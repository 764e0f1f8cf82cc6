"""Which specifics survive a compaction, and which references needed later: Claude
Code's own summary, a greedy baseline and ctxwise's, at the same size.

Each long Claude Code session in the shared data was auto-compacted by Claude
Code itself (a ``compact_boundary`` event, then a user message with
``isCompactSummary``). For each, the *compacted range* is every message before
the boundary (after the previous one, if any). Its specifics (file paths, ids,
numbers, error strings; see :mod:`ctxwise.retention`) are listed, then checked
against

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

Retention counts every specific of the range, needed later or not, and no
summarizer ranks by it (ctxwise's has its own salience; the greedy baselines do
rank by it). **Future-reference recall** asks what was needed: at a compaction
point, of the paths, identifiers, numbers and names
(:func:`ctxwise.retention.references`) that the user or the agent writes after
the point (text, thinking, tool calls) and that only the summarized range held
(not the kept tail or the system part), the share the compacted window still
holds (:func:`ctxwise.retention.future_reference_recall`). A reference a tool
result showed after the point before its first written use does not count (the
agent could read it there); ``every use`` counts those too. It is measured

- at Claude Code's own compaction points (every ``compact_boundary`` of the
  sessions): the range before the boundary, the session after it up to the next
  boundary or the end; each summary above at the same size. Claude Code keeps no
  message verbatim, but its window after a compaction also holds what the
  transcript does not record (files it reads again, SessionStart hook output), so
  its figure is a lower bound;
- at the points ctxwise's own compaction would choose on the same session at the
  same budget: the session replayed (Claude Code's summary left out) through an
  :class:`~ctxwise.compaction.AutoCompactor` whose trigger is the size of the
  window when Claude Code compacted (by the same counter), with its defaults (a
  budget of half the trigger, the fact scan on), called before every model reply.
  At each of its compactions the horizon is the session up to the next one or the
  end. ``ctxwise`` is the compacted window's summary message and pinned block;
  ``greedy`` and ``greedy_excerpts`` get that many tokens and the same kept tail,
  and roll as ctxwise does (their previous summary plus the messages that left).
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
import time
from collections.abc import Sequence
from typing import Any

from _common import (
    RESULTS_DIR,
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
from ctxwise.compaction import AutoCompactor, compact
from ctxwise.messages import TextBlock
from ctxwise.retention import FutureRecall, future_reference_recall, retention
from ctxwise.summarize import ExtractiveSummarizer

KINDS = ("path", "id", "number", "error")
REFERENCE_KINDS = ("path", "identifier", "number", "name")
_ROLE = re.compile(r"^(?:(?:user|assistant|system): |tool result: |(?:user|assistant) called )")
"""What :func:`ctxwise.summarize.render_turns` puts before a line (the greedy
summary's lines): left out when measuring, as excerpt origins are."""


def _every(by_origin: dict[Any, frozenset[Any]]) -> frozenset[Any]:
    return frozenset().union(*by_origin.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed summarize runs")
    parser.add_argument(
        "--docs",
        action="store_true",
        help="print the Benchmarks page section from the last results, run nothing",
    )
    args = parser.parse_args()
    if args.docs:
        path = RESULTS_DIR / "bench_retention.json"
        print(docs_section(json.loads(path.read_text(encoding="utf-8"))))
        return
    counter = CharCounter()
    rows: list[list[object]] = []
    sessions: list[dict[str, Any]] = []
    future: list[dict[str, Any]] = []
    points = [
        (path, t, k)
        for path in long_sessions()
        for t in (read_transcript(path),)
        for k in range(len(t.compactions))
    ]
    for path, t, k in points:
        boundary = t.compactions[k]
        summary_msg = t.messages[boundary.index]
        if summary_msg.kind != "compact_summary":
            continue
        # what this compaction summarized: its live window (a previous summary included)
        compacted = t.messages[t.compactions[k - 1].index if k else 0 : boundary.index]
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
        future.append(
            _future_entry(
                {"session": path.name, "boundary_index": boundary.index, "budget_tokens": budget},
                t.messages[: boundary.index],  # everything before it has left the window
                (),
                t.messages[boundary.index + 1 : _next_boundary(t, k)],
                {
                    name: (
                        counter.count(text),
                        _without_roles(text) if name == "greedy" else measured[name],
                    )
                    for name, text in written.items()
                },
            )
        )
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
    replayed: list[dict[str, Any]] = []
    for path in long_sessions():
        replayed += _ctxwise_points(path, counter)
    _print_future(
        "future-reference recall at Claude Code's compaction points, same summary size",
        future,
        "claude_code",
    )
    _print_future(
        "future-reference recall at ctxwise's compaction points (AutoCompactor, "
        "trigger = the window when Claude Code compacted)",
        replayed,
        "ctxwise",
    )
    speed = _time_150k(counter, args.repeat)
    say(
        f"summarize a {speed['range_tokens']:,}-token range (the sessions one after the "
        f"other) into {speed['budget_tokens']:,} tokens: {speed['p50_ms']} ms p50, "
        f"{speed['min_ms']} ms min"
    )
    write_results(
        "bench_retention",
        {
            "sessions": sessions,
            "future_reference_recall": {
                "claude_code_points": future,
                "ctxwise_points": replayed,
                "totals": {
                    "claude_code_points": _totals(future),
                    "ctxwise_points": _totals(replayed),
                },
            },
            "range_150k": speed,
        },
    )


# --------------------------------------------------------------------------- future references


def _without_roles(text: str) -> str:
    return "\n".join(_ROLE.sub("", line) for line in text.splitlines())


def _next_boundary(t: Transcript, k: int) -> int:
    """Where the session after compaction ``k`` ends: the next boundary, or the end."""
    nxt = t.compactions[k + 1].index if k + 1 < len(t.compactions) else len(t.messages)
    return nxt


def _recall_row(r: FutureRecall) -> dict[str, Any]:
    held, needed = r.counts()["total"]
    return {
        "held": held,
        "needed": needed,
        "recall": None if r.recall is None else round(r.recall, 4),
        "by_kind": {k: v for k, v in r.counts().items() if k != "total"},
    }


def _future_entry(
    head: dict[str, Any],
    summarized: Sequence[Message],
    kept: Sequence[Message],
    after: Sequence[Message],
    windows: dict[str, tuple[int, str]],
) -> dict[str, Any]:
    """Future-reference recall of each ``windows`` entry (name: tokens, text) at one
    compaction point, first-use and every-use, with the references and who held them."""
    entry: dict[str, Any] = {
        **head,
        "summarized_messages": len(summarized),
        "kept_messages": len(kept),
        "after_messages": len(after),
        "methods": {},
    }
    firsts = {}
    for name, (tokens, text) in windows.items():
        first = future_reference_recall(summarized, after, text, kept=kept)
        every = future_reference_recall(summarized, after, text, kept=kept, reread=True)
        firsts[name] = first
        entry["methods"][name] = {
            "tokens": tokens,
            **_recall_row(first),
            "every_use": _recall_row(every),
        }
    needed = next(iter(firsts.values())).needed if firsts else frozenset()
    entry["references"] = [
        {"kind": r.kind, "value": r.key} | {name: r in f.held for name, f in firsts.items()}
        for r in sorted(needed, key=lambda r: (r.kind, r.key))
    ]
    return entry


def _window_text(messages: Sequence[Message]) -> str:
    """The text a compaction wrote (its summary message, the pinned block)."""
    return "\n".join(
        b.text for m in messages for b in m.content if isinstance(b, TextBlock) and b.text
    )


def _ctxwise_points(path: Any, counter: CharCounter) -> list[dict[str, Any]]:
    """Replay a session through an AutoCompactor (see the module doc) and measure
    future-reference recall at each compaction it makes."""
    t = read_transcript(path)
    if not t.compactions:
        return []
    session = [m for m in t.messages if m.kind != "compact_summary"]
    first = t.compactions[0].index  # Claude Code's summary sits at this index
    trigger = counter.count_messages(session[:first])
    auto = AutoCompactor(trigger_tokens=trigger, counter=counter)
    window: list[Message] = []
    origin: list[int | None] = []  # each window message's index in the session
    points: list[tuple[int, int, tuple[Message, ...], Any]] = []
    for i, m in enumerate(session):
        if m.role == "assistant" and window and window[-1].role == "user":
            r = auto.maybe_compact(Transcript(tuple(window), format="claude-code"))
            if r is not None and r.compacted:
                new = r.transcript.messages
                tail = len(window) - r.cut_index
                assert new[len(new) - tail :] == tuple(window[r.cut_index :]), "tail verbatim"
                kept_from = origin[r.cut_index] if tail else i
                assert kept_from is not None
                points.append((i, kept_from, new[: len(new) - tail], r))
                window = list(new)
                written: list[int | None] = [None] * (len(new) - tail)
                origin = written + origin[r.cut_index :]
        window.append(m)
        origin.append(i)
    out = []
    previous = {"greedy": "", "greedy_excerpts": ""}
    rolled_from = 0
    for k, (at, kept_from, wrote, r) in enumerate(points):
        end = points[k + 1][0] if k + 1 < len(points) else len(session)
        raw = _window_text(wrote)
        budget = counter.count(raw)
        left = session[rolled_from:kept_from]
        texts = {"ctxwise": (budget, excerpt_texts(raw))}
        for name, make in (("greedy", greedy_summary), ("greedy_excerpts", greedy_excerpts)):
            turns = [Message.text_message("user", previous[name])] if previous[name] else []
            text = make([*turns, *left], budget, counter)
            previous[name] = text
            plain = _without_roles(text) if name == "greedy" else excerpt_texts(text)
            texts[name] = (counter.count(text), plain)
        rolled_from = kept_from
        out.append(
            _future_entry(
                {
                    "session": path.name,
                    "trigger_tokens": trigger,
                    "budget_tokens": auto.budget,
                    "point": k,
                    "at_message": at,
                    "tokens_before": r.tokens_before,
                    "tokens_after": r.tokens_after,
                    "summary_tokens": budget,
                },
                session[:kept_from],
                session[kept_from:at],
                session[at:end],
                texts,
            )
        )
        c = out[-1]["methods"]["ctxwise"]
        say(
            f"{path.name}: ctxwise compaction {k + 1} before message {at} "
            f"({r.tokens_before:,} -> {r.tokens_after:,} tokens, summary {budget:,}); "
            f"future references held {c['held']} / {c['needed']}"
        )
    return out


def _fmt(held: int, needed: int) -> tuple[str, str]:
    return f"{held} / {needed}", f"{held / needed:.0%}" if needed else "-"


def _totals(entries: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """``{method: {"first_use": [held, needed], "every_use": [...]}}`` over entries."""
    out: dict[str, dict[str, list[int]]] = {}
    for e in entries:
        for name, m in e["methods"].items():
            row = out.setdefault(name, {"first_use": [0, 0], "every_use": [0, 0]})
            row["first_use"][0] += m["held"]
            row["first_use"][1] += m["needed"]
            row["every_use"][0] += m["every_use"]["held"]
            row["every_use"][1] += m["every_use"]["needed"]
    return out


def _print_future(title: str, entries: Sequence[dict[str, Any]], where: str) -> None:
    rows: list[list[object]] = []
    for e in entries:
        point = str(e["boundary_index"] if where == "claude_code" else e["at_message"])
        for name, m in e["methods"].items():
            rows.append(
                [
                    e["session"][:8],
                    point,
                    name,
                    f"{m['tokens']:,}",
                    *_fmt(m["held"], m["needed"]),
                    *_fmt(m["every_use"]["held"], m["every_use"]["needed"]),
                ]
            )
    for name, row in _totals(entries).items():
        rows.append(["all", "", name, "", *_fmt(*row["first_use"]), *_fmt(*row["every_use"])])
    print_table(
        title,
        ["session", "at", "summary", "tokens", "held", "recall", "every use", "recall"],
        rows,
        align="lllrrrrr",
        caption="held: references written after the point that only the summarized range "
        "had, held by the window; every use: also those a tool result showed again first",
    )


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


# --------------------------------------------------------------------------- docs

_DOCS_METHODS = ("ctxwise", "ctxwise compact", "claude_code", "greedy", "greedy_excerpts")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def _losses(entries: Sequence[dict[str, Any]], where: str) -> list[str]:
    """A sentence for each baseline that holds more future references than ctxwise
    somewhere (first use, or every use)."""
    out = []
    names = [n for n in _DOCS_METHODS if not n.startswith("ctxwise")]
    for name in (n for n in names if entries and n in entries[0]["methods"]):
        lost = []
        for e in entries:
            theirs, ours = e["methods"][name], e["methods"]["ctxwise"]
            if theirs["held"] > ours["held"]:
                lost.append(f"{e['session'][:8]} ({theirs['held']} vs {ours['held']})")
            if theirs["every_use"]["held"] > ours["every_use"]["held"]:
                lost.append(
                    f"{e['session'][:8]}, every use "
                    f"({theirs['every_use']['held']} vs {ours['every_use']['held']})"
                )
        if lost:
            out.append(f"At {where}, `{name}` holds more at {'; '.join(lost)}.")
    return out


def _para(text: str) -> str:
    return textwrap.fill(text, width=80, break_on_hyphens=False)


def docs_section(d: dict[str, Any]) -> str:
    """The Benchmarks page section, from a ``bench_retention`` results document."""
    fr = d["future_reference_recall"]
    parts = [
        _para(
            "`benchmarks/bench_retention.py`. **Future-reference recall**: at a compaction "
            "point, of the paths, identifiers, numbers and names the user or the agent "
            "writes after it that only the summarized range held, the share the "
            "compacted window still holds (`held`; a reference a tool result showed "
            "again before its first written use is left out, `every use` counts it). "
            "No summarizer ranks by it. Every summary at a point has the same size; the "
            "script's docstring gives the rules."
        ),
        "",
        _para(
            "At Claude Code's own compaction points (its window also held files it "
            "read again, which the transcript does not record: a lower bound for it):"
        ),
        "",
    ]
    rows: list[list[object]] = []
    for e in fr["claude_code_points"]:
        for name in _DOCS_METHODS:
            m = e["methods"].get(name)
            if m is not None:
                rows.append(
                    [
                        e["session"][:8],
                        name,
                        f"{m['tokens']:,}",
                        *_fmt(m["held"], m["needed"]),
                        "{} ({})".format(*_fmt(m["every_use"]["held"], m["every_use"]["needed"])),
                    ]
                )
    for name, row in fr["totals"]["claude_code_points"].items():
        every = "{} ({})".format(*_fmt(*row["every_use"]))
        rows.append(["all", name, "", *_fmt(*row["first_use"]), every])
    parts.append(_md_table(["session", "summary", "tokens", "held", "recall", "every use"], rows))
    parts += [
        "",
        _para(
            "At the points ctxwise's compaction chooses on the same sessions (an "
            "AutoCompactor triggered at the window size where Claude Code compacted; "
            "`before`: the message it compacted before; the greedy baselines get "
            "ctxwise's summary tokens and the same kept tail):"
        ),
        "",
    ]
    rows = []
    for e in fr["ctxwise_points"]:
        for name in _DOCS_METHODS:
            m = e["methods"].get(name)
            if m is not None:
                rows.append(
                    [
                        e["session"][:8],
                        e["at_message"],
                        name,
                        f"{m['tokens']:,}",
                        *_fmt(m["held"], m["needed"]),
                        "{} ({})".format(*_fmt(m["every_use"]["held"], m["every_use"]["needed"])),
                    ]
                )
    for name, row in fr["totals"]["ctxwise_points"].items():
        every = "{} ({})".format(*_fmt(*row["every_use"]))
        rows.append(["all", "", name, "", *_fmt(*row["first_use"]), every])
    parts.append(
        _md_table(["session", "before", "summary", "tokens", "held", "recall", "every use"], rows)
    )
    losses = _losses(fr["claude_code_points"], "Claude Code's points")
    losses += _losses(fr["ctxwise_points"], "ctxwise's points")
    if losses:
        parts += [
            "",
            _para("**Where ctxwise loses** (held, theirs vs ctxwise's): " + " ".join(losses)),
        ]
    parts += [
        "",
        _para(
            "Specifics retained (the older measure: every path, id, number and error "
            "message of the range, needed later or not; the greedy baselines rank by "
            "it, ctxwise no longer does), at Claude Code's points:"
        ),
        "",
    ]
    rows = []
    for e in d["sessions"]:
        for name in _DOCS_METHODS:
            c = e["counts"].get(name)
            if c is not None:
                kept, present = c["total"]
                rows.append([e["session"][:8], name, *_fmt(kept, present)])
    parts.append(_md_table(["session", "summary", "kept", "share"], rows))
    return "\n".join(parts)


if __name__ == "__main__":
    main()
