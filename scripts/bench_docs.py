"""Write docs/benchmarks.md from benchmarks/results/*.json.

Figures live in benchmark output, not in docstrings: run the benchmarks (``make
bench``, ``make bench-routing``), then ``.venv/bin/python scripts/bench_docs.py``
rewrites the page from whatever results are there (a benchmark with no results
file is listed as not run). The page states the machine each file was measured on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_plots  # a sibling script: the plots the page links

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"


def table(head: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def f3(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def engine(d: dict[str, Any]) -> str:
    rows = [
        [
            f"{r['tokens']:,}",
            r["store"],
            f"{r['no_edit']['p50_ms']:.2f}",
            f"{r['no_edit']['p99_ms']:.2f}",
            "-"
            if "no_edit_without_ledger" not in r
            else f"{r['no_edit_without_ledger']['p50_ms']:.2f}",
            "-" if "ledger_step_p50_ms" not in r else f"{r['ledger_step_p50_ms']:.3f}",
            f"{r['compacting']['p50_ms']:.0f}",
            "-" if "compacting_effect" not in r else f"{r['compacting_effect']['p50_ms']:.0f}",
            f"{r['baseline']['p50_ms']:.2f}",
            f"{r['ratio']:.2f}",
        ]
        for r in d["rows"]
    ]
    met = "met" if d["target_met"] else "not met"
    targets = d.get("compact_target_ms")
    compacting = (
        ""
        if targets is None
        else " Compacting turn target p50 ≤ "
        + " and ≤ ".join(f"{ms:g} ms at {int(size) // 1000}k" for size, ms in targets.items())
        + f" tokens: **{'met' if d['compact_target_met'] else 'not met'}**; `effect`: "
        "remembering the compacted turns, after the turn's commit, on the Engine's worker "
        "thread (the Engine's next call waits for it)."
    )
    return (
        f"Per-turn overhead of `Engine.turn` without LLM calls ({d['turns']} turns per "
        f"size; target p50 ≤ {d['target_ms']} ms at 100k tokens, with the ledger on: "
        f"**{met}**). `ledger off`: the same turns with the `ledger` step removed, in "
        "alternation with them; `ledger step`: the step's own time. `baseline`: "
        "encoding and counting the whole history once, uncached, in the same run."
        + compacting
        + "\n\n"
        + table(
            [
                "tokens",
                "store",
                "p50 ms",
                "p99 ms",
                "ledger off p50 ms",
                "ledger step p50 ms",
                "compacting p50 ms",
                "effect p50 ms",
                "baseline p50 ms",
                "ratio",
            ],
            rows,
        )
        + engine_long(d.get("long_session"))
    )


def engine_long(long: dict[str, Any] | None) -> str:
    """The long-session rows of bench_engine (issue 33), when the results hold them."""
    if long is None:
        return ""

    def ms(stats: dict[str, Any] | None, key: str = "p50_ms") -> str:
        return "-" if stats is None else f"{stats[key]:.2f}"

    def n(stats: dict[str, Any] | None) -> int:
        return 0 if stats is None else int(stats["n"])

    waits = all("no_edit_with_wait" in r for r in long["rows"])
    rows = [
        [
            r["store"],
            f"{r['first_turn']:,}–{r['last_turn']:,}",
            n(r["no_edit"]),
            ms(r["no_edit"]),
            ms(r["no_edit"], "p99_ms"),
            *([ms(r["no_edit_with_wait"], "p99_ms")] if waits else []),
            ms(r["no_edit_same_question"], "p99_ms"),
            f"{n(r['no_edit_new_question'])}: {ms(r['no_edit_new_question'])}",
            f"{n(r['clearing'])}: {ms(r['clearing'])}",
            f"{n(r['compacting'])}: {ms(r['compacting'])}",
            *([f"{n(r['waited'])}: {ms(r['waited'], 'max_ms')}"] if waits else []),
            f"{r['ratio_p50']:.2f}",
            f"{r['ratio_p99']:.2f}",
            *([f"{r['ratio_p99_with_wait']:.2f}"] if waits else []),
        ]
        for r in long["rows"]
    ]
    met = "met" if long["target_met"] else "not met"
    # the wait for the last turn's effect, timed apart (when the results hold it)
    wait_note = (
        " A turn's time is its own: the replay waits for the last turn's effect "
        "(`Engine.wait`) before each turn and times that apart. After a compacting turn "
        "the wait is remembering the compacted turns on the Engine's worker thread; an "
        "agent's next turn comes after an LLM call and finds it done, a back-to-back "
        "replay does not. `with wait`: the no-edit p99 with that wait added (what a "
        "caller that turns again at once feels; its target "
        f"**{'met' if long.get('target_met_with_wait') else 'not met'}**); `waited`: the "
        "turns that waited for an effect (count: longest wait)."
        if waits
        else ""
    )
    return (
        f"\n\n**Long session** ({long['turns']:,} turns: the three sessions back to back "
        f"{long['copies']} times, replayed turn by turn into one session with budget "
        f"{long['budget']:,}, so the history is cleared and compacted and compacted turns "
        "are recalled). A row is one copy of the three sessions: the first (a session of "
        "about 400 turns) and the last, the same messages at 8 times the session's "
        "length. `no edit`: turns that neither clear nor compact; `same question`: those "
        "of them that route the same user message as the turn before (a tool result's "
        "turn), `new question`: those with a new user message, whose recall searches the "
        "session's memory anew (count: p50). Clearing and compacting turns apart (count: "
        "p50). `ratio`: no-edit p50 and p99 over the first copy's; target "
        f"≤ {long['target_ratio']} × at 3,000+ turns: **{met}**."
        + (
            f" Each store replays the long session {long['repeats']} times; a turn's time "
            "is its median over the replays."
            if "repeats" in long
            else ""
        )
        + wait_note
        + "\n\n"
        + table(
            [
                "store",
                "turns",
                "no edit n",
                "p50 ms",
                "p99 ms",
                *(["p99 with wait ms"] if waits else []),
                "same question p99 ms",
                "new question p50 ms",
                "clearing p50 ms",
                "compacting p50 ms",
                *(["waited: max ms"] if waits else []),
                "ratio p50",
                "ratio p99",
                *(["ratio p99 with wait"] if waits else []),
            ],
            rows,
        )
    )


def replay(d: dict[str, Any]) -> str:
    rows = [
        [
            s["kind"],
            f"{s['fraction']:.0%}",
            s["runs"],
            s["replayed"],
            f"{s['refused']} ({s['refused_allowed']} allowed)",
            s["turns"],
            s["over_budget_turns"],
            s["invalid_requests"],
            s["pinned_missing"],
            s["compactions"],
            f3(s["sent_ratio"]),
        ]
        for s in d["summary"]
    ]
    return (
        "`ctxwise replay` over every shared recording and a 200-turn scripted session, at "
        "50% and 25% of each one's size. A refusal is allowed only when the pinned part or "
        "the latest user message cannot fit the budget. Runs failing a check: "
        f"**{d['failed']}**.\n\n"
        + table(
            [
                "data",
                "budget",
                "runs",
                "replayed",
                "refused",
                "turns",
                "over budget",
                "invalid",
                "pins missing",
                "compactions",
                "sent/full",
            ],
            rows,
        )
    )


def routing(d: dict[str, Any]) -> str:
    rows = [
        [
            r["router"],
            f3(r["metrics"]["in_scope_accuracy"]),
            f3(r["metrics"]["oos_recall"]),
            f3(r["metrics"]["harmonic_mean"]),
            f"{r['latency']['p50_ms']:.3f}",
        ]
        for r in d["rows"]
    ]
    targets = [
        [t["target"], t["values"], {True: "yes", False: "no", None: "-"}[t["met"]]]
        for t in d["targets"]
    ]
    sr = d.get("semantic_router") or {}
    note = f"\n\nsemantic-router: {sr.get('skipped')}" if sr.get("skipped") else ""
    return (
        table(["router", "in-scope acc", "OOS recall", "harmonic mean", "p50 ms"], rows)
        + "\n\n"
        + table(["target", "values", "met"], targets)
        + note
    )


def ms(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def memory(d: dict[str, Any]) -> str:
    def disk(r: dict[str, Any]) -> str:
        out = f"{r['file_mb']:.0f} MB"
        return out + (f" + {r['index_mb']:.0f} MB index" if r.get("index_mb") else "")

    lat = [
        [
            r["backend"],
            f"{r['items']:,}",
            f"{ms(r['latency']['hybrid']['p50_ms'], 2)} / "
            f"{ms(r['latency']['hybrid']['p99_ms'], 2)}",
            ms(r["latency"]["cold"]["p99_ms"], 2),
            ms(r["latency"]["writing"]["p99_ms"], 2),
            f"{r['latency']['lexical']['p50_ms']:.2f}",
            f"{r['latency']['vector']['p50_ms']:.2f}",
        ]
        for r in d["rows"]
    ]
    size = [
        [
            r["backend"],
            f"{r['items']:,}",
            f"{r['items_per_second']:,}",
            r["vector_method"],
            f"{r['index_seconds']:.1f}",
            disk(r),
            f3(r.get("vector_top10_overlap")),
            f3(r.get("lexical_top10_overlap")),
        ]
        for r in d["rows"]
    ]
    return (
        f"`benchmarks/bench_memory.py`: {d['queries']} queries, hashing embedder "
        f"(dim {d['dim']}). Hybrid recall p50 / p99 after a first pass over the "
        "queries, the p99 of that first (cold) pass, and the p99 with one item "
        "remembered before each query; then the write rate, the vector index, its "
        "build time, the size on disk and how much of the exact top 10 each bounded "
        "search returns.\n\n"
        + table(
            [
                "store",
                "items",
                "hybrid p50 / p99 ms",
                "cold p99 ms",
                "writing p99 ms",
                "lexical p50 ms",
                "vector p50 ms",
            ],
            lat,
        )
        + "\n\n"
        + table(
            [
                "store",
                "items",
                "remember items/s",
                "vector search",
                "index build s",
                "on disk",
                "vector top-10 overlap",
                "lexical top-10 overlap",
            ],
            size,
        )
    )


def _setting(values: dict[str, Any]) -> str:
    """A recall setting, short: ``context 2, share 0.7, boost 1.0, w 0.1, k 20``."""
    names = {
        "context": "context",
        "successor_share": "share",
        "mention_boost": "boost",
        "weights": "w",
        "rrf_k": "k",
    }
    parts = [
        f"{label} {values[key][1] if key == 'weights' else values[key]}"
        for key, label in names.items()
        if key in values
    ]
    return ", ".join(parts) or "as the preset"


def presets(d: dict[str, Any]) -> str:
    modes = ("hybrid", "lexical", "vector")
    whole = d["grids"]["whole grid"]
    rows = [
        [
            grid,
            mode,
            g[mode]["settings"],
            f"**{f3(g[mode]['held_out_recall'])}**",
            f3(g[mode]["in_sample"]["recall"]),
            _setting(g[mode]["in_sample"]["best_on_all"]),
        ]
        for grid, g in d["grids"].items()
        for mode in modes
    ]
    rows += [
        ["`neutral` preset", mode, 1, f3(d["neutral"][mode]["held_out_recall"]), "-", "(not fit)"]
        for mode in modes
    ]
    folds = [
        [
            whole["hybrid"]["folds"][i]["held_out"],
            whole["hybrid"]["folds"][i]["n"],
            *(
                f"{f3(whole[m]['folds'][i]['recall'])} ({_setting(whole[m]['folds'][i]['chosen'])})"
                for m in modes
            ),
        ]
        for i in range(len(whole["hybrid"]["folds"]))
    ]
    embedder = d["embedder"]
    hybrid = whole["hybrid"]
    ships = "is" if d["preset_is_best_on_all"] else "is **not**"
    lexical, vector = (whole[m]["held_out_recall"] for m in ("lexical", "vector"))
    beats = (
        "beats both baselines fit the same way"
        if hybrid["held_out_recall"] > max(lexical, vector)
        else "**does not beat** its best baseline fit the same way"
    )
    return (
        f"Embedder: {embedder} (`bench_presets.py --embedder {embedder}`). Recall@10 on "
        f"LoCoMo dev ({d['questions']} questions, five conversations). **Held out**: each "
        "mode's setting is chosen from the grid on four conversations and scored on the "
        "fifth, in turn, pooled over every question; the baselines are fit the same way "
        "on the same grid cut to the settings they read (lexical-only: no vector weight; "
        "vector-only: no vector weight and nothing of the lexical index). **In-sample**: "
        "the best setting on all five, scored on the same five (not a figure to expect "
        f"on other conversations). The `{d['preset']}` preset {ships} the whole grid's "
        f"in-sample best; choosing from the grid held out gives "
        f"{hybrid['held_out_recall']:.3f} (in-sample {hybrid['in_sample']['recall']:.3f}). "
        f"Held out, the hybrid {beats} (lexical-only {lexical:.3f}, vector-only "
        f"{vector:.3f}). The `neutral` preset, which nothing was chosen for, is scored as "
        "it is.\n\n"
        + table(["grid", "mode", "settings", "held out", "in-sample", "best on all five"], rows)
        + "\n\nEach held-out conversation (whole grid): its recall@10 with the setting "
        "chosen on the other four.\n\n"
        + table(["held out", "questions", "hybrid", "lexical-only", "vector-only"], folds)
    )


def route_cli(d: dict[str, Any]) -> str:
    return (
        f"`ctxwise route` p50 {d['route']['p50_ms']:.0f} ms vs `ctxwise --help` "
        f"{d['help']['p50_ms']:.0f} ms (×{d['route_vs_help']:.2f}); `IntentRouter.load` p50 "
        f"{d['load']['p50_ms']:.0f} ms.\n\n"
        + table(["target", "met"], [[k, "yes" if v else "no"] for k, v in d["targets"].items()])
    )


def compact_all(d: dict[str, Any]) -> str:
    c = d["counts"]
    fractions = ", ".join(f"{f:.0%}" for f in d.get("fractions", []))
    rows = [
        [
            kind,
            c.get(f"{kind}|runs", 0),
            c.get(f"{kind}|compacted", 0),
            c.get(f"{kind}|mid-turn cut", 0),
            c.get(f"{kind}|refused: system + task over N", 0),
            c.get(f"{kind}|repaired", 0),
            c.get(f"{kind}|deeper recompaction: compacted", 0),
        ]
        for kind in ("claude code", "tau-bench")
    ]
    return (
        f"`ctxwise compact FILE --budget N` on every transcript at N = {fractions} of its "
        "live tokens; a refusal is of the allowed kind (system part and latest user "
        "message alone over N). `deeper`: the cleared output compacted again to half its "
        f"size. Runs failing a check: **{d.get('failed', 0)}**.\n\n"
        + table(
            [
                "data",
                "runs",
                "compacted",
                "cut mid-turn",
                "refused (allowed kind)",
                "repaired",
                "deeper: compacted",
            ],
            rows,
        )
    )


def compaction(d: dict[str, Any]) -> str:
    kinds = list(d["results"][0]["timings"]) if d["results"] else []
    rows = [
        [
            r["transcript"],
            r["messages"],
            f"{r['tokens']:,}",
            f"{r['tokens_after']:,}",
            *(f"{r['timings'][k]['p50_ms']:.1f}" for k in kinds),
        ]
        for r in d["results"]
    ]
    return (
        f"`compact` to {d['budget']:,} tokens (summary up to {d['summary_tokens']:,}, "
        f"`{d['counter']}` counter), p50 ms of {d['iterations']} runs; target "
        f"≤ {d['target_ms']:.0f} ms.\n\n"
        + table(
            ["transcript", "messages", "tokens", "tokens after", *(f"{k} p50 ms" for k in kinds)],
            rows,
        )
    )


def tools(d: dict[str, Any]) -> str:
    tok = [
        [
            r["catalog"],
            r["counter"],
            r["tools"],
            f"{r['n_queries']} ({r['queries']})",
            f"{r['all_tokens']:,}",
            f"{r['no_query_tokens']:,}",
            f"{r['deferred_tokens']:,.0f}",
            f"{r['deferred_tokens_max']:,}",
            f"{r['reduction']:.1%}",
        ]
        for r in d["definition_tokens"]
    ]
    sel = d["selection"]
    rows = [
        [
            r["method"],
            r["split"],
            r["n"],
            f3(r["recall_at"]["5"]),
            f3(r["recall_at"]["10"]),
            f3(r["any_at"]["5"]),
            f3(r["any_at"]["10"]),
            f"{r['p50_ms']:.3f}",
        ]
        for r in sel["rows"]
    ]
    skipped = "".join(f"\n\n{m}: skipped ({why})" for m, why in sel.get("skipped", {}).items())
    return (
        f"`benchmarks/bench_tools.py`. Definition tokens per turn: every definition sent "
        f"(`all`) vs `ToolCatalog.for_turn` with k = {d['k']} (`tool_search` plus the "
        "best matches; the rest deferred). `no query`: `tool_search` alone.\n\n"
        + table(
            [
                "catalog",
                "counter",
                "tools",
                "queries",
                "all",
                "no query",
                "deferred mean",
                "deferred max",
                "reduction",
            ],
            tok,
        )
        + f"\n\nTool search on LiveMCPBench ({sel['tools']} tools, {sel['queries']} "
        "queries; `fit` = even query index, `test` = odd; nothing tuned). Plain BM25: the "
        "same texts and analyzer, no vectors, no server affinity.\n\n"
        + table(
            ["method", "split", "n", "recall@5", "recall@10", "any@5", "any@10", "p50 ms"],
            rows,
        )
        + skipped
    )


def handoff(d: dict[str, Any]) -> str:
    def row(r: dict[str, Any], first: str) -> list[object]:
        base = r["baselines"]
        return [
            first,
            r["n"],
            f3(r["evidence_recall"]),
            f"{r['token_share']:.1%}",
            f3(base["recent"]["evidence_recall"]),
            f3(base["bm25"]["evidence_recall"]),
        ]

    def chosen(c: dict[str, Any]) -> str:
        return f"{c['scorer']}, exponent {c['size_exponent']}, recent {c['recent_share']}"

    head = ["budget", "questions", "ctxwise", "share", "recent", "bm25"]
    constants = d["constants"]
    held = d["held_out"]
    scorers = held["scorers"]
    held_rows = [
        [
            f"{b:,}",
            f"**{f3(scorers['ctxwise']['held_out'][str(b)])}**",
            f"**{f3(scorers['bm25']['held_out'][str(b)])}**",
            f3(held["recent"][str(b)]),
            f3(scorers["ctxwise"]["in_sample"]["recall"][str(b)]),
            f3(scorers["bm25"]["in_sample"]["recall"][str(b)]),
        ]
        for b in held["budgets"]
    ]
    folds = [
        [
            f["held_out"],
            chosen(f["chosen"]),
            ", ".join(f3(v) for v in f["recall"].values()),
            chosen(g["chosen"]),
            ", ".join(f3(v) for v in g["recall"].values()),
        ]
        for f, g in zip(scorers["ctxwise"]["folds"], scorers["bm25"]["folds"], strict=True)
    ]
    budgets = " / ".join(f"{b:,}" for b in held["budgets"])
    lost = [
        f"{b:,}"
        for b in held["budgets"]
        if scorers["ctxwise"]["held_out"][str(b)] < scorers["bm25"]["held_out"][str(b)]
    ]
    verdict = (
        f"Held out, ctxwise **loses to BM25** fit the same way at {', '.join(lost)} tokens."
        if lost
        else "Held out, ctxwise beats BM25 fit the same way at every budget."
    )
    return (
        "`benchmarks/bench_handoff.py`. `select_context` on LoCoMo dev (categories 1–4): "
        "the fraction of each question's evidence turns inside the selection, and the "
        "selection's share of the conversation's tokens. Default scorer (hybrid recall, "
        "`neutral` preset). The baselines get the same chunks, headers and budget "
        "(`recent`: the latest turns); `bm25` is the same selection with plain BM25 as "
        f"its scorer (`{d['rows'][0]['bm25_scorer']}`: over each chunk with the chunks "
        "before it that the default scorer's lexical index holds with it): the same "
        "pinning, share of the budget for the latest chunks and packing, so only the "
        "scorer differs.\n\n"
        f"**Chosen on these conversations:** `SIZE_EXPONENT` ({constants['SIZE_EXPONENT']}) "
        f"and `DEFAULT_RECENT_SHARE` ({constants['DEFAULT_RECENT_SHARE']}) were chosen on "
        f"{constants['chosen_on']}, so this first table, at the library's constants, is "
        "in-sample.\n\n"
        + table(head, [row(r, f"{r['budget']:,}") for r in d["rows"]])
        + "\n\n**Held out:** the two constants chosen again (size exponent "
        + ", ".join(sorted({str(g["size_exponent"]) for g in held["grid"]}, key=float))
        + "; recent share "
        + ", ".join(sorted({str(g["recent_share"]) for g in held["grid"]}, key=float))
        + ") on four conversations and scored on the fifth, in turn, one choice for all "
        "three budgets; BM25 is fit the same way and also chooses what it indexes ("
        + ", ".join(f"`{n}`" for n in held["bm25_scorers"])
        + f"). `in-sample`: the best choice on all five, scored on them. {held['n']} "
        f"questions. {verdict}\n\n"
        + table(
            [
                "budget",
                "ctxwise held out",
                "bm25 held out",
                "recent",
                "ctxwise in-sample",
                "bm25 in-sample",
            ],
            held_rows,
        )
        + f"\n\nEach held-out conversation: what was chosen on the other four, and its "
        f"recall at {budgets} tokens.\n\n"
        + table(["held out", "ctxwise chose", "ctxwise", "bm25 chose", "bm25"], folds)
        + "\n\nEach conversation alone, budget 3,000, the library's constants:\n\n"
        + table(
            ["conversation", *head[1:]], [row(r, r["conversation"]) for r in d["per_conversation"]]
        )
    )


def handoff_claude_code_minilm(d: dict[str, Any]) -> str:
    """The same sets with MiniLM as the default scorer's embedder (nothing tuned for it)."""
    rows = [
        [
            label,
            s["tasks"],
            f"{s['ctxwise']['carried']}/{s['expected']}",
            f"{s['ctxwise']['all_carried']}/{s['tasks']}",
            f"{s['ctxwise']['mean_tokens']:,.0f}",
        ]
        for label, s in d["sets"].items()
    ]
    return (
        "`benchmarks/bench_handoff_claude_code.py --embedder minilm`: the sets above, the "
        "default scorer with MiniLM in place of the hashing embedder, nothing else changed "
        "and nothing tuned for it (the baselines do not use the embedder, so they are as "
        "above).\n\n" + table(["tasks", "n", "ctxwise carried", "ctxwise all", "tokens"], rows)
    )


