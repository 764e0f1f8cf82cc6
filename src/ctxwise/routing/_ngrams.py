"""The lexical scorer's analyzers, written out so a saved router scores queries
without scikit-learn.

They reproduce ``TfidfVectorizer``'s defaults exactly (a test checks them against
scikit-learn's own analyzers on CLINC150 and on Unicode edge cases):

- :class:`WordNgrams` — lowercase, tokens ``(?u)\\b\\w+\\b``, then the n-grams of
  ``lo``..``hi`` consecutive tokens joined by one space;
- :class:`CharWbNgrams` — lowercase, split on whitespace, pad each word with one
  space on either side and take its character n-grams of ``lo``..``hi`` (a word
  shorter than ``n`` counts once, whole), as ``analyzer="char_wb"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["CharWbNgrams", "WordNgrams", "analyzer_from_spec"]

_TOKEN = re.compile(r"(?u)\b\w+\b")


@dataclass(frozen=True, slots=True)
class WordNgrams:
    lo: int = 1
    hi: int = 2

    def __call__(self, text: str) -> list[str]:
        tokens = _TOKEN.findall(text.lower())
        out = list(tokens) if self.lo == 1 else []
        for n in range(max(self.lo, 2), min(self.hi, len(tokens)) + 1):
            out.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        return out

    def spec(self) -> dict[str, Any]:
        return {"kind": "word", "lo": self.lo, "hi": self.hi}


@dataclass(frozen=True, slots=True)
class CharWbNgrams:
    lo: int = 2
    hi: int = 5

    def __call__(self, text: str) -> list[str]:
        out: list[str] = []
        for word in text.lower().split():
            w = f" {word} "
            for n in range(self.lo, self.hi + 1):
                if len(w) <= n:
                    out.append(w)  # a short word counts once, whole
                    break
                out.extend(w[i : i + n] for i in range(len(w) - n + 1))
        return out

    def spec(self) -> dict[str, Any]:
        return {"kind": "char_wb", "lo": self.lo, "hi": self.hi}


def analyzer_from_spec(spec: Any) -> WordNgrams | CharWbNgrams:
    """The analyzer a saved ``spec()`` describes; ``ValueError`` if it is not one."""
    if not isinstance(spec, dict):
        raise ValueError(f"analyzer spec must be an object, got {spec!r}")
    kind, lo, hi = spec.get("kind"), spec.get("lo"), spec.get("hi")
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= 10):
        raise ValueError(f"bad n-gram range in analyzer spec {spec!r}")
    if kind == "word":
        return WordNgrams(lo, hi)
    if kind == "char_wb":
        return CharWbNgrams(lo, hi)
    raise ValueError(f"unknown analyzer kind {kind!r}")
