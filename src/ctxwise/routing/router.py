"""The intent router: scores a query against registered intents and refuses to
guess when the best score is too low or two intents are too close."""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import io
import json
import math
import os
import re
import threading
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import ValidationError

from ctxwise._io import parse_json, read_user_file, write_output
from ctxwise._schema import as_dict, describe
from ctxwise.errors import FormatError, OutputError, UsageError
from ctxwise.routing._schema import RouterFile, StateItem
from ctxwise.routing.calibration import (
    DEFAULT_OBJECTIVE,
    OUT_OF_SCOPE,
    Calibration,
    FitReport,
    Objective,
    calibrate,
    decide,
    routing_metrics,
)
from ctxwise.routing.decision import Intent, RouteDecision, RouteReason
from ctxwise.routing.scorers import BowScorer, SavableScorer, Scorer, make_scorer

__all__ = ["ROUTER_FORMAT", "ROUTER_VERSION", "IntentRouter", "arrays_path"]

ROUTER_FORMAT = "ctxwise-router"
ROUTER_VERSION = 2
"""Version 2 stores a fitted scorer's parameters in an ``.npz`` beside the JSON;
version 1 files (no parameters) still load, and re-fit on first use."""
READS_VERSIONS = (1, 2)


def arrays_path(path: str | Path, sha256: str) -> Path:
    """Where :meth:`IntentRouter.save` puts arrays whose SHA-256 is ``sha256`` for a
    router saved at ``path``: ``PATH.<first 16 hex digits>.npz``, beside the file
    ``PATH`` finally names (a symbolic link is followed, so saving through a link
    and loading the link or its target find the same arrays). Named by content, so
    saving new arrays never overwrites the ones the router already at ``path``
    names: a save cut short at any point leaves that router loadable."""
    p = Path(os.path.realpath(path))
    return p.with_name(f"{p.name}.{sha256[:16]}.npz")


def _named_arrays(path: Path) -> Path | None:
    """The arrays file the router now at ``path`` names (``None`` when there is no
    such router, it names none, or it cannot be read: best effort, for the clean-up
    after a save)."""
    try:
        data = parse_json(path.read_bytes().removeprefix(codecs.BOM_UTF8).decode("utf-8"))
        doc = RouterFile.model_validate(data)
    except (OSError, ValueError, RecursionError, ValidationError):
        return None
    if doc.state is None:
        return None
    real = Path(os.path.realpath(path))
    name = doc.state.file
    # only a name save writes (or wrote before arrays were named by content)
    ours = name == f"{real.name}.npz" or (
        name.startswith(f"{real.name}.")
        and name.endswith(".npz")
        and re.fullmatch(r"[0-9a-f]{16}", name[len(real.name) + 1 : -4]) is not None
    )
    return real.with_name(name) if ours else None


MAX_QUERY_CHARS = 20_000


