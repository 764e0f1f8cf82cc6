from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise import (
    BudgetError,
    CharCounter,
    Message,
    MissingDependencyError,
    TiktokenCounter,
    TokenizerUnavailableError,
    ToolUseBlock,
    UsageError,
    WordCounter,
    get_counter,
    truncate_to_tokens,
)

MARKER = " […]"
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)
wordy = st.lists(
    st.text(alphabet="abcdefghij klmnop\n\t-.,", min_size=1, max_size=12), max_size=60
).map(" ".join)


class TestCharCounter:
    def test_empty_is_zero(self) -> None:
        assert CharCounter().count("") == 0

    @pytest.mark.parametrize(
        ("n", "expected"), [(1, 1), (4, 1), (5, 2), (8, 2), (9, 3), (400, 100)]
    )
    def test_ceil_len_over_four(self, n: int, expected: int) -> None:
        assert CharCounter().count("x" * n) == expected

    @given(texts, texts)
    def test_monotonic_in_appended_text(self, a: str, b: str) -> None:
        c = CharCounter()
        assert c.count(a) <= c.count(a + b)

    @given(texts, st.floats(min_value=0, max_value=1))
    def test_margin_never_counts_less(self, text: str, margin: float) -> None:
        assert CharCounter(margin).count(text) >= CharCounter().count(text)

    def test_margin_value(self) -> None:
        assert CharCounter(0.1).count("x" * 40) == 11

    @pytest.mark.parametrize("bad", [-0.1, float("nan"), 5.0])
    def test_bad_margin(self, bad: float) -> None:
        with pytest.raises(UsageError):
            CharCounter(bad)

    def test_count_messages_adds_overhead_per_message(self) -> None:
        c = CharCounter()
        msgs = [Message.text_message("user", "x" * 8), Message.text_message("assistant", "y" * 4)]
        assert c.count_messages(msgs) == 2 + 1 + 2 * 4
        assert c.count_messages([]) == 0

    def test_tool_use_counts_name_and_json_input(self) -> None:
        block = ToolUseBlock("t1", "search", {"q": "refund"})
        msg = Message("assistant", (block,))
        assert (
            CharCounter().count_messages([msg]) == CharCounter().count('search {"q":"refund"}') + 4
        )


class TestWordCounter:
    @pytest.mark.parametrize(
        ("text", "expected"), [("", 0), ("one", 1), ("a b", 3), ("a b c d e", 6)]
    )
    def test_words_times_1_3(self, text: str, expected: int) -> None:
        assert WordCounter().count(text) == expected

    @given(wordy, wordy)
    def test_monotonic(self, a: str, b: str) -> None:
        assert WordCounter().count(a) <= WordCounter().count(a + " " + b)


