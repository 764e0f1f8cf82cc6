"""Routing evaluation on labeled JSONL files, and the CLINC150 converter.

The file format is generic: one JSON object a line, ``{"text": ..., "label": ...}``;
the label ``"oos"`` marks an out-of-scope query. Any intent dataset in this
format can be evaluated.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxwise._io import parse_json, read_text_file, read_user_file, write_output
from ctxwise.embedding_cache import bypassing
from ctxwise.errors import FormatError, OutputError, UsageError
from ctxwise.routing.calibration import (
    DEFAULT_OBJECTIVE,
    OUT_OF_SCOPE,
    FitReport,
    Objective,
    routing_metrics,
)
from ctxwise.routing.decision import RouteDecision
from ctxwise.routing.router import IntentRouter
from ctxwise.routing.scorers import Scorer

__all__ = [
    "HOLDOUT_EVERY",
    "EvalResult",
    "build_router",
    "check_fit_rows",
    "check_training",
    "clinc150_splits",
    "evaluate",
    "held_out_intents",
    "holdout_split",
    "load_labeled",
    "write_labeled",
]

Labeled = list[tuple[str, str]]
HOLDOUT_EVERY = 5
_ROUTE_BATCH = 500
"""Test queries routed per ``route_many`` call by :func:`evaluate` (progress is
reported between batches). The queries are batched in sorted order, so the same
test rows in any order are batched alike."""


def check_training(rows: Labeled, source: str = "training data") -> None:
    """A :class:`~ctxwise.errors.UsageError` unless ``rows`` name at least two intents."""
    intents = sorted({label for _, label in rows if label != OUT_OF_SCOPE})
    if len(intents) < 2:
        found = f"one ({intents[0]!r})" if intents else "none"
        raise UsageError(f"{source}: a router needs at least two intents, found {found}")


def check_fit_rows(rows: Labeled, source: str = "fit data") -> None:
    """A :class:`~ctxwise.errors.UsageError` unless ``rows`` hold both out-of-scope
    and in-scope examples, which calibration needs."""
    if not any(label == OUT_OF_SCOPE for _, label in rows):
        raise UsageError(
            f"{source}: no out-of-scope rows (label {OUT_OF_SCOPE!r}); calibration needs "
            "them to choose when to refuse"
        )
    if all(label == OUT_OF_SCOPE for _, label in rows):
        raise UsageError(f"{source}: no in-scope rows; calibration needs them too")


def holdout_split(rows: Labeled, every: int = HOLDOUT_EVERY) -> tuple[Labeled, Labeled]:
    """``(train, fit)``: every ``every``-th row of each label (its 5th, 10th, … in
    file order, out-of-scope rows included) goes to ``fit``, the rest to ``train``.
    Deterministic, and a label with fewer than ``every`` rows stays whole in train."""
    seen: dict[str, int] = {}
    train: Labeled = []
    fit: Labeled = []
    for text, label in rows:
        seen[label] = seen.get(label, 0) + 1
        (fit if seen[label] % every == 0 else train).append((text, label))
    return train, fit


def build_router(
    train: Labeled,
    *,
    scorer: Scorer | None = None,
    fit_on: Labeled | None = None,
    objective: Objective = DEFAULT_OBJECTIVE,
    train_source: str = "training data",
    fit_source: str = "fit data",
) -> tuple[IntentRouter, FitReport, str]:
    """A fitted, calibrated router, its fit report, and what it was calibrated on.

    With ``fit_on`` the router trains on all of ``train`` and calibrates on
    ``fit_on``. Without it, :func:`holdout_split` holds every 5th row of each label
    out of ``train`` to calibrate on, and the router trains on the other four
    fifths (so the calibration is measured on rows the scorer never saw).

    Raises:
        UsageError: fewer than two intents; no out-of-scope rows to calibrate on;
            a fit label with no training rows; too little text for the scorer.
    """
    check_training(train, train_source)
    how = fit_source
    if fit_on is None:
        train, fit_on = holdout_split(train)
        how = f"every {HOLDOUT_EVERY}th row of each label, held out of {train_source}"
        if not any(label == OUT_OF_SCOPE for _, label in fit_on):
            raise UsageError(
                f"{train_source}: no out-of-scope rows to calibrate on (it needs at least "
                f"{HOLDOUT_EVERY} labelled {OUT_OF_SCOPE!r}); add them, or pass a fit "
                "file with some"
            )
        check_training(train, train_source)
    else:
        check_fit_rows(fit_on, fit_source)
    router = IntentRouter.from_labeled(train, scorer)
    report = router.fit(fit_on, objective=objective)
    return router, report, how


def load_labeled(path: str | Path) -> Labeled:
    """``(text, label)`` pairs from a JSONL file; a row whose text is empty or only
    whitespace is a :class:`~ctxwise.errors.FormatError` naming its line."""
    p = Path(path)
    text = read_text_file(p, "a JSONL file", FormatError)
    out: Labeled = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = parse_json(line)
        except (json.JSONDecodeError, RecursionError):
            raise FormatError(str(p), "invalid JSON", line=lineno) from None
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("text"), str)
            or not isinstance(item.get("label"), str)
        ):
            raise FormatError(str(p), 'each line must be {"text": str, "label": str}', line=lineno)
        if not item["text"].strip():
            # nothing to train on or route: say where, not "empty query" later
            raise FormatError(str(p), "empty text", line=lineno)
        out.append((item["text"], item["label"]))
    if not out:
        raise FormatError(str(p), "no examples")
    return out


def write_labeled(path: str | Path, examples: Sequence[tuple[str, str]]) -> None:
    """Write ``{"text", "label"}`` JSONL atomically (see :func:`ctxwise._io.write_output`)."""
    write_output(path, _labeled_bytes(examples))


def _labeled_bytes(examples: Sequence[tuple[str, str]]) -> bytes:
    rows = [{"text": text, "label": label} for text, label in examples]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: write them as JSON escapes
        return "".join(json.dumps(r) + "\n" for r in rows).encode("ascii")


@dataclass(frozen=True, slots=True)
class EvalResult:
    metrics: dict[str, Any]
    threshold: float
    margin: float
    per_intent_thresholds: int
    p50_ms: float
    p99_ms: float
    fit_seconds: float
    scorer: str
    objective: str
    calibrated_on: str

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.metrics,
            "threshold": round(self.threshold, 6),
            "margin": self.margin,
            "per_intent_thresholds": self.per_intent_thresholds,
            "p50_ms": round(self.p50_ms, 4),
            "p99_ms": round(self.p99_ms, 4),
            "fit_seconds": round(self.fit_seconds, 3),
            "scorer": self.scorer,
            "objective": self.objective,
            "calibrated_on": self.calibrated_on,
        }


def evaluate(
    train: Labeled,
    test: Labeled,
    *,
    scorer: Scorer | None = None,
    fit_on: Labeled | None = None,
    objective: Objective = DEFAULT_OBJECTIVE,
    latency_queries: int = 1000,
    clock: Callable[[], int] = time.perf_counter_ns,
    train_source: str = "training data",
    fit_source: str = "fit data",
    progress: Callable[[int, int], None] | None = None,
) -> EvalResult:
    """Build a router as :func:`build_router` does (and ``ctxwise router build``):
    train on ``train`` (``"oos"`` rows become negatives) and calibrate for
    ``objective`` on ``fit_on``, or without it on every 5th row of each label held
    out of ``train``; then measure it on ``test``: metrics, and the latency of
    single-query ``route`` calls on the first ``latency_queries`` test queries.
    ``progress(done, total)`` counts the test queries routed, then the latency
    queries (``0`` while the router is fitted); nothing is printed.

    Raises:
        UsageError: as :func:`build_router`, or a test label has no training rows.
    """
    check_training(train, train_source)
    unknown = sorted(
        {label for _, label in test if label != OUT_OF_SCOPE}
        - {label for _, label in train if label != OUT_OF_SCOPE}
    )
    if unknown:  # before the (slow) fit
        raise UsageError(f"test labels with no training examples: {', '.join(unknown[:5])}")
    timed = test[:latency_queries]
    work = len(test) + len(timed)
    if progress is not None:
        progress(0, work)
    start = clock()
    router, _, how = build_router(
        train,
        scorer=scorer,
        fit_on=fit_on,
        objective=objective,
        train_source=train_source,
        fit_source=fit_source,
    )
    fit_seconds = (clock() - start) / 1e9
    texts = [t for t, _ in test]
    # in batches, to report progress; batched in sorted order, so which queries share
    # a batch (and an encoder's float noise with them) does not follow the file's order
    order = sorted(range(len(texts)), key=texts.__getitem__)
    routed: list[RouteDecision | None] = [None] * len(texts)
    for at in range(0, len(order), _ROUTE_BATCH):
        batch = order[at : at + _ROUTE_BATCH]
        for i, decision in zip(batch, router.route_many([texts[i] for i in batch]), strict=True):
            routed[i] = decision
        if progress is not None:
            progress(min(at + _ROUTE_BATCH, len(order)), work)
    decisions = [d for d in routed if d is not None]
    metrics = routing_metrics([g for _, g in test], [d.label for d in decisions]).to_dict()
    times = []
    # latency is the model's: a cached embedder embeds afresh while it is timed
    with bypassing(getattr(router.scorer, "embedder", None)):
        for n, (text, _) in enumerate(timed, 1):
            t0 = clock()
            router.route(text)
            times.append((clock() - t0) / 1e6)
            if progress is not None and (n % _ROUTE_BATCH == 0 or n == len(timed)):
                progress(len(test) + n, work)
    return EvalResult(
        metrics=metrics,
        threshold=router.calibration.threshold,
        margin=router.calibration.margin,
        per_intent_thresholds=len(router.calibration.per_intent),
        p50_ms=float(np.percentile(times, 50)) if times else 0.0,
        p99_ms=float(np.percentile(times, 99)) if times else 0.0,
        fit_seconds=fit_seconds,
        scorer=router.scorer.name,
        objective=objective,
        calibrated_on=how,
    )


def held_out_intents(intents: Sequence[str], every: int, offset: int = 0) -> list[str]:
    """The intents a held-out-intent split removes: sorted by name, every
    ``every``-th one starting at position ``offset`` (0-based)."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 2:
        raise UsageError(f"hold-out-every must be an integer of 2 or more, got {every!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < every:
        raise UsageError(f"offset must be an integer from 0 to {every - 1}, got {offset!r}")
    return [name for i, name in enumerate(sorted(set(intents))) if i % every == offset]


def clinc150_splits(
    data_full: str | Path,
    out_dir: str | Path,
    *,
    hold_out_every: int | None = None,
    offset: int = 0,
) -> dict[str, int]:
    """Write CLINC150 as ``train.jsonl`` (train + oos_train), ``fit.jsonl`` (val +
    oos_val) and ``test.jsonl`` (test + oos_test); the out-of-scope label is ``"oos"``.

    With ``hold_out_every=K``, a held-out-intent split (unseen intents must be
    refused): of the 150 intents sorted by name, those at positions ``offset``,
    ``offset + K``, … (:func:`held_out_intents`; 22 intents for K = 7 and offsets
    0–2) are left out of ``train.jsonl`` entirely, and their rows in ``fit.jsonl``
    and ``test.jsonl`` are labelled ``"oos"`` (beside the original out-of-scope
    rows). The counts returned then include ``held_out`` (how many intents)."""
    if hold_out_every is None and offset != 0:
        raise UsageError(
            f"offset {offset!r} applies to a held-out-intent split: give hold_out_every too"
        )
    src = Path(data_full)
    raw = read_user_file(src, "CLINC150 data", FormatError)  # a FIFO or device: refused
    try:
        data = parse_json(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise FormatError(str(src), f"cannot read CLINC150 data: {exc}") from None
    splits = {
        "train": ("train", "oos_train"),
        "fit": ("val", "oos_val"),
        "test": ("test", "oos_test"),
    }
    if not isinstance(data, dict) or any(k not in data for pair in splits.values() for k in pair):
        raise FormatError(
            str(src), "not CLINC150 data_full.json (needs train/val/test and oos_* splits)"
        )
    checked = {key: _clinc_rows(data[key], key, src) for pair in splits.values() for key in pair}
    held: set[str] = set()
    if hold_out_every is not None:
        intents = [label for _, label in checked["train"]]
        held = set(held_out_intents(intents, hold_out_every, offset))
    # every file's bytes first, then the writes: bad data leaves no partial set
    bodies: dict[str, bytes] = {}
    counts = {}
    for name, keys in splits.items():
        rows = [row for key in keys for row in checked[key]]
        if name == "train":
            rows = [r for r in rows if r[1] not in held]
        else:
            rows = [(text, OUT_OF_SCOPE if label in held else label) for text, label in rows]
        bodies[name] = _labeled_bytes(rows)
        counts[name] = len(rows)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(str(out), exc.strerror or str(exc)) from None
    for name, body in bodies.items():
        write_output(out / f"{name}.jsonl", body)
    if hold_out_every is not None:
        counts["held_out"] = len(held)
    return counts


def _clinc_rows(rows: Any, key: str, src: Path) -> list[tuple[str, str]]:
    """A CLINC150 split's rows, each checked to be a ``[text, label]`` pair of strings."""
    if not isinstance(rows, list):
        raise FormatError(str(src), f"malformed CLINC150 data: {key!r} is not a list of rows")
    out: list[tuple[str, str]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 2:
            why = f"a {_json_kind(row)}" if not isinstance(row, list) else f"{len(row)} items"
        elif not isinstance(row[0], str) or not isinstance(row[1], str):
            why = f"a {_json_kind(row[0])} and a {_json_kind(row[1])}"
        else:
            out.append((row[0], row[1]))
            continue
        raise FormatError(
            str(src),
            f"malformed CLINC150 row {key}[{i}]: each row is a [text, label] pair of "
            f"strings, not {why}",
        )
    return out


def _json_kind(value: Any) -> str:
    names: dict[type, str] = {bool: "boolean", int: "number", float: "number", str: "string"}
    names.update({list: "list", dict: "object", type(None): "null"})
    return names.get(type(value), type(value).__name__)