def handoff_claude_code(d: dict[str, Any]) -> str:
    def row(label: str, s: dict[str, Any]) -> list[object]:
        return [
            label,
            s["tasks"],
            f"{s['ctxwise']['carried']}/{s['expected']}",
            f"{s['ctxwise']['all_carried']}/{s['tasks']}",
            f"{s['ctxwise']['mean_tokens']:,.0f}",
            f"{s['ctxwise']['mean_share']:.1%}",
            f"{s['recent']['carried']}/{s['expected']}",
            f"{s['recent']['all_carried']}/{s['tasks']}",
            f"{s['bm25']['carried']}/{s['expected']}",
            f"{s['bm25']['all_carried']}/{s['tasks']}",
        ]

    head = [
        "tasks",
        "n",
        "ctxwise carried",
        "ctxwise all",
        "tokens",
        "share",
        "recent carried",
        "recent all",
        "bm25 carried",
        "bm25 all",
    ]
    return (
        "`benchmarks/bench_handoff_claude_code.py`. `select_context` at a budget of "
        f"{d['budget']:,} tokens on tasks cut from the three long Claude Code sessions: the "
        "expected earlier tool results whose chunk the handoff carries, the tasks with every "
        "expected result carried, and the handoff's mean tokens and share of the transcript. "
        "`tuned`: the tasks the selector was adjusted on; `held-out`: tasks written blind "
        "(Agent/Task prompts and the assistant's stated next steps), on which the share of "
        "the budget kept for the latest chunks was then chosen; `blind, far back`: ten "
        "tasks per session written blind after that, most needing a tool result more "
        "than 40 messages back, scored once; `blind 3`: eight more per session, written "
        "blind the same way, scored once; `blind 4`: six more per session, the same way. "
        "The packing's size exponent was then chosen on those five sets (and LoCoMo), so "
        "none of them is held out any more; `blind 5`: ten more per session, written blind "
        "before that choice and scored only after it; `blind 6`: eight more per session, "
        "written blind after it; `blind 7`: eight more per session, written blind after "
        "the last selector change and scored with one rule decided on beforehand (a "
        "file's history leaves out what a later whole-file Write of it replaced); "
        "`blind 8`: ten more per session, written blind after that, scored with the "
        "selector unchanged. The baselines get the "
        "same chunks, costs and budget (`recent`: the latest chunks; `bm25`: plain BM25, "
        "then the latest).\n\n" + table(head, [row(k, s) for k, s in d["sets"].items()])
    )


