"""The SQLite store's lexical postings, kept in memory per namespace.

FTS5's ``bm25()`` reads every instance of every query term in each row it scores:
a long question over many long items (a coding session's remembered turns) is
slow, and slower as the namespace grows. The same scores from postings arrays in
numpy cost a small fraction of that (``benchmarks/bench_engine.py``'s long
session), so a namespace the store searches again keeps its postings in memory,
as its vectors are (:mod:`ctxwise.memory._sqlite_vectors`):

- built from the ``terms`` column (each row's analyzer terms, what the FTS5 table
  indexes: its tokens are exactly these space-separated terms), in ``seq`` order,
  by at most :data:`WARM_CHARS` of terms per search, so no search pays for a whole
  namespace; until every row is in, a search reads FTS5;
- caught up with the file like the vector matrix: rows added since (``seq`` is never
  reused) are read, and a deletion (the trigger-kept item count says so) marks the
  rows that are gone; the store's own writes are added when they commit, on the
  writer's thread, so the next search finds them in;
- the first search of a namespace starts nothing: a process that searches once
  (a command-line call) pays no more than FTS5; a namespace the store writes while
  it is empty (a session's memory, from its first compaction) is in memory from
  that write on, with nothing to build;
- a store keeps the postings of the :data:`POSTINGS_KEPT` namespaces it searched
  most recently; searches with metadata filters read FTS5 (the filter is SQL).

:class:`PostingsRows` gives :func:`ctxwise.search.bounded_search` these postings
(a :class:`~ctxwise.search.LexicalRows`), so the plan, its caps and its scores
(:func:`~ctxwise.search.bm25_idf` and FTS5's formula, over the namespace's live
rows) are the FTS5 path's; only the arithmetic's last bits differ, which
:func:`~ctxwise.search.rank_key` rounds away as it does between stores.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxwise.search import Selection, rank_candidates, rank_key
from ctxwise.search.bm25 import BM25_B, BM25_K1, bm25_idf

WARM_CHARS = 500_000
"""Characters of ``terms`` one search reads into a namespace's postings while they
are built."""
POSTINGS_KEPT = 64
"""Namespaces whose postings one store keeps (the least recently searched go)."""
_FETCH = 32  # rows per fetch while building
_MERGE_RATIO = 2  # a segment is merged into the one before it once that is this small

Ints = npt.NDArray[np.int32]  # term ids, document numbers, counts
Offsets = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class _Segment:
    """Postings of a run of documents, grouped by term id: ``tids[starts[i]:starts[i+1]]``
    are ``uniq[i]``'s, their documents ascending."""

    uniq: Ints  # distinct term ids, ascending
    starts: Offsets  # len(uniq) + 1 offsets into docs / tfs
    docs: Ints
    tfs: Ints

    @property
    def size(self) -> int:
        return len(self.docs)

    def postings(self, tid: int) -> tuple[Ints, Ints] | None:
        i = int(np.searchsorted(self.uniq, tid))
        if i == len(self.uniq) or self.uniq[i] != tid:
            return None
        a, b = int(self.starts[i]), int(self.starts[i + 1])
        return self.docs[a:b], self.tfs[a:b]


def _segment(tids: Ints, docs: Ints, tfs: Ints) -> _Segment:
    """A segment of postings given in document order (a stable sort by term keeps
    each term's documents ascending)."""
    order = np.argsort(tids, kind="stable")
    tids, docs, tfs = tids[order], docs[order], tfs[order]
    uniq, first = np.unique(tids, return_index=True)
    starts = np.append(first, len(tids)).astype(np.int64)
    return _Segment(uniq.astype(np.int32), starts, docs.astype(np.int32), tfs.astype(np.int32))


def _merge(a: _Segment, b: _Segment) -> _Segment:
    """One segment of ``a``'s and then ``b``'s documents (``b``'s are the later)."""
    counts_a, counts_b = np.diff(a.starts), np.diff(b.starts)
    tids = np.concatenate([np.repeat(a.uniq, counts_a), np.repeat(b.uniq, counts_b)])
    return _segment(tids, np.concatenate([a.docs, b.docs]), np.concatenate([a.tfs, b.tfs]))