class TestTruncate:
    @given(wordy, st.integers(min_value=0, max_value=80))
    def test_fits_whole_words_and_marker_only_when_cut(self, text: str, limit: int) -> None:
        for counter in (CharCounter(), WordCounter()):
            out = truncate_to_tokens(text, limit, counter)
            assert counter.count(out) <= limit
            if counter.count(text) <= limit:
                assert out == text
                continue
            if out in ("", text.rstrip()):
                continue
            assert out.endswith(MARKER)
            kept = out[: -len(MARKER)]
            assert text.startswith(kept)
            # cut on a word boundary: the kept part ends a word, the next char is space
            assert kept and not kept[-1].isspace()
            assert text[len(kept)].isspace()

    def test_han_and_kana_are_cut_between_characters(self) -> None:
        """Written without spaces, a Japanese or Chinese text was one word: nothing
        fit, so a truncatable section in either was dropped whole."""
        text = "東京都に住んでいます。毎日電車で会社に行きます。"
        assert truncate_to_tokens(text, 3, CharCounter()) == "東京都に住んでい […]"
        assert truncate_to_tokens("abc東京def ghi", 2, CharCounter()) == "abc東 […]"
        # a voiced sound mark stays with its kana, combining or halfwidth
        assert truncate_to_tokens("か\u3099き\u3099く\u3099け\u3099" * 2, 2, CharCounter()) == (
            "か\u3099き\u3099 […]"
        )
        assert truncate_to_tokens("ｶﾞｷﾞｸﾞｹﾞｺﾞ", 2, CharCounter()) == "ｶﾞｷﾞ […]"
        # Latin runs stay whole words
        assert truncate_to_tokens("supercalifragilistic word", 2, CharCounter()) == ""

    @given(
        st.lists(
            st.sampled_from(
                [
                    "東",
                    "京",
                    "都",
                    "に",
                    "カ",
                    "ー",
                    "a",
                    "bc",
                    " ",
                    "\n",
                    "か\u3099",
                    "ｶﾞ",
                    "e\u0301",
                    "👨\u200d👩\u200d👧",
                    "葛\U000e0100",
                    "❤\ufe0f",
                    "🇯🇵",
                    "。",
                ]
            ),
            max_size=60,
        ).map("".join),
        st.integers(min_value=0, max_value=30),
    )
    def test_never_splits_a_character_with_its_marks(self, text: str, limit: int) -> None:
        regex = pytest.importorskip("regex")
        for counter in (CharCounter(), WordCounter()):
            out = truncate_to_tokens(text, limit, counter)
            assert counter.count(out) <= limit
            if out in ("", text, text.rstrip()):
                continue
            kept = out.removesuffix(MARKER)
            assert out.endswith(MARKER) and kept and text.startswith(kept)
            graphemes = regex.findall(r"\X", text)
            ends = {sum(map(len, graphemes[:i])) for i in range(len(graphemes) + 1)}
            assert len(kept) in ends, (text, kept)  # on a grapheme boundary
            # and on a word boundary: a space next, or a Han or kana edge
            nxt = text[len(kept)]
            cjk = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー]")
            assert nxt.isspace() or cjk.match(nxt) or cjk.match(regex.findall(r"\X", kept)[-1])

    def test_example(self) -> None:
        text = "The refund policy allows returns within 30 days of delivery."
        out = truncate_to_tokens(text, 8, CharCounter())
        assert out == "The refund policy allows […]"  # 28 chars = 7 tokens; one more word is 9

    def test_keeps_as_many_words_as_fit(self) -> None:
        text = " ".join(f"w{i}" for i in range(100))
        out = truncate_to_tokens(text, 20, CharCounter())
        words = out[: -len(MARKER)].split()
        longer = " ".join(text.split()[: len(words) + 1]) + MARKER
        assert CharCounter().count(longer) > 20

    def test_negative_limit(self) -> None:
        with pytest.raises(BudgetError):
            truncate_to_tokens("abc", -1, CharCounter())

    def test_trailing_whitespace_is_not_content(self) -> None:
        assert truncate_to_tokens("hello world" + " " * 100, 10, CharCounter()) == "hello world"
        assert (
            truncate_to_tokens("hello world again" + " " * 100, 4, CharCounter())
            == "hello world […]"
        )

    def test_lone_surrogate_counts(self) -> None:
        pytest.importorskip("quicktok")
        assert TiktokenCounter().count("emoji cut \ud83d here") > 0

    def test_nothing_fits(self) -> None:
        assert truncate_to_tokens("supercalifragilistic word", 2, CharCounter()) == ""


def test_get_counter() -> None:
    assert get_counter("char").name == "char"
    assert get_counter("word").name == "word"
    with pytest.raises(UsageError, match="unknown counter"):
        get_counter("bpe")