def relay(d: dict[str, Any]) -> str:
    needles: dict[tuple[str, str], dict[str, Any]] = {}
    for r in d["needles"]:
        agg = needles.setdefault(
            (r["scorer"], r["split"]),
            {"seeds": 0, "kept": 0, "exact": 0, "total": 0, "filler": 0, "carry": 0},
        )
        agg["seeds"] += 1
        agg["kept"] += r["needles_kept"]
        agg["exact"] += r["needles_exact"]
        agg["total"] += r["needles_total"]
        agg["filler"] += r["filler_kept"]
        agg["carry"] = max(agg["carry"], r["carry_tokens_max"])
    n_rows = [
        [
            scorer,
            split,
            a["seeds"],
            f"{a['kept']:,}/{a['total']:,}",
            f"{a['exact']:,}",
            f"{a['filler']:,}",
            f"{a['carry']:,}",
        ]
        for (scorer, split), a in needles.items()
    ]
    counting: dict[tuple[str, Any, str], dict[str, Any]] = {}
    for r in d["counting"]:
        agg = counting.setdefault(
            (r["step"], r["rate"], r["loop"]),
            {"seeds": 0, "exact": 0, "holders": 0, "counts": 0, "broken": 0, "rejected": 0},
        )
        agg["seeds"] += 1
        agg["exact"] += r["holders_correct"] == 40 and r["counts_exact"] == 40
        agg["holders"] += r["holders_correct"]
        agg["counts"] += r["counts_exact"]
        agg["broken"] += r["broken_updates"]
        agg["rejected"] += r["rejected_updates"]
    c_rows = [
        [
            step,
            "-" if rate is None else rate,
            loop,
            f"{a['exact']}/{a['seeds']}",
            f"{a['holders'] / a['seeds']:.1f}",
            f"{a['counts'] / a['seeds']:.1f}",
            a["broken"],
            a["rejected"],
        ]
        for (step, rate, loop), a in counting.items()
    ]
    sp = d["speed"]
    return (
        "`benchmarks/bench_relay.py`. The synthetic equipment log (`ctxwise data relay`), "
        "96 chunks of about 4,000 tokens, seeds 0–5: `fit` are the seeds the scorer was "
        "built on (0–3), `test` the ones it was not (4–5). Carry 24,000 tokens, shares "
        "0.7 / 0.3. Needles: handover lines in the final store, byte-exact, and filler "
        "lines in it, summed over the seeds. Every scorer gets the same examples "
        "(one per phrasing) and its threshold fit on them; `examples, half the "
        "templates` is the default scorer given examples of every other phrasing "
        "only, which it does poorly on: a phrasing no example resembles is a guess.\n\n"
        + table(["scorer", "split", "seeds", "kept", "exact", "filler", "carry max"], n_rows)
        + "\n\nCounting (40 assets, 1,536 handovers): runs ending with all 40 holders "
        "and counts exact, mean holders and counts right, first attempts the faulty step "
        "broke, and proposals the relay rejected. `unchecked` takes every proposal as "
        "it comes, as a loop without code checks does.\n\n"
        + table(
            ["step", "rate", "loop", "40/40 runs", "holders", "counts", "broken", "rejected"],
            c_rows,
        )
        + f"\n\nOne step (score, store, parser, commit to a folder): p50 "
        f"{sp['step_ms_p50']:.1f} ms, max {sp['step_ms_max']:.1f} ms; state file "
        f"{sp['state_bytes']:,} bytes; resume (load and check hashes) {sp['resume_ms']:.1f} ms."
    )