class Postings:
    """A namespace's postings in memory (module docstring); documents are numbered
    in ``seq`` order as they are read."""

    def __init__(self, *, ready: bool = False) -> None:
        self._reset()
        self.ready = ready  # True for a namespace known to be empty

    def _reset(self) -> None:
        self.version: int | None = None  # PRAGMA data_version it was checked at
        self.upto = 0  # rows with a seq below this have been read
        self.ready = False  # every row is in (as of ``version``)
        self.n = 0  # documents numbered so far
        self.seqs = np.zeros(0, dtype=np.int64)
        self.rowids = np.zeros(0, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.float64)
        self.live = np.zeros(0, dtype=bool)
        self.n_live = 0
        self.total = 0  # terms in the live documents
        self.dead = False  # some document has been deleted
        self.vocab: dict[str, int] = {}
        self.segments: list[_Segment] = []
        self._cache: dict[int, tuple[Ints, Ints]] = {}  # term id -> (docs, tfs)

    # building -------------------------------------------------------------------

    def advance(self, conn: sqlite3.Connection, key: str, budget: int | None) -> bool:
        """Read rows added since, up to ``budget`` characters of terms (None: all),
        and account for deleted rows; whether every row is now in. Runs inside the
        caller's transaction (one snapshot: counts and rows agree)."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if self.ready and self.version == version:
            return True
        found = conn.execute(
            "SELECT next_seq, n_items FROM counters WHERE ns = ?", (key,)
        ).fetchone()
        next_seq, n_items = (int(found[0]), int(found[1])) if found else (0, 0)
        if next_seq < self.upto:  # not the file these postings were read from
            self._reset()
        done = self._read(conn, key, next_seq, budget)
        if done and self.n_live != n_items:
            self._forget_deleted(conn, key)
        self.ready = done and self.n_live == n_items
        self.version = version
        return self.ready

    def _read(self, conn: sqlite3.Connection, key: str, next_seq: int, budget: int | None) -> bool:
        """Add rows from ``upto`` on; whether the last one was reached."""
        if self.upto >= next_seq:
            return True
        cur = conn.execute(
            "SELECT seq, rowid, terms FROM items WHERE ns = ? AND seq >= ? AND seq < ?"
            " ORDER BY seq",
            (key, self.upto, next_seq),
        )
        rows: list[tuple[int, int, str]] = []
        used = 0
        while budget is None or used < budget:
            part = cur.fetchmany(_FETCH)
            if not part:
                break
            rows.extend(part)
            used += sum(len(r[2]) for r in part)
        else:
            cur.close()
            self._add(rows)
            self.upto = int(rows[-1][0]) + 1
            return False
        self._add(rows)
        self.upto = next_seq
        return True

    def _add(self, rows: Sequence[tuple[int, int, str]]) -> None:
        """Number and index ``rows`` (seq, rowid, terms), in seq order."""
        if not rows:
            return
        first, vocab = self.n, self.vocab
        tids: list[int] = []
        docs: list[int] = []
        tfs: list[int] = []
        lengths: list[int] = []
        known = vocab.get
        for i, (_, _, terms) in enumerate(rows):
            words = terms.split(" ") if terms else []
            lengths.append(len(words))
            counts = Counter(words)
            ids = list(map(known, counts))
            if None in ids:
                for j, term in enumerate(counts):
                    if ids[j] is None:
                        ids[j] = vocab[term] = len(vocab)
            tids.extend(ids)  # type: ignore[arg-type]  # no None is left
            docs.extend([first + i] * len(counts))
            tfs.extend(counts.values())
        self._grow(first + len(rows))
        end = first + len(rows)
        self.seqs[first:end] = [r[0] for r in rows]
        self.rowids[first:end] = [r[1] for r in rows]
        self.lengths[first:end] = lengths
        self.live[first:end] = True
        self.n = end
        self.n_live += len(rows)
        self.total += sum(lengths)
        if tids:
            seg = _segment(
                np.asarray(tids, dtype=np.int32),
                np.asarray(docs, dtype=np.int32),
                np.asarray(tfs, dtype=np.int32),
            )
            for tid in seg.uniq.tolist():
                self._cache.pop(tid, None)
            self.segments.append(seg)
            while (
                len(self.segments) > 1
                and self.segments[-2].size <= _MERGE_RATIO * self.segments[-1].size
            ):
                last = self.segments.pop()
                self.segments[-1] = _merge(self.segments[-1], last)

    def _grow(self, need: int) -> None:
        if need <= len(self.seqs):
            return
        cap = max(need, 2 * len(self.seqs), 64)
        for name in ("seqs", "rowids", "lengths", "live"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def _forget_deleted(self, conn: sqlite3.Connection, key: str) -> None:
        """Mark the documents whose rows are gone."""
        present = np.fromiter(
            (r[0] for r in conn.execute("SELECT seq FROM items WHERE ns = ?", (key,))),
            dtype=np.int64,
        )
        live = self.live[: self.n] & np.isin(self.seqs[: self.n], present)
        if live.sum() != self.n_live:
            self.live[: self.n] = live
            self.n_live = int(live.sum())
            self.total = int(self.lengths[: self.n][live].sum())
            self.dead = True

    # reading ----------------------------------------------------------------------

    def postings(self, term: str) -> tuple[Ints, Ints]:
        """The live documents holding ``term`` (ascending) and its count in each."""
        tid = self.vocab.get(term)
        if tid is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
        found = self._cache.get(tid)
        if found is None:
            parts = [p for seg in self.segments if (p := seg.postings(tid)) is not None]
            docs = np.concatenate([d for d, _ in parts]) if parts else np.zeros(0, np.int32)
            tfs = np.concatenate([t for _, t in parts]) if parts else np.zeros(0, np.int32)
            found = self._cache[tid] = (docs, tfs)
        docs, tfs = found
        if self.dead:
            keep = self.live[docs]
            if not keep.all():
                return docs[keep], tfs[keep]
        return docs, tfs


class PostingsRows:
    """A namespace's :class:`Postings` as :func:`ctxwise.search.bounded_search`
    reads them (a :class:`~ctxwise.search.LexicalRows`; rows are rowids)."""

    def __init__(self, postings: Postings) -> None:
        self.p = postings

    def count(self, term: str, limit: int) -> int:
        return min(len(self.p.postings(term)[0]), limit)

    def share(self, term: str, window: int) -> float:
        p = self.p
        window = min(window, p.n_live)
        if window <= 0:
            return 0.0
        live = np.flatnonzero(p.live[: p.n]) if p.dead else np.arange(p.n)
        lo = int(live[len(live) - window])
        docs = p.postings(term)[0]
        return float(len(docs) - int(np.searchsorted(docs, lo))) / window

    def _selected(self, selection: Selection) -> npt.NDArray[np.bool_]:
        """Which documents ``selection`` holds, by document number."""
        n = self.p.n
        if selection.every:
            held = np.zeros(n, dtype=np.int32)
            for t in selection.terms:
                held[self.p.postings(t)[0]] += 1  # a document once per term
            chosen: npt.NDArray[np.bool_] = np.equal(held, len(selection.terms))
        else:
            chosen = np.zeros(n, dtype=bool)
            for t in selection.terms:
                chosen[self.p.postings(t)[0]] = True
        if selection.newest is not None:
            docs = np.flatnonzero(chosen)
            if len(docs) > selection.newest:
                chosen[docs[: len(docs) - selection.newest]] = False
        return chosen

    def score(
        self, selection: Selection, scored: Sequence[str], depth: int
    ) -> list[tuple[int, float]]:
        """Best ``depth`` (rowid, BM25 over ``scored``) of ``selection``: FTS5's
        formula with the namespace's statistics (its live rows, their mean length)."""
        p = self.p
        if not p.n_live:
            return []
        chosen = self._selected(selection)
        # every row holding a scored term is chosen: no row needs leaving out
        whole = not selection.every and selection.newest is None
        whole = whole and set(scored) <= set(selection.terms)
        mean = p.total / p.n_live
        avgdl = mean if mean > 0 else 1.0
        sums = np.zeros(p.n, dtype=np.float64)
        for term in scored:
            holders, counts = p.postings(term)
            if not len(holders):
                continue
            idf = bm25_idf(p.n_live, len(holders))
            if whole:
                docs, tf = holders, counts.astype(np.float64)
            else:
                inside = chosen[holders]
                docs, tf = holders[inside], counts[inside].astype(np.float64)
            norm = BM25_K1 * (1 - BM25_B + BM25_B * p.lengths[docs] / avgdl)
            sums[docs] += idf * tf * (BM25_K1 + 1) / (tf + norm)
        rows = np.flatnonzero(chosen)
        scores = sums[rows]
        best = rank_candidates(scores, depth)
        rowids = p.rowids[rows[best]].tolist()
        found = [(r, float(s)) for r, s in zip(rowids, scores[best].tolist(), strict=True)]
        return sorted(found, key=lambda x: rank_key(x[1], x[0]))[:depth]
