"""The extractor's fast paths find exactly what a plain regex scan finds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxwise.memory import _extract as facts

PIECES = [
    "2024-05-12",
    "1999-12-2024-05-01",
    "-05-",
    "12/05/2024",
    "2024/5/1",
    "/1/",
    "May",
    "May 3",
    "3 May",
    "3rd of June",
    "5  \n of   Jan 2024",
    "Sept. 9, 2023",
    "Dec",
    "Decimal",
    "of",
    "st",
    "born",
    "I'm",
    "I’m",
    "i am",
    "This is",
    "it's",
    "it is",
    "here it is",
    "that's",
    "user",
    "User ID",
    "user-name",
    "customer number",
    "my id",
    "your ID",
    "login",
    "member id",
    "profile id",
    "mia_li_3668",
    "john.smith",
    "884213",
    "İ",
    "ǅ",
    "K",
    "x",
    " ",
    "\n",
    ":",
    "-",
    "/",
    ".",
    ",",
    "7",
    "42",
]
texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join) | st.lists(
    st.sampled_from(PIECES), max_size=14
).map(" ".join)


def spans(matches: object) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in matches]  # type: ignore[attr-defined]


@given(texts)
def test_date_fast_path_equals_plain_scans(text: str) -> None:
    plain = [m for p in facts._DATES for m in p.finditer(text)]
    assert spans(facts._date_matches(text)) == spans(plain)


@given(texts)
def test_cue_fast_path_equals_plain_scans(text: str) -> None:
    low = text.lower()
    for pattern, fast in (
        (facts._USER_CUE, facts._USER_FAST),
        (facts._SELF_CUE, facts._SELF_FAST),
        (facts._ORDER_CUE, facts._ORDER_FAST),
    ):
        assert spans(facts._scan(pattern, fast, text, low)) == spans(pattern.finditer(text))
    hashes = facts._anchored(facts._ORDER_HASH, facts._HASH, text)
    assert spans(hashes) == spans(facts._ORDER_HASH.finditer(text))