def frameworks(d: dict[str, Any]) -> str:
    extra = [k for k in ("pairing", "over_budget", "edited") if all(k in r for r in d["rows"])]
    rows = [
        [r["method"], r["cases"], f"{r['inputs']:,}", f"{r['invalid']:,}"]
        + [f"{r[k]:,}" for k in extra]
        for r in d["rows"]
    ]
    return (
        "`benchmarks/bench_frameworks.py`. Model inputs each framework hook hands the model, "
        "and how many of them the provider APIs would refuse (a tool result whose call is "
        "gone, a call with no result before the next assistant turn). `issue-38352`: an "
        "assistant message with parallel tool calls and their results, a small keep; "
        "`transcripts`: every Claude Code session and 50 tau-bench trajectories, replayed at "
        "the same token budget. `pairing`: inputs with a broken tool pair; `over_budget`: "
        "inputs over the budget (invalid only for the method that promises the budget); "
        "`edited`: inputs the method changed.\n\n"
        + table(["method", "cases", "inputs", "invalid", *extra], rows)
    )


def retention(d: dict[str, Any]) -> str:
    """The section ``bench_retention`` writes for itself (its tables and where ctxwise
    loses, from the same results)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_retention

    section: str = bench_retention.docs_section(d)
    return section


def sync(d: dict[str, Any]) -> str:
    rows = [
        [
            f"{r['size']:,}",
            f"{r['sync_2_new']['p50_ms']:.2f}",
            f"{r['sync_none_new']['p50_ms']:.2f}",
            f"{r['sync_cold']['p50_ms']:.1f}",
            f"{r['log_read']['p50_ms']:.1f}",
        ]
        for r in d["rows"]
    ]
    return (
        "`Engine.sync` on a SQLite session of each size: a framework hands over its whole "
        f"history on every call ({d['calls']} calls); what is new is found against the "
        "session's keys, read from the log once per Engine (`after a restart`: the first "
        "call, which reads and keys the whole log), beside reading the whole log, what an "
        "integration did on every call before.\n\n"
        + table(
            [
                "messages",
                "2 new p50 ms",
                "none new p50 ms",
                "after a restart p50 ms",
                "whole log read p50 ms",
            ],
            rows,
        )
    )


def costs(d: dict[str, Any]) -> str:
    def written(r: dict[str, Any]) -> int:
        return int(r["total"]["cache_write_5m"] + r["total"]["cache_write_1h"])

    def usd(x: Any) -> str:
        return "unknown" if x is None else f"{x:.3f}"

    every = [
        [
            r["file"],
            r["model"],
            r["turns"],
            f"{r['total']['cache_read']:,}",
            f"{written(r):,}",
            f"{r['total']['uncached']:,}",
            usd(r["usd"]),
            usd(r["recorded_usd"]),
            r["over_budget_turns"],
        ]
        for r in d["every"]
    ]
    gate = [
        [
            g["file"][:8],
            f"{g['budget']:,}",
            f"{g['off']['clears']} / {g['on']['clears']}",
            f"{g['off']['cache_breaks']} / {g['on']['cache_breaks']}",
            f"{written(g['off']):,} / {written(g['on']):,}",
            f"{g['off']['usd']:.3f} / {g['on']['usd']:.3f}",
            f"{g['off']['over_budget_turns']} / {g['on']['over_budget_turns']}",
            f"{written(g['on']) / written(g['off']) - 1:+.1%}",
            f"{g['on']['usd'] / g['off']['usd'] - 1:+.1%}",
        ]
        for g in d["gate"]
    ]
    return (
        "Every Claude Code file replayed at 100,000 tokens with the prompt cache simulated "
        "(`ctxwise replay --cost`), priced at the model most of its recorded calls used, "
        "beside what the recording was billed. The recording also paid for Claude Code's "
        "system prompt and tool definitions, which its transcript does not hold and a "
        "replay cannot send: compare the policies with each other, not with that column.\n\n"
        + table(
            [
                "file",
                "model",
                "turns",
                "read",
                "written",
                "uncached",
                "ctxwise $",
                "recorded $",
                "over budget",
            ],
            every,
        )
        + "\n\nThe edit gate (`costs.gate`) off / on at the same budget on each long "
        "session: clears, cache breaks (turns whose request differs from the previous one "
        "before its end), tokens written to the cache, money, turns over budget. Target "
        "(issue 30): with the gate, fewer cache writes and lower cost on every session, no "
        "turn over budget.\n\n"
        + table(
            [
                "session",
                "budget",
                "clears",
                "cache breaks",
                "written",
                "$",
                "over budget",
                "written Δ",
                "$ Δ",
            ],
            gate,
        )
    )


def proxy_replay(d: dict[str, Any]) -> str:
    """The Claude Code sessions through the proxy (bench_proxy_replay, issue 31)."""

    def usd(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    def rows(results: list[dict[str, Any]]) -> list[list[Any]]:
        out: list[list[Any]] = []
        for r in results:
            name = r["file"].rsplit("/", 1)[-1][:16] if "/" in r["file"] else r["file"][:8]
            p = r["passthrough"]
            out.append(
                [name, "pass-through", "", f"{p['input']:,}", f"{p['total']['cache_read']:,}",
                 f"{p['written']:,}", f"{p['total']['uncached']:,}", usd(p["usd"]), "", "",
                 usd(r["recorded_usd"]), "", "", f"max {r['passthrough_max_tokens']:,} tokens"]
            )  # fmt: skip
            for x in r["runs"]:
                c = x["ctxwise"]
                out.append(
                    [name, f"ctxwise {x['budget']:,}", "on" if x["gate"] else "off",
                     f"{c['input']:,}", f"{c['total']['cache_read']:,}", f"{c['written']:,}",
                     f"{c['total']['uncached']:,}", usd(c["usd"]), f3(x["usd_ratio"]),
                     f3(x["usd_ratio_client_marks"]), "",
                     f"{x['invalid']} / {x['over_budget']} / {x['fail_open'] + x['errors']}",
                     f"{x['max_budget_ratio']:.2f}",
                     f"{x['passthrough_over_budget']} of {x['requests']}"]
                )  # fmt: skip
        return out

    head = [
        "session", "policy", "gate", "input", "read", "written", "uncached", "$",
        "$ / pass-through", "same marks", "recorded $", "invalid / over / failed",
        "max / budget", "pass-through over budget",
    ]  # fmt: skip
    t = d["totals"]
    sampled = "" if d["every"] == 1 else f" Every {d['every']}th call was sent (subsampled)."
    text = (
        "Each long Claude Code session replayed through `ctxwise serve`'s proxy in process: "
        "for every recorded call the client sends the segment's whole history (as Claude "
        "Code does), and a mock upstream answers with the recorded reply, its output "
        "tokens, and a prompt count scaled from the recorded one to what was forwarded. "
        "Every forwarded request is checked (tool pairs whole, tokens within the budget "
        "by `counter_for_model`), then both request sequences are priced with one prompt "
        "cache simulator at the model's list price. `pass-through`: the client's requests "
        "unchanged, one 5-minute mark on the latest message (Claude Code's moving "
        "breakpoint). `ctxwise`: what the proxy forwarded, with the Engine's marks; `same "
        "marks`: the forwarded requests with the pass-through rule instead. `recorded $` "
        "is what the recording was billed (it includes Claude Code's system prompt and "
        "tool definitions, which the transcript does not hold), for reference."
        + sampled
        + f"\n\nAcross {t['runs']} runs, {t['requests']:,} forwarded requests: "
        f"**{t['invalid']}** invalid, **{t['over_budget']}** over budget, "
        f"**{t['fail_open'] + t['errors']}** failed open or errored; "
        f"**{t['costlier_than_passthrough']}** runs cost more than passing through. "
        "`pass-through over budget`: the client's requests over the budget, which the "
        "proxy must edit whatever the gate says; the gate decides only the edits beyond "
        "those. `max / budget`: the largest forwarded request over the budget.\n\n"
        + table(head, rows(d["long"]))
    )
    named = [(r["file"][:8], r["named_session"]) for r in d["long"] if "named_session" in r]
    if named:
        text += (
            "\n\nThe same sessions with one `x-ctxwise-session` header for the whole file "
            "(budget " + f"{named[0][1]['budget']:,}" + ", gate on), requests the proxy "
            "refused: "
            + ", ".join(f"{n} **{x['refused']}** of {x['requests']}" for n, x in named)
            + ". After Claude Code's own compaction its history restarts at the summary and "
            "shares no message with the named session: the proxy takes it for another "
            "conversation under that name and serves it from a fork session (before that "
            "rule every such request was refused, appended after the session's unanswered "
            "tool call: 50, 78 and 72 requests on these three sessions)."
        )
    if d.get("small"):
        text += (
            f"\n\nThe other Claude Code files (subagents, fixtures) at "
            f"{d['small_budget']:,} tokens, gate on:\n\n" + table(head, rows(d["small"]))
        )
    return text


def proxy_load(d: dict[str, Any]) -> str:
    """The proxy under load (bench_proxy, issue 31)."""
    a = d.get("args", {})
    rows = [
        [
            c["name"],
            c["workers"],
            c["turns"],
            c["errors"],
            c["lost"],
            c["duplicated"],
            c.get("retried_transport_errors", 0),
            "yes" if c.get("killed_a_worker") else "no",
            f"{c['seconds']:.1f}",
            f"{c['proxied_ms']['p50']:.1f} / {c['proxied_ms']['p99']:.1f}",
            f"{c['direct_ms']['p50']:.1f} / {c['direct_ms']['p99']:.1f}",
            f"{c['overhead_ms']['p50']:.1f} / {c['overhead_ms']['p99']:.1f}",
        ]
        for c in d["configurations"]
    ]
    return (
        f"`ctxwise serve` between {a.get('clients', '?')} concurrent clients and a loopback "
        f"fake upstream, {a.get('turns', '?')} turns per client over "
        f"{a.get('sessions', '?')} conversations (each request the whole history). `direct`: "
        "the same clients and schedule straight to the fake, the baseline; `lost` and "
        "`duplicated`: acknowledged user turns missing from, or twice in, the session logs "
        "afterwards. A killed worker's clients retry once the service answers again.\n\n"
        + table(
            [
                "configuration",
                "workers",
                "turns",
                "errors",
                "lost",
                "duplicated",
                "retried",
                "killed a worker",
                "seconds",
                "proxied p50 / p99 ms",
                "direct p50 / p99 ms",
                "overhead p50 / p99 ms",
            ],
            rows,
        )
    )


def pct(x: Any) -> str:
    return "-" if x is None else f"{x:.1%}"


def tokens(d: dict[str, Any]) -> str:
    """Counters against Anthropic's usage deltas (bench_tokens part c, issue 30)."""
    every = table(
        [
            "counter",
            "Σestimate / Σprovider",
            "p50 error",
            "p90 error",
            "p95 error",
            "median signed",
        ],
        [
            [
                r["counter"],
                f3(r["ratio"]),
                pct(r["p50_error"]),
                pct(r["p90_error"]),
                pct(r["p95_error"]),
                f"{r['median_signed']:+.1%}",
            ]
            for r in d["every_file"]
        ],
    )
    rows = []
    for tok, h in d["held_out"].items():
        for key, s in h["sessions"].items():
            c = s["calibrated"]
            base = s["baselines"]
            rows.append(
                [
                    f"anthropic:{tok}",
                    key[:8],
                    s["steps"],
                    f3(c["ratio"]),
                    pct(c["p50_error"]),
                    pct(c["p90_error"]),
                    pct(c["p95_error"]),
                    "yes" if abs(c["ratio"] - 1) <= 0.03 and c["p90_error"] <= 0.15 else "no",
                ]
                + [f"{f3(base[n]['ratio'])} / {pct(base[n]['p90_error'])}" for n in base]
            )
        p = h["pooled"]
        rows.append(
            [
                f"anthropic:{tok}",
                "all three",
                p["steps"],
                f3(p["ratio"]),
                pct(p["p50_error"]),
                pct(p["p90_error"]),
                pct(p["p95_error"]),
                "",
                *[""] * len(base),
            ]
        )
    names = list(next(iter(next(iter(d["held_out"].values()))["sessions"].values()))["baselines"])
    held = table(
        [
            "counter",
            "held out",
            "steps",
            "Σestimate / Σprovider",
            "p50 error",
            "p90 error",
            "p95 error",
            "target met",
        ]
        + [f"{n}: Σ ratio / p90" for n in names],
        rows,
    )
    t = d["thinking"]
    think = table(
        ["thinking blocks of the response", "Σestimate / Σprovider", "p50 error", "p90 error"],
        [
            [label, f3(t[k]["ratio"]), pct(t[k]["p50_error"]), pct(t[k]["p90_error"])]
            for label, k in (("counted", "counted"), ("left out", "left_out"))
        ],
    )
    w = t["fitted_weights"]
    tools = table(
        ["tool", "steps", "median signed error", "estimate under 2/3 of the delta"],
        [
            [n, v["steps"], f"{v['median_signed']:+.1%}", pct(v["share_under_by_a_third"])]
            for n, v in d["by_tool"].items()
            if v["steps"] >= 3
        ],
    )
    skipped = ", ".join(f"{n} {why}" for why, n in d["skipped"].items()) or "none"
    return (
        f"Every Claude Code file of the shared data ({len(d['files'])} files: "
        f"{len(d['sessions'])} sessions, their subagents, the fixtures) read as usage steps: "
        f"{d['steps']} pairs of consecutive calls, the messages added between them and "
        f"Anthropic's prompt delta (pairs skipped: {skipped}). Relative error per step: "
        "`abs(estimate - delta) / delta`; see [Token counting](tokens.md).\n\n"
        + every
        + "\n\nThe calibrated rows above are the shipped fit, fit on these same files. "
        "Held out: each tokenization fit on two sessions (with their subagents and the "
        "fixtures) and scored on the third, in turn, with the uncalibrated counters on the "
        "same session beside it. Issue 30's target: within 3% in sum and a p90 error of at "
        "most 15% per step.\n\n"
        + held
        + f"\n\nThinking: the held-out anthropic:{t['tokenizer']} fit scored on the "
        f"{t['counted']['steps']} held-out steps whose response holds thinking, once with the "
        "thinking blocks counted and once fit and scored without them. Fit on every file, a "
        f"thinking token of the transcript counts {w['thinking']:.2f}× (text "
        f"{w['text']:.2f}×, tool results {w['tool_result']:.2f}×): the next prompt holds "
        "the previous response's thinking, and more of it than the summarised text the file "
        "keeps.\n\n" + think + "\n\nBy the tools a step called (held-out anthropic:"
        f"{t['tokenizer']}, tools with 3 steps or more): where the delta holds text the file "
        "does not (hook output after an edit, plan-mode and file-change reminders).\n\n" + tools
    )


