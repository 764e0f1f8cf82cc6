"""Token counting: CharCounter's error, and quicktok's exactness and speed vs tiktoken.

Data: every content block of at least 20 characters of every Claude Code transcript
(top-level ``*.jsonl`` and ``*/subagents/*.jsonl``) and of the 200 tau-bench
trajectories in ``transcripts/tau_bench/gpt-4o-airline.json``, text as
:func:`ctxwise.messages.block_text` gives it (tool inputs as compact JSON).

(a) Relative error ``(char - exact) / exact`` of ``CharCounter()`` and
    ``CharCounter(safety_margin=0.1)`` against the exact ``o200k_base`` count
    (``TiktokenCounter("o200k_base", backend="quicktok")``): median, p90 and max of
    the signed and of the absolute error, ``Σchar / Σexact``, and the share of
    blocks the counter does not undercount, by kind (prose = user/assistant
    text, tool_result, tool_use, other = system prompts and thinking, all).
    No hard target: the numbers back (or refute) the CharCounter docstring
    ("undercounts real BPE tokenizers by about 10% on technical English").

(b) A real ``tiktoken.Encoding`` is rebuilt offline from quicktok's bundled
    vocabulary (the pattern and special tokens come from
    ``tiktoken_ext.openai_public.o200k_base`` with ``load_tiktoken_bpe`` patched
    in this script only, so nothing is downloaded). Targets: the sha256 of the
    rebuilt ``.tiktoken`` file equals the hash tiktoken pins; quicktok's ids equal
    tiktoken's ``encode_ordinary`` ids on every text (0 mismatches); quicktok's
    ``count`` is faster than ``len(tiktoken.encode_ordinary)`` (speedups are
    ratios of p50 times measured in this run, interleaved).
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections import defaultdict
from typing import Any

from _common import (
    claude_code_transcripts,
    fmt_ms,
    fmt_pct,
    iter_blocks,
    percentile,
    print_table,
    ratio,
    say,
    summarize_ns,
    tau_bench_transcripts,
    time_ns,
    write_results,
)
from ctxwise import CharCounter, TiktokenCounter

MIN_CHARS = 20
KINDS = ("prose", "tool_result", "tool_use", "other", "all")
TIMING_PASSES = 7
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def collect_texts() -> list[tuple[str, str, str]]:
    """``(source, kind, text)`` for every block of at least ``MIN_CHARS`` characters."""
    out: list[tuple[str, str, str]] = []
    for source, transcripts in (
        ("claude_code", claude_code_transcripts()),
        ("tau_bench", tau_bench_transcripts()),
    ):
        for kind, text in iter_blocks(transcripts):
            if len(text) >= MIN_CHARS:
                out.append((source, kind, text))
    return out


# --------------------------------------------------------------------------- (a)


def error_stats(approx: list[int], exact: list[int]) -> dict[str, Any]:
    errs = [(a - e) / e for a, e in zip(approx, exact, strict=True)]
    abs_errs = [abs(x) for x in errs]
    return {
        "blocks": len(errs),
        "median": percentile(errs, 50),
        "p90": percentile(errs, 90),
        "max": max(errs),
        "min": min(errs),
        "abs_median": percentile(abs_errs, 50),
        "abs_p90": percentile(abs_errs, 90),
        "abs_max": max(abs_errs),
        "sum_ratio": sum(approx) / sum(exact),
        "share_not_undercounting": sum(a >= e for a, e in zip(approx, exact, strict=True))
        / len(errs),
    }


def part_a(texts: list[tuple[str, str, str]]) -> tuple[dict[str, Any], list[int]]:
    exact_counter = TiktokenCounter("o200k_base", backend="quicktok")
    exact = [exact_counter.count(t) for _, _, t in texts]
    assert all(e > 0 for e in exact), "a block of 20+ characters counted 0 tokens"
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)  # (source, kind) -> indexes
    for i, (source, kind, _) in enumerate(texts):
        for src in ("all", source):
            groups[src, kind].append(i)
            groups[src, "all"].append(i)

    counters = (CharCounter(), CharCounter(safety_margin=0.1))
    stats: dict[str, dict[str, dict[str, Any]]] = {}  # counter -> "source/kind" -> stats
    for counter in counters:
        approx = [counter.count(t) for _, _, t in texts]
        stats[counter.name] = {
            f"{src}/{kind}": error_stats([approx[i] for i in idx], [exact[i] for i in idx])
            for (src, kind), idx in groups.items()
        }

    rows = []
    for counter in counters:
        for kind in KINDS:
            st = stats[counter.name][f"all/{kind}"]
            rows.append(
                [
                    counter.name,
                    kind,
                    f"{st['blocks']:,}",
                    fmt_pct(st["median"]),
                    fmt_pct(st["p90"]),
                    fmt_pct(st["max"]),
                    f"{st['abs_median']:.1%}",
                    f"{st['abs_p90']:.1%}",
                    f"{st['abs_max']:.1%}",
                    f"{st['sum_ratio']:.3f}",
                    f"{st['share_not_undercounting']:.1%}",
                ]
            )
    print_table(
        "(a) CharCounter vs exact o200k_base: relative error (char - exact) / exact per block",
        [
            "counter",
            "kind",
            "blocks",
            "median",
            "p90",
            "max",
            "median |e|",
            "p90 |e|",
            "max |e|",
            "Σchar/Σexact",
            "char ≥ exact",
        ],
        rows,
        align="llr" + "r" * 8,
        caption="prose = user/assistant text; other = system prompts and thinking; "
        f"blocks of ≥ {MIN_CHARS} chars",
    )

    rows = []
    for source in ("claude_code", "tau_bench"):
        for kind in KINDS:
            key = f"{source}/{kind}"
            if key not in stats[counters[0].name]:
                continue
            row: list[object] = [source, kind, f"{stats[counters[0].name][key]['blocks']:,}"]
            for counter in counters:
                st = stats[counter.name][key]
                row += [
                    fmt_pct(st["median"]),
                    f"{st['sum_ratio']:.3f}",
                    f"{st['share_not_undercounting']:.1%}",
                ]
            rows.append(row)
    print_table(
        "(a) the same by source: median signed error, Σchar/Σexact, share with char ≥ exact",
        [
            "source",
            "kind",
            "blocks",
            "char median",
            "char Σ ratio",
            "char ≥ exact",
            "char+0.1 median",
            "char+0.1 Σ ratio",
            "char+0.1 ≥ exact",
        ],
        rows,
        align="llr" + "r" * 6,
    )
    return {"exact_counter": repr(exact_counter), "counters": stats}, exact


# --------------------------------------------------------------------------- (b)


def tiktoken_file_sha256(ranks: dict[bytes, int]) -> str:
    """sha256 of the ``.tiktoken`` file these ranks would be read from."""
    lines = [
        base64.b64encode(tok) + b" " + str(rank).encode()
        for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])
    ]
    return hashlib.sha256(b"\n".join(lines) + b"\n").hexdigest()


def build_tiktoken(qenc: Any) -> tuple[Any, dict[str, Any]]:
    """A tiktoken Encoding for o200k_base built from quicktok's vocabulary, offline."""
    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    ranks: dict[bytes, int] = {}
    specials: dict[str, int] = {}
    gaps = 0
    for i in range(qenc.n_vocab):
        if qenc.is_special_token(i):
            specials[qenc.decode_single_token_bytes(i).decode()] = i
            continue
        try:
            ranks[qenc.decode_single_token_bytes(i)] = i
        except KeyError:  # ids between the last rank and the special tokens
            gaps += 1
    sha = tiktoken_file_sha256(ranks)

    captured: dict[str, Any] = {}

    def load_from_quicktok(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        captured.update(url=url, expected_hash=expected_hash)
        return dict(ranks)

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load_from_quicktok
    try:
        params = openai_public.o200k_base()
    finally:
        openai_public.load_tiktoken_bpe = original
    holder: list[Any] = []
    build_ns = time_ns(lambda: holder.append(tiktoken.Encoding(**params)))
    enc = holder[0]
    info = {
        "mergeable_ranks": len(ranks),
        "vocab_gaps": gaps,
        "special_tokens_quicktok": specials,
        "special_tokens_tiktoken": params["special_tokens"],
        "special_tokens_match": specials == params["special_tokens"],
        "url": captured.get("url"),
        "expected_sha256": captured.get("expected_hash"),
        "rebuilt_sha256": sha,
        "sha256_match": sha == captured.get("expected_hash") == O200K_SHA256,
        "tiktoken_encoding_build_ms": build_ns / 1e6,
    }
    return enc, info


def part_b(texts: list[str], exact: list[int]) -> dict[str, Any]:
    import quicktok

    qenc = quicktok.get_encoding("o200k_base")
    tenc, info = build_tiktoken(qenc)

    id_mismatches = count_mismatches = 0
    examples = []
    for text, n in zip(texts, exact, strict=True):
        ref = tenc.encode_ordinary(text)
        ids = qenc.encode(text, disallowed_special=())
        if ids != ref:
            id_mismatches += 1
            if len(examples) < 5:
                examples.append(text[:120])
        if qenc.count(text) != len(ref) or n != len(ref):
            count_mismatches += 1
    info.update(
        texts=len(texts),
        id_mismatches=id_mismatches,
        count_mismatches=count_mismatches,
        mismatch_examples=examples,
    )

    char = CharCounter()
    methods = {
        "tiktoken len(encode_ordinary)": lambda: [len(tenc.encode_ordinary(t)) for t in texts],
        "quicktok count": lambda: [qenc.count(t) for t in texts],
        "quicktok len(encode)": lambda: [len(qenc.encode(t, disallowed_special=())) for t in texts],
        "CharCounter().count": lambda: [char.count(t) for t in texts],
    }
    for fn in methods.values():  # warm-up pass
        fn()
    samples: dict[str, list[int]] = {name: [] for name in methods}
    for _ in range(TIMING_PASSES):  # interleaved, so drift hits every method alike
        for name, fn in methods.items():
            samples[name].append(time_ns(fn))
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    base = summarize_ns(samples["tiktoken len(encode_ordinary)"])["p50_ms"]
    timing = {}
    rows = []
    for name, s in samples.items():
        st = summarize_ns(s)
        st["mb_per_s"] = mb / (st["p50_ms"] / 1e3)
        st["speedup_vs_tiktoken"] = ratio(base, st["p50_ms"])
        timing[name] = st
        rows.append(
            [
                name,
                fmt_ms(st["p50_ms"]),
                fmt_ms(st["p99_ms"]),
                f"{st['mb_per_s']:,.0f}",
                f"{st['speedup_vs_tiktoken']:.2f}×",
            ]
        )
    info["timing"] = timing
    info["corpus_mb"] = mb

    print_table(
        "(b) quicktok vs tiktoken (o200k_base rebuilt offline from quicktok's vocabulary)",
        ["check", "result"],
        [
            ["rebuilt .tiktoken sha256", info["rebuilt_sha256"]],
            ["tiktoken's pinned sha256", info["expected_sha256"]],
            ["sha256 match", "yes" if info["sha256_match"] else "NO"],
            ["mergeable ranks / vocab gaps", f"{info['mergeable_ranks']:,} / {info['vocab_gaps']}"],
            ["special tokens match", "yes" if info["special_tokens_match"] else "NO"],
            ["texts compared", f"{len(texts):,}"],
            ["texts with different ids", f"{id_mismatches}"],
            ["texts with different counts", f"{count_mismatches}"],
            ["tiktoken Encoding build", f"{info['tiktoken_encoding_build_ms']:.0f} ms"],
        ],
        align="ll",
    )
    print_table(
        f"(b) counting all {len(texts):,} texts ({mb:.2f} MB), {TIMING_PASSES} interleaved passes",
        ["method", "p50 ms", "p99 ms", "MB/s", "speedup vs tiktoken"],
        rows,
    )
    return info


def main() -> None:
    texts = collect_texts()
    say(
        f"{len(texts):,} blocks of ≥ {MIN_CHARS} chars "
        f"({sum(s == 'claude_code' for s, _, _ in texts):,} Claude Code, "
        f"{sum(s == 'tau_bench' for s, _, _ in texts):,} tau-bench)"
    )
    a, exact = part_a(texts)
    try:
        import quicktok  # noqa: F401
        import tiktoken  # noqa: F401
    except ImportError as exc:
        say(f"(b) skipped: {exc}")
        b: dict[str, Any] = {"skipped": str(exc)}
    else:
        b = part_b([t for _, _, t in texts], exact)

    targets = []
    if "skipped" not in b:
        qt = b["timing"]["quicktok count"]["speedup_vs_tiktoken"]
        targets = [
            ["rebuilt o200k_base sha256 == tiktoken's pinned hash", b["sha256_match"]],
            ["quicktok ids == tiktoken ids on every text", b["id_mismatches"] == 0],
            ["quicktok count faster than tiktoken", not math.isnan(qt) and qt > 1.0],
        ]
        print_table(
            "targets",
            ["target", "met?"],
            [[t, "yes" if ok else "NO"] for t, ok in targets],
            align="ll",
        )
    write_results(
        "bench_tokens",
        {
            "min_chars": MIN_CHARS,
            "blocks": len(texts),
            "char_error": a,
            "quicktok_vs_tiktoken": b,
            "targets": {t: bool(ok) for t, ok in targets},
        },
    )


if __name__ == "__main__":
    main()
