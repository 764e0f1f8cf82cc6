"""The analyzer's fast paths (long tool output) give exactly the terms of its full steps."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import snowballstemmer  # type: ignore[import-untyped, import-not-found, unused-ignore]
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.text import (
    _CJK_RUN,
    DEFAULT_ANALYZER,
    MAX_TERM_CHARS,
    _fold_table,
    _word_pattern,
    words,
)


def _reference(text: str) -> list[str]:
    """Steps 1-3 of ctxwise.text, every one of them on every text."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_fold_table())
    spaced = _CJK_RUN.sub(r" \1 ", folded.replace("_", " "))
    return [w[:MAX_TERM_CHARS] for w in _word_pattern().findall(spaced)]


def _tool_results(folder: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            content = (json.loads(line).get("message") or {}).get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    body = block.get("content")
                    if isinstance(body, list):
                        body = "\n".join(b.get("text", "") for b in body if isinstance(b, dict))
                    if isinstance(body, str) and body:
                        out.append(body)
    return out


@pytest.fixture(scope="module")
def tool_results(data_dir: Path) -> list[str]:
    folder = data_dir / "transcripts" / "claude_code"
    found = _tool_results(folder)
    if not found:
        pytest.skip(f"no Claude Code transcripts in {folder}")
    return found


def test_tool_output_gives_the_terms_of_the_full_steps(tool_results: list[str]) -> None:
    for text in tool_results:
        assert words(text) == _reference(text)


def test_the_stems_left_out_are_the_stemmers_own(tool_results: list[str]) -> None:
    """Snowball's English stemmer keeps a word of fewer than 3 characters, and one of
    ASCII digits, as it is: the analyzer does not ask it."""
    stemmer = snowballstemmer.stemmer("english")
    kept = {w for t in tool_results for w in words(t) if len(w) < 3 or w.isdigit()}
    kept |= {"a", "é", "ß", "ab", "0", "12", "007", "ys", "'s"}
    assert kept and all(stemmer.stemWord(w) == w for w in kept)
    assert all(DEFAULT_ANALYZER.words(w) == words(w) for w in sorted(kept) if w.isalnum())


PIECES = st.sampled_from(
    [
        "Straße",
        "café",
        "naïve",
        "东京タワー",
        "नमस्ते",
        "e\u0301",
        "─│└",
        "→ ✓ ❌ ●",
        "snake_case",
        "getHTTPResponse",
        "x" * 300,
        "ＡＢＣ",
        "²",
        "ﬁle",
        " ",
        "\n",
        "12 345",
        "Ωμέγα",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=12))
def test_any_text_gives_the_terms_of_the_full_steps(parts: list[str]) -> None:
    text = "".join(parts)
    assert words(text) == _reference(text)