SECTIONS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    ("Engine per-turn overhead", "bench_engine", engine),
    ("Syncing a framework's history", "bench_sync", sync),
    ("Replay over every recording", "bench_replay", replay),
    ("Token counts against Anthropic's usage", "tokens", tokens),
    ("Costs with the prompt cache, and the edit gate", "bench_costs", costs),
    ("Claude Code sessions through the proxy", "bench_proxy_replay", proxy_replay),
    ("The proxy under load", "bench_proxy", proxy_load),
    ("Compaction over every transcript", "bench_compact_all", compact_all),
    ("Compaction time", "bench_compaction", compaction),
    ("Summary retention and future references", "bench_retention", retention),
    ("Routing on CLINC150", "bench_routing", routing),
    ("Routing, held-out intents (offset 0)", "bench_routing_holdout7_0", routing),
    ("Routing, held-out intents (offset 1)", "bench_routing_holdout7_1", routing),
    ("Routing, held-out intents (offset 2)", "bench_routing_holdout7_2", routing),
    ("Router load and CLI latency", "bench_route_cli", route_cli),
    ("Memory recall latency", "bench_memory", memory),
    ("Recall presets on LoCoMo", "bench_presets", presets),
    ("Recall presets on LoCoMo, MiniLM", "bench_presets_minilm", presets),
    ("Tool catalog", "tools", tools),
    ("Handoffs on LoCoMo", "bench_handoff", handoff),
    ("Handoffs on Claude Code sessions", "bench_handoff_claude_code", handoff_claude_code),
    (
        "Handoffs on Claude Code sessions, MiniLM",
        "bench_handoff_claude_code_minilm",
        handoff_claude_code_minilm,
    ),
    ("Relay on the synthetic log", "bench_relay", relay),
    ("Framework hooks: invalid model inputs", "bench_frameworks", frameworks),
]