class IntentRouter:
    """Routes queries to intents, or refuses.

    Once its intents are added, a router may route from several threads at once
    (the scorer is fitted once, by the first route or :meth:`prepare`); adding
    intents while other threads route is not supported.

    >>> router = IntentRouter(threshold=0.3, margin=0.05)
    >>> router.add("billing", keywords=["refund", "charge", "invoice", "payment", "money"])
    >>> router.add("cancel", keywords=["cancel", "charge", "subscription", "stop", "account"])
    >>> router.route("I need a refund for my invoice payment").label
    'billing'
    >>> router.route("cancel and refund charge").reason.value
    'ambiguous_tie'
    """

    def __init__(
        self,
        scorer: Scorer | None = None,
        *,
        threshold: float = 0.3,
        margin: float = 0.05,
        max_query_chars: int = MAX_QUERY_CHARS,
    ) -> None:
        for name, value in (("threshold", threshold), ("margin", margin)):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise UsageError(f"{name} must be a finite number, got {value!r}")
        if margin < 0:
            raise UsageError(f"margin must be 0 or more, got {margin}")
        if (
            isinstance(max_query_chars, bool)
            or not isinstance(max_query_chars, int)
            or max_query_chars < 1
        ):
            raise UsageError(
                f"max_query_chars must be an integer of 1 or more, got {max_query_chars!r}"
            )
        self.scorer: Scorer = scorer if scorer is not None else BowScorer()
        self.calibration = Calibration(float(threshold), float(margin))
        self.max_query_chars = max_query_chars
        self._intents: dict[str, Intent] = {}
        self._negatives: list[str] = []
        self._fitted = False
        self._fit_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_fit_lock"]  # a lock does not pickle or copy
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fit_lock = threading.Lock()

    # -- intents -----------------------------------------------------------------

    @property
    def intents(self) -> tuple[Intent, ...]:
        return tuple(self._intents.values())

    def add(
        self,
        name: str,
        utterances: Sequence[str] = (),
        *,
        keywords: Sequence[str] = (),
    ) -> Intent:
        """Register an intent; a duplicate name is a :class:`~ctxwise.errors.UsageError`."""
        intent = Intent.build(name, utterances, keywords)
        if intent.name in self._intents:
            raise UsageError(f"duplicate intent name {intent.name!r}")
        if intent.name == OUT_OF_SCOPE:
            raise UsageError(f"{OUT_OF_SCOPE!r} is reserved for out-of-scope examples")
        self._intents[intent.name] = intent
        self._fitted = False
        return intent

    def add_negatives(self, texts: Iterable[str]) -> None:
        """Out-of-scope examples; scorers that can learn from them do."""
        if isinstance(texts, str | bytes):
            raise UsageError("out-of-scope examples must be a list of strings, not a string")
        items = list(texts)
        for t in items:
            if not isinstance(t, str):
                raise UsageError(f"an out-of-scope example must be a string, got {t!r}")
        self._negatives.extend(t for t in items if t.strip())
        self._fitted = False

    @classmethod
    def from_labeled(
        cls, examples: Iterable[tuple[str, str]], scorer: Scorer | None = None, **kwargs: Any
    ) -> IntentRouter:
        """A router whose intents are the labels of ``(text, label)`` examples;
        ``"oos"`` examples become out-of-scope negatives."""
        router = cls(scorer, **kwargs)
        grouped: dict[str, list[str]] = {}
        negatives: list[str] = []
        for text, label in _pairs(examples):
            (negatives if label == OUT_OF_SCOPE else grouped.setdefault(label, [])).append(text)
        for label, texts in grouped.items():
            router.add(label, texts)
        router.add_negatives(negatives)
        return router

    def prepare(self) -> None:
        """Fit the scorer now (it is otherwise fitted on the first route)."""
        self._ensure_fitted()

    def _ensure_fitted(self) -> None:
        # one fit, however many threads route first: concurrent fits wasted the
        # time and, for the lexical scorer, left different models (liblinear's
        # random state is global) while other threads already routed on one
        if self._fitted or not self._intents:
            return
        with self._fit_lock:
            if not self._fitted and self._intents:
                self.scorer.fit(self.intents, self._negatives)
                self._fitted = True

    # -- routing -----------------------------------------------------------------

    def _check_query(self, query: str) -> None:
        if not isinstance(query, str):
            raise UsageError(f"a query must be a string, got {type(query).__name__}")
        if not query.strip():
            raise UsageError("empty query: there is nothing to route")
        if len(query) > self.max_query_chars:
            raise UsageError(
                f"query of {len(query):,} characters exceeds max_query_chars="
                f"{self.max_query_chars:,}; route a summary of it instead"
            )

    def route(self, query: str) -> RouteDecision:
        """Decide for one query."""
        return self.route_many([query])[0]

    def route_many(self, queries: Sequence[str]) -> list[RouteDecision]:
        for q in queries:
            self._check_query(q)
        cal = self.calibration
        if not self._intents:
            return [
                RouteDecision(
                    None, 0.0, None, 0.0, RouteReason.NO_INTENTS, {}, cal.threshold, cal.margin
                )
                for _ in queries
            ]
        self._ensure_fitted()
        labels = self.scorer.labels
        matrix = self._scores(list(queries))
        out = []
        for row in matrix:
            order = np.argsort(-row, kind="stable")
            top = labels[order[0]]
            score = float(row[order[0]])
            runner_up = labels[order[1]] if len(order) > 1 else None
            second = float(row[order[1]]) if len(order) > 1 else 0.0
            threshold = cal.threshold_for(top)
            scores = {labels[i]: float(row[i]) for i in range(len(labels))}
            second_passes = runner_up is not None and second >= cal.threshold_for(runner_up)
            # an exact tie is never broken by the order the intents were added in:
            # it refuses, as ambiguous when either of the two passes its threshold
            exact_tie = runner_up is not None and second == score
            if score < threshold and not (exact_tie and second_passes):
                reason, label = RouteReason.LOW_CONFIDENCE, None
            elif exact_tie or (second_passes and score - second < cal.margin):
                reason, label = RouteReason.AMBIGUOUS_TIE, None
            else:
                reason, label = RouteReason.MATCH, top
            out.append(
                RouteDecision(
                    label, score, runner_up, second, reason, scores, threshold, cal.margin, top
                )
            )
        return out

    def _scores(self, texts: list[str]) -> Any:
        """The scorer's matrix for ``texts``, checked: one finite score per query and
        intent. A NaN would pass no comparison, so a row of them routed as a match."""
        labels = self.scorer.labels
        matrix = np.asarray(self.scorer.scores(texts), dtype=np.float64)
        name = self.scorer.name
        if matrix.shape != (len(texts), len(labels)):
            raise UsageError(
                f"the {name} scorer returned scores of shape {matrix.shape} for "
                f"{len(texts)} queries and {len(labels)} intents"
            )
        bad = np.argwhere(~np.isfinite(matrix))
        if bad.size:
            row, col = (int(x) for x in bad[0])
            raise UsageError(
                f"the {name} scorer gave intent {labels[col]!r} the score "
                f"{matrix[row, col]} on query {row}; scores must be finite numbers"
            )
        return matrix

    # -- calibration -------------------------------------------------------------

    def fit(
        self,
        labeled: Iterable[tuple[str, str]],
        *,
        objective: Objective = DEFAULT_OBJECTIVE,
        oos_share: float = 0.25,
        per_intent: bool = True,
        min_gain: float = 0.005,
    ) -> FitReport:
        """Choose the threshold and margin on labeled ``(text, label)`` examples that
        include out-of-scope ones (label ``"oos"``); report the values and metrics.

        ``objective`` is what the search maximises: ``balanced`` (default), the
        harmonic mean of in-scope accuracy and OOS recall; ``accuracy``,
        ``(1 - oos_share) × in-scope accuracy + oos_share × OOS recall``; or
        ``macro_f1`` (see :data:`~ctxwise.routing.calibration.Objective`)."""
        examples = _pairs(labeled)
        if not self._intents:
            raise UsageError("add intents before fitting a threshold")
        texts = [t for t, _ in examples]
        gold = [g for _, g in examples]
        for t in texts:
            self._check_query(t)
        self._ensure_fitted()
        labels = self.scorer.labels
        matrix = self._scores(texts)
        before = self._metrics(matrix, gold, self.calibration)
        cal = calibrate(
            matrix,
            gold,
            labels,
            objective=objective,
            oos_share=oos_share,
            per_intent=per_intent,
            min_gain=min_gain,
        )
        self.calibration = cal
        return FitReport(cal, objective, before, self._metrics(matrix, gold, cal))

    def _metrics(self, matrix: Any, gold: Sequence[str], cal: Calibration) -> Any:
        labels = self.scorer.labels
        thresholds = np.array([cal.threshold_for(label) for label in labels])
        chosen = decide(matrix, thresholds, cal.margin)
        return routing_metrics(gold, [labels[c] if c >= 0 else None for c in chosen])

    # -- persistence -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The router as JSON-ready data, without the fitted scorer's arrays
        (``"state": null``): :meth:`from_dict` re-fits the scorer on first use.
        :meth:`save` writes the arrays too."""
        return {
            "format": ROUTER_FORMAT,
            "version": ROUTER_VERSION,
            "scorer": {"name": self.scorer.name, "params": self.scorer.params()},
            "state": None,
            "calibration": self.calibration.to_dict(),
            "max_query_chars": self.max_query_chars,
            "intents": [
                {"name": i.name, "utterances": list(i.utterances), "keywords": list(i.keywords)}
                for i in self.intents
            ],
            "negatives": list(self._negatives),
        }

    def save(self, path: str | Path) -> None:
        """Write the router: versioned JSON at ``path`` and, for a scorer with fitted
        parameters (a :class:`~ctxwise.routing.scorers.SavableScorer`, such as the
        lexical and embedding scorers), those parameters as numpy arrays in
        ``PATH.<hash>.npz`` (:func:`arrays_path`; ``np.savez``, no pickled objects). The
        JSON names the ``.npz`` and holds its SHA-256, so :meth:`load` refuses a
        mismatched pair. The scorer is fitted first if it was not.

        Both files are written atomically, the arrays first, under a name taken
        from their SHA-256 (:func:`arrays_path`), so they never replace the arrays
        the router already at ``path`` names; those are removed only once the new
        JSON is in place. A save that fails, or is killed, at any point leaves an
        earlier router at ``path`` loadable (a killed one may leave the new arrays
        file beside it, unused). Keep the two files together.

        Raises:
            OutputError: ``path`` is a directory, its folder does not exist, or the
                write failed.
            UsageError: ``path`` is ``-`` (standard output) and the router has arrays.
        """
        self._ensure_fitted()
        doc = self.to_dict()
        blob: bytes | None = None
        if self._fitted and isinstance(self.scorer, SavableScorer):
            meta, arrays = self.scorer.state()
            buf = io.BytesIO()
            np.savez(buf, allow_pickle=False, **cast("dict[str, Any]", arrays))
            blob = buf.getvalue()
            if str(path) == "-":
                raise UsageError(
                    "a router with a fitted scorer is saved as two files (JSON and .npz): "
                    "give a file path, not -"
                )
            digest = hashlib.sha256(blob).hexdigest()
            doc["state"] = {
                "file": arrays_path(path, digest).name,
                "sha256": digest,
                "labels": list(self.scorer.labels),
                "meta": meta,
            }
        try:
            data = json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: write them as JSON escapes
            data = json.dumps(doc, ensure_ascii=True, indent=1).encode("ascii")
        if blob is None:
            # a new file gets 0o666 less the umask; a symlink's target is replaced
            write_output(path, data)
            return
        target = Path(path)
        if target.is_dir():  # fail before the arrays are written
            raise OutputError(str(path), "is a directory")
        if target.exists() and not target.is_file():
            raise OutputError(
                str(path), "not a regular file (a router is saved as two files: JSON and .npz)"
            )
        sidecar = arrays_path(path, digest)
        kept = _same_bytes(sidecar, blob)  # saved before with these very arrays
        if not kept and (sidecar.exists() or sidecar.is_symlink()):
            raise OutputError(
                str(sidecar), "exists and is not these arrays; write the router elsewhere"
            )
        previous = _named_arrays(target)
        if not kept:
            write_output(sidecar, blob)
        try:
            write_output(path, data)
        except BaseException:
            if not kept:
                sidecar.unlink(missing_ok=True)
            raise
        if previous is not None and previous != sidecar:
            # the arrays the replaced JSON named: nothing names them now
            with contextlib.suppress(OSError):
                previous.unlink(missing_ok=True)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        source: str = "router",
        arrays: Mapping[str, Any] | None = None,
    ) -> IntentRouter:
        """A router from :meth:`to_dict` data. With ``arrays`` (the ``.npz`` that
        :meth:`save` wrote) a saved scorer state is restored without fitting;
        without them the scorer is re-fitted on first use.

        Raises:
            FormatError: ``data`` is not a ctxwise router, of an unknown version,
                or malformed (the detail names the field, e.g. ``intents[3].name``).
        """
        return cls._build(_parse(data, source), source, arrays)

    @classmethod
    def _build(
        cls,
        doc: RouterFile,
        source: str,
        arrays: Mapping[str, Any] | None,
        *,
        from_file: bool = False,
    ) -> IntentRouter:
        """The router ``doc`` describes. ``from_file``: a version 2 file of a
        scorer with saved parameters must carry them (``load`` never fits)."""

        def malformed(where: str, exc: Exception | str) -> FormatError:
            return FormatError(source, f"malformed router file: {where}: {exc}")

        cal = doc.calibration
        try:
            scorer = make_scorer(doc.scorer.name, doc.scorer.params)
        except UsageError as exc:
            raise malformed("scorer", exc) from None
        try:
            router = cls(
                scorer,
                threshold=cal.threshold,
                margin=cal.margin,
                max_query_chars=(
                    MAX_QUERY_CHARS if doc.max_query_chars is None else doc.max_query_chars
                ),
            )
        except UsageError as exc:
            raise malformed("calibration", exc) from None
        router.calibration = Calibration(cal.threshold, cal.margin, dict(cal.per_intent))
        for i, item in enumerate(doc.intents):
            try:
                router.add(item.name, item.utterances, keywords=item.keywords)
            except UsageError as exc:
                raise malformed(f"intents[{i}]", exc) from None
        names = {item.name for item in doc.intents}
        for label, value in cal.per_intent.items():
            where = f"calibration.per_intent.{label}"
            if label not in names:
                raise malformed(where, f"there is no intent {label!r}")
            if not math.isfinite(value):
                raise malformed(where, f"a threshold must be a finite number, got {value!r}")
        if (
            from_file
            and doc.version >= 2
            and doc.state is None
            and isinstance(scorer, SavableScorer)
        ):
            raise malformed(
                "state",
                f"null, but the {scorer.name} scorer's fitted parameters are saved with it "
                "(loading never fits; save the router again)",
            )
        router.add_negatives(doc.negatives)
        if doc.version >= 2 and doc.state is not None and arrays is not None:
            router._restore(doc.state, arrays, source)
        return router

    def _restore(self, state: StateItem, arrays: Mapping[str, Any], source: str) -> None:
        scorer = self.scorer
        if not isinstance(scorer, SavableScorer):
            raise FormatError(source, f"the {scorer.name} scorer has no saved state to restore")
        try:
            if state.labels != [i.name for i in self.intents]:
                raise ValueError("the saved scorer's intents differ from the router's")
            scorer.restore(state.labels, state.meta, arrays)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise FormatError(source, f"malformed scorer state: {exc}") from None
        self._fitted = True

    @classmethod
    def load(cls, path: str | Path) -> IntentRouter:
        """Read a router saved by :meth:`save`: the JSON and, when it names one, its
        ``.npz`` of fitted scorer parameters, from which the scorer is restored
        without fitting (fast, and without importing scikit-learn; the Benchmarks
        page, docs/benchmarks.md, gives the load time measured by
        ``benchmarks/bench_route_cli.py``). The arrays are read with ``allow_pickle=False``.

        A version 1 file (written before routers stored their parameters) loads
        too and re-fits its scorer on first use, deterministically (much slower
        than a load: a full fit); save it again to upgrade it. A version 2 file
        whose scorer saves its parameters (lexical, embedding, hybrid) must name
        them in ``state``: one with ``"state": null`` is refused, as loading
        never fits.

        Raises:
            FormatError: the file is missing, unreadable, not a ctxwise router, of
                an unknown version, or malformed; or its ``.npz`` is missing,
                unreadable, not the one saved with it, or inconsistent with it.
        """
        p = Path(path)
        raw = read_user_file(p, "a router file", FormatError)  # a FIFO or device: refused
        try:
            # a UTF-8 byte order mark (an editor's) is UTF-8 still, as in the JSONL readers
            data = parse_json(raw.removeprefix(codecs.BOM_UTF8).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise FormatError(
                str(p), f"not a router file (not UTF-8 text, byte {exc.start})"
            ) from None
        except (OSError, ValueError, RecursionError) as exc:
            raise FormatError(str(p), f"not a router file (not JSON: {exc})") from None
        doc = _parse(data, str(p))
        arrays = None
        if doc.state is not None and doc.version == ROUTER_VERSION:
            arrays = cls._read_arrays(p, doc.state)
        return cls._build(doc, str(p), arrays, from_file=True)

    @staticmethod
    def _read_arrays(path: Path, state: StateItem) -> dict[str, Any]:
        sidecar = Path(os.path.realpath(path)).with_name(state.file)
        try:
            blob = sidecar.read_bytes()
        except FileNotFoundError:
            raise FormatError(
                str(path), f"its arrays file {sidecar} is missing (keep the two together)"
            ) from None
        except OSError as exc:
            raise FormatError(str(sidecar), f"cannot read: {exc.strerror or exc}") from None
        if hashlib.sha256(blob).hexdigest() != state.sha256:
            raise FormatError(
                str(sidecar), f"not the arrays saved with {path.name} (SHA-256 differs)"
            )
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
                return {key: npz[key] for key in npz.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise FormatError(str(sidecar), f"cannot read the router's arrays: {exc}") from None


def _same_bytes(path: Path, blob: bytes) -> bool:
    """Whether ``path`` is a regular file holding exactly ``blob``."""
    try:
        return path.is_file() and not path.is_symlink() and path.read_bytes() == blob
    except OSError:
        return False


def _pairs(examples: object) -> list[tuple[str, str]]:
    """``examples`` as a list, each checked to be a ``(text, label)`` pair of strings."""
    if isinstance(examples, str | bytes) or not isinstance(examples, Iterable):
        raise UsageError("labeled examples must be (text, label) pairs, not a string")
    out = []
    for i, pair in enumerate(examples):
        if (
            not isinstance(pair, tuple | list)
            or len(pair) != 2
            or not all(isinstance(x, str) for x in pair)
        ):
            raise UsageError(f"labeled example {i} must be a (text, label) pair of strings")
        out.append((pair[0], pair[1]))
    return out


def _parse(data: object, source: str) -> RouterFile:
    """The router file's JSON part through :class:`RouterFile`; a :class:`FormatError`
    that says what is wrong: not a router at all, a version this ctxwise does not
    read, or the first malformed field by its path."""
    if not isinstance(data, Mapping) or data.get("format") != ROUTER_FORMAT:
        raise FormatError(source, f"not a ctxwise router file (expected format {ROUTER_FORMAT!r})")
    try:
        return RouterFile.model_validate(as_dict(data))
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            if err["loc"] == ("version",):
                raise FormatError(
                    source,
                    f"router file version {err['input']!r}; this ctxwise reads versions "
                    f"{', '.join(map(str, READS_VERSIONS))}",
                ) from None
        raise FormatError(source, f"malformed router file: {describe(exc)}") from None
