"""``assemble()`` over 10 / 100 / 1,000 / 10,000 realistic sections.

Sections: the text blocks and tool results of the Claude Code sessions in the
shared data, in file order, cycled when more sections are needed (a copy beyond
the first cycle gets a one-line ``(copy k)`` header so no two sections share
content, as in a real window). Flags come from ``random.Random(0)``: priority
``randint(0, 100)``, ~50% truncatable, ~10% stable, ~10% pinned (only while the
pinned total stays under 20% of the budget, so pinned never overflows). The
budget is 40% of the sections' CharCounter tokens, so assembly always has to
include, truncate and drop.

Measured per size (all times are one ``assemble()`` call; p50 and p99):

- ``CharCounter``. Target: 1,000 sections in <= 2 ms at p50.
- ``TiktokenCounter`` (o200k_base; when importable), against the raw encoder of
  the same backend measured in the same run (interleaved with the counter runs):
  ``raw encode`` = ``len(enc.encode(s.content))`` over the same section texts,
  ``raw count`` = ``enc.count(s.content)`` (what the counter calls inside).

  - cold: a fresh counter per call (empty cache; constructed outside the timer).
    Target: cold / raw encode <= 1.3.
  - warm: the same counter re-assembling unchanged sections (cache hits). No
    fixed target; reported as warm / raw encode.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from _common import (
    claude_code_transcripts,
    fmt_ms,
    iter_blocks,
    print_table,
    ratio,
    say,
    summarize_ns,
    time_ns,
    write_results,
)
from ctxwise import Assembly, CharCounter, Section, TiktokenCounter, assemble
from ctxwise.errors import MissingDependencyError, TokenizerUnavailableError

SIZES = (10, 100, 1_000, 10_000)
CHAR_ITERATIONS = {10: 200, 100: 200, 1_000: 200, 10_000: 20}
TIKTOKEN_ITERATIONS = {10: 200, 100: 100, 1_000: 30, 10_000: 8}
BUDGET_SHARE = 0.40
PINNED_MAX_SHARE = 0.20
CHAR_TARGET_MS = {1_000: 2.0}
COLD_TARGET_RATIO = 1.3


def real_texts() -> list[str]:
    """Text blocks and tool results of the Claude Code transcripts, in file order."""
    return [
        text
        for kind, text in iter_blocks(claude_code_transcripts())
        if kind in ("prose", "tool_result") and text.strip()
    ]


def make_sections(n: int, texts: list[str]) -> tuple[list[Section], int]:
    """``n`` sections and a budget of 40% of their CharCounter tokens."""
    rng = random.Random(0)
    contents = []
    for i in range(n):
        copy, j = divmod(i, len(texts))
        contents.append(texts[j] if copy == 0 else f"(copy {copy})\n{texts[j]}")
    char = CharCounter()
    sizes = [char.count(c) for c in contents]
    budget = max(1, int(BUDGET_SHARE * sum(sizes)))
    sections = []
    pinned_tokens = 0
    for i, (content, size) in enumerate(zip(contents, sizes, strict=True)):
        # Draw every number for every section, so one flag never shifts another.
        priority = rng.randint(0, 100)
        r_pin, r_trunc, r_stable = rng.random(), rng.random(), rng.random()
        pinned = r_pin < 0.10 and pinned_tokens + size < PINNED_MAX_SHARE * budget
        pinned_tokens += size if pinned else 0
        sections.append(
            Section(
                name=f"s{i}",
                content=content,
                priority=priority,
                pinned=pinned,
                truncatable=r_trunc < 0.50,
                stable=r_stable < 0.10,
            )
        )
    return sections, budget


def describe(sections: list[Section], budget: int, result: Assembly) -> dict[str, Any]:
    return {
        "sections": len(sections),
        "chars": sum(len(s.content) for s in sections),
        "budget": budget,
        "pinned": sum(s.pinned for s in sections),
        "truncatable": sum(s.truncatable for s in sections),
        "stable": sum(s.stable for s in sections),
        "included": len(result.included),
        "truncated": len(result.truncated),
        "dropped": len(result.dropped),
        "tokens": result.tokens,
    }


def bench_char(sections: list[Section], budget: int, iterations: int) -> dict[str, Any]:
    counter = CharCounter()
    result = assemble(sections, budget, counter)  # warm-up
    assert result.tokens <= budget
    samples = [time_ns(lambda: assemble(sections, budget, counter)) for _ in range(iterations)]
    return {"timing": summarize_ns(samples), "assembly": describe(sections, budget, result)}


def raw_encoder(backend: str) -> Any:
    if backend == "quicktok":
        import quicktok

        return quicktok.get_encoding("o200k_base")
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def bench_tiktoken(sections: list[Section], budget: int, iterations: int) -> dict[str, Any]:
    probe = TiktokenCounter("o200k_base")
    enc = raw_encoder(probe.backend)
    texts = [s.content for s in sections]
    runs: dict[str, Callable[[], object]] = {
        "raw encode": lambda: [len(enc.encode(t, disallowed_special=())) for t in texts],
    }
    if callable(getattr(enc, "count", None)):
        runs["raw count"] = lambda: [enc.count(t) for t in texts]

    warm_counter = TiktokenCounter("o200k_base")
    warm_result = assemble(sections, budget, warm_counter)  # fills the cache
    cold_result = assemble(sections, budget, TiktokenCounter("o200k_base"))
    assert warm_result.tokens == cold_result.tokens <= budget
    for fn in runs.values():  # warm-up
        fn()

    samples: dict[str, list[int]] = {name: [] for name in (*runs, "cold", "warm")}
    cache = getattr(warm_counter, "_cache", None)  # internal; only for the hit count
    hits_before = getattr(cache, "hits", 0)
    for _ in range(iterations):  # interleaved, so drift hits every mode alike
        for name, fn in runs.items():
            samples[name].append(time_ns(fn))
        fresh = TiktokenCounter("o200k_base")
        samples["cold"].append(time_ns(lambda c=fresh: assemble(sections, budget, c)))
        samples["warm"].append(time_ns(lambda: assemble(sections, budget, warm_counter)))
    hits = (getattr(cache, "hits", 0) - hits_before) / iterations
    return {
        "backend": probe.backend,
        "timing": {name: summarize_ns(s) for name, s in samples.items()},
        "warm_cache": {"hits_per_assemble": hits, "misses_total": getattr(cache, "misses", None)},
        "assembly": describe(sections, budget, cold_result),
    }


def tiktoken_available() -> str | None:
    """``None`` when TiktokenCounter works here, else why not."""
    try:
        TiktokenCounter("o200k_base")
    except (MissingDependencyError, TokenizerUnavailableError) as exc:
        return str(exc)
    return None


def main() -> None:
    texts = real_texts()
    say(
        f"{len(texts):,} real texts ({sum(map(len, texts)):,} chars) from the Claude Code "
        f"sessions; budget = {BUDGET_SHARE:.0%} of the sections' CharCounter tokens"
    )
    unavailable = tiktoken_available()
    if unavailable:
        say(f"TiktokenCounter skipped: {unavailable}")

    results: list[dict[str, Any]] = []
    rows: list[list[object]] = []
    for n in SIZES:
        sections, budget = make_sections(n, texts)
        char = bench_char(sections, budget, CHAR_ITERATIONS[n])
        tik = None if unavailable else bench_tiktoken(sections, budget, TIKTOKEN_ITERATIONS[n])
        raw = tik["timing"]["raw encode"]["p50_ms"] if tik else math.nan
        a = char["assembly"]
        say(
            f"{n:,} sections: {a['chars']:,} chars, budget {budget:,}, pinned {a['pinned']}, "
            f"truncatable {a['truncatable']}, stable {a['stable']} → included {a['included']}, "
            f"truncated {a['truncated']}, dropped {a['dropped']}"
        )

        entry: dict[str, Any] = {"sections": n, "char": char, "tiktoken": tik, "targets": {}}
        st = char["timing"]
        target_ms = CHAR_TARGET_MS.get(n)
        met = None if target_ms is None else st["p50_ms"] <= target_ms
        entry["targets"]["char_p50_ms"] = {"target": target_ms, "met": met}
        rows.append(
            [
                f"{n:,}",
                "char",
                "-",
                fmt_ms(st["p50_ms"]),
                fmt_ms(st["p99_ms"]),
                f"{ratio(st['p50_ms'], raw):.3f}" if tik else "-",
                f"p50 ≤ {target_ms:g} ms" if target_ms else "-",
                "-" if met is None else ("yes" if met else "NO"),
            ]
        )
        if tik:
            t = tik["timing"]
            for mode in t:
                mt = t[mode]
                r = ratio(mt["p50_ms"], raw)
                target = f"≤ {COLD_TARGET_RATIO}" if mode == "cold" else "-"
                ok = None if mode != "cold" else r <= COLD_TARGET_RATIO
                if mode == "cold":
                    entry["targets"]["cold_ratio"] = {
                        "target": COLD_TARGET_RATIO,
                        "ratio": r,
                        "met": ok,
                    }
                tik.setdefault("ratios_vs_raw_encode", {})[mode] = r
                rows.append(
                    [
                        f"{n:,}",
                        f"{tik['backend']} (baseline)" if mode.startswith("raw") else "tiktoken",
                        mode,
                        fmt_ms(mt["p50_ms"]),
                        fmt_ms(mt["p99_ms"]),
                        f"{r:.3f}",
                        target,
                        "-" if ok is None else ("yes" if ok else "NO"),
                    ]
                )
        results.append(entry)

    print_table(
        "assemble(): one call, p50 / p99 (ratio = p50 / p50 of raw encode of the same texts)",
        [
            "sections",
            "counter",
            "mode",
            "p50 ms",
            "p99 ms",
            "ratio vs raw encode",
            "target",
            "met?",
        ],
        rows,
        align="rllrrrll",
        caption=f"iterations: char {CHAR_ITERATIONS}, tiktoken {TIKTOKEN_ITERATIONS}",
    )
    write_results(
        "bench_assembly",
        {
            "budget_share": BUDGET_SHARE,
            "pinned_max_share": PINNED_MAX_SHARE,
            "char_iterations": CHAR_ITERATIONS,
            "tiktoken_iterations": TIKTOKEN_ITERATIONS,
            "tiktoken_unavailable": unavailable,
            "sizes": results,
        },
    )


if __name__ == "__main__":
    main()