SCRIPTS = {
    "tools": "bench_tools.py",
    "tokens": "bench_tokens.py --parts c",
    "bench_presets_minilm": "bench_presets.py --embedder minilm",
    "bench_handoff_claude_code_minilm": "bench_handoff_claude_code.py --embedder minilm",
}
"""Results files not named after their script."""

OPTIONAL = {"bench_proxy"}
"""Sections left off the page while their results file is missing."""


def main() -> int:
    parts = [
        "# Benchmarks",
        "",
        "Written by `scripts/bench_docs.py` from `benchmarks/results/*.json`; each "
        "benchmark's docstring says what it measures and how. Times are from the machine "
        "named under each table; ratios against a baseline run in the same process travel "
        "between machines, absolute times do not.",
    ]
    for title, name, render in SECTIONS:
        path = RESULTS / f"{name}.json"
        if name in OPTIONAL and not path.is_file():
            continue
        parts += ["", f"## {title}", ""]
        if not path.is_file():
            script = SCRIPTS.get(name, name.split("_holdout")[0] + ".py")
            parts.append(f"Not run yet (`benchmarks/{script}`).")
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for plot, (source, draw) in bench_plots.PLOTS.items():
            if source == name:  # drawn from the results at build time (mkdocs_hooks.py)
                caption = (draw.__doc__ or plot).split("\n\n")[0].replace("\n", " ").strip()
                parts += [f"![{caption}](img/bench/{plot}.svg)", ""]
        parts.append(render(data))
        env = data.get("environment", {})
        machine = ", ".join(str(env[k]) for k in ("platform", "python", "cpu_count") if k in env)
        parts += ["", f"*Measured on: {machine or 'unknown'} (CPUs, last).*"]
    PAGE.write_text("\n".join(parts) + "\n", encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