class TestTiktokenCounter:
    def test_quicktok_is_exact_and_offline(self) -> None:
        pytest.importorskip("quicktok")
        c = TiktokenCounter("o200k_base")
        assert c.backend == "quicktok"
        assert c.count("hello world") == 2
        assert c.count("") == 0
        assert TiktokenCounter("cl100k_base").count("hello world") == 2

    def test_unknown_encoding(self) -> None:
        with pytest.raises(UsageError, match="unknown encoding"):
            TiktokenCounter("p50k")

    def test_tiktoken_without_cached_file_says_how(self, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        pytest.importorskip("tiktoken")
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
        with pytest.raises(TokenizerUnavailableError, match="TIKTOKEN_CACHE_DIR") as info:
            TiktokenCounter("cl100k_base", backend="tiktoken")
        assert info.value.encoding == "cl100k_base"

    def test_tiktoken_with_provided_file_matches_quicktok(self, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        """A user who places the encoding file in TIKTOKEN_CACHE_DIR gets plain tiktoken,
        offline; built here from quicktok's vocabulary, whose hash tiktoken verifies."""
        pytest.importorskip("tiktoken")
        quicktok = pytest.importorskip("quicktok")
        enc = quicktok.get_encoding("cl100k_base")
        lines = []
        for i in range(enc.n_vocab):
            try:
                if enc.is_special_token(i):
                    continue
                token = enc.decode_single_token_bytes(i)
            except KeyError:  # ids between the ranks and the special tokens are unused
                continue
            lines.append(base64.b64encode(token) + b" " + str(i).encode())
        url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
        (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"\n".join(lines) + b"\n")
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
        slow = TiktokenCounter("cl100k_base", backend="tiktoken")
        fast = TiktokenCounter("cl100k_base", backend="quicktok")
        assert slow.backend == "tiktoken"
        for text in [
            "hello world",
            "def f(x):\n    return x ** 2",
            "Grüße aus Köln — 東京",
            "   ",
            "a" * 300,
        ]:
            assert slow.count(text) == fast.count(text)

    def test_cache_by_content(self) -> None:
        pytest.importorskip("quicktok")
        c = TiktokenCounter()
        c.count("same text")
        c.count("same text")
        assert c._cache.hits == 1


def test_missing_dependency_error_names_the_extra() -> None:
    err = MissingDependencyError("tiktoken", "tiktoken", "exact token counting")
    # ctxwise is not on PyPI: the command installs the clone's extra
    assert "pip install -e '.[tiktoken]'" in str(err)
    assert isinstance(err, ImportError)


def test_the_count_cache_is_safe_to_share_between_threads() -> None:
    # one thread evicting the key another has just looked up, before that one moves
    # it to the end, raised KeyError out of count() for a counter shared by threads
    import threading
    from collections import OrderedDict

    from ctxwise.tokens import _LRU

    lru = _LRU(1)
    lru.put(b"a", 1)
    evicted = threading.Event()

    class Racing(OrderedDict):  # type: ignore[type-arg]
        raced = False

        def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
            value = super().get(key, default)
            if not Racing.raced:
                Racing.raced = True
                other = threading.Thread(target=lambda: (lru.put(b"b", 2), evicted.set()))
                other.start()
                evicted.wait(0.5)  # with the lock held, the other thread cannot evict yet
            return value

    lru._data = Racing(lru._data)
    assert lru.get(b"a") == 1
    assert evicted.wait(5) and list(lru._data) == [b"b"]


def test_a_plain_text_document_is_counted_by_its_text() -> None:
    # Anthropic's text and content document sources are read as text: they were
    # counted as one image (media_tokens) whatever their length
    from ctxwise import Message, Transcript
    from ctxwise.composition import composition
    from ctxwise.messages import MediaBlock, ToolResultBlock

    counter = CharCounter()
    long = "The refund policy allows returns within 30 days. " * 400
    text_doc = MediaBlock(
        "document", {"type": "text", "media_type": "text/plain", "data": long}, {"title": "Policy"}
    )
    parts = {"type": "content", "content": [{"type": "text", "text": long}, {"type": "image"}]}
    content_doc = MediaBlock("document", parts)
    pdf = MediaBlock("document", {"type": "base64", "media_type": "application/pdf", "data": "x"})
    assert counter.media_cost(text_doc) == counter.count("Policy\n" + long)
    assert counter.media_cost(content_doc) == counter.count(long) + counter.media_tokens
    assert counter.media_cost(pdf) == counter.media_tokens
    messages = [
        Message("user", (text_doc,)),
        Message("user", (ToolResultBlock("t1", (content_doc,)),)),
    ]
    total = counter.count_messages(messages)
    assert total > 2 * counter.count(long)
    comp = composition(Transcript(tuple(messages)), counter)
    assert comp.total_tokens == total == sum(comp.by_kind.values())
    assert comp.by_kind["media"] == counter.media_cost(text_doc)
