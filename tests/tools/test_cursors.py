"""Load on demand (``ctxwise.tools.cursors``): pages behind signed, session-bound,
expiring cursors; every bad cursor is refused with the reason."""

from __future__ import annotations

import base64
import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwise.config import EngineConfig
from ctxwise.errors import BudgetError, ConfigError, CursorError, UsageError
from ctxwise.memory.sqlite import SQLiteStore
from ctxwise.memory.store import InMemoryStore, Store, namespace_part
from ctxwise.tools.cursors import (
    FETCH_MORE,
    Page,
    ResultStore,
    fetch_more_result,
    fetch_more_tool,
    paginate,
)

KEY = b"k" * 32


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return InMemoryStore()
    return SQLiteStore(tmp_path / "results.db")


def test_paginate_walks_every_page() -> None:
    items = list(range(7))
    seen: list[int] = []
    page = paginate(items, 3)
    while True:
        assert page.total == 7
        seen += page.items
        if page.next_cursor is None:
            break
        page = paginate(items, 3, page.next_cursor)
    assert seen == items
    assert paginate([], 3) == Page((), None, 0, 0)
    with pytest.raises(BudgetError):
        paginate(items, 0)
    with pytest.raises(UsageError):
        paginate(items, 3, "99")


def test_paginate_refuses_a_cursor_that_is_not_an_offset() -> None:
    # "²" and "٣" pass str.isdigit(); int("²") raised ValueError, a non-str AttributeError
    for bad in ("²", "٣", "-1", "1.0", "", 1, b"1"):
        with pytest.raises(UsageError, match="not an offset"):
            paginate([1, 2, 3], 1, bad)  # type: ignore[arg-type]
    assert paginate([1, 2, 3], 1, "2").items == (3,)


def test_put_refuses_what_is_not_a_list_of_json_values() -> None:
    import datetime

    results = ResultStore(KEY, clock=Clock())
    # a dict was paged by its keys (its values lost), a string by character
    for bad in ({"a": 1, "b": 2}, "abcdef", b"abc", 7):
        with pytest.raises(UsageError, match="list of JSON values"):
            results.put(bad, session_id="s1")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="JSON values"):
        results.put([datetime.date(2026, 1, 1)], session_id="s1")
    assert results.put((1, 2), session_id="s1")[1].items == (1, 2)


@given(st.lists(st.integers(), max_size=40), st.integers(1, 9))
def test_round_trip_through_all_pages(items: list[int], size: int) -> None:
    results = ResultStore(KEY, clock=Clock(), page_size=size)
    _, page = results.put(items, session_id="s1")
    seen = list(page.items)
    offsets = [page.offset]
    while page.next_cursor is not None:
        page = results.fetch(page.next_cursor, "s1")
        seen += page.items
        offsets.append(page.offset)
        assert page.total == len(items)
    assert seen == items
    assert offsets == list(range(0, max(len(items), 1), size))


def test_backed_by_a_memory_store(backend: Store) -> None:
    results = ResultStore(KEY, clock=Clock(), page_size=2, store=backend)
    result_id, page = results.put([{"a": 1}, {"b": 2.5}, "c"], session_id="s1")
    assert page.items == ({"a": 1}, {"b": 2.5})
    assert page.next_cursor is not None
    assert results.fetch(page.next_cursor, "s1").items == ("c",)
    assert backend.get(("ctxwise", "tool_results", "s1"), result_id) is not None
    backend.close()


def _second_page(results: ResultStore, session: str = "s1") -> str:
    _, page = results.put(list(range(10)), session_id=session, page_size=3)
    assert page.next_cursor is not None
    return page.next_cursor


def _reason(results: ResultStore, cursor: str, session: str = "s1") -> str:
    with pytest.raises(CursorError) as info:
        results.fetch(cursor, session)
    return info.value.reason


def test_forged_cursors_are_refused() -> None:
    results = ResultStore(KEY, clock=Clock())
    cursor = _second_page(results)
    other = ResultStore(b"o" * 32, clock=Clock())
    assert _reason(other, cursor) == "forged"  # another store's key
    for junk in ("", "x", "a.b.c", "!!!.???", cursor + "x"):
        assert _reason(results, junk) == "forged"
    # a made-up payload with no valid signature
    fake = base64.urlsafe_b64encode(b'{"e":9e9,"n":3,"o":0,"r":"r0","s":"s1"}').decode()
    assert _reason(results, fake.rstrip("=") + ".AAAA") == "forged"


def test_a_rotated_key_still_opens_the_cursors_it_signed() -> None:
    # a new key alone made every cursor a model held "forged" at once
    shared = InMemoryStore()
    old_key, new_key = b"o" * 32, b"n" * 32
    before = ResultStore(old_key, clock=Clock(), store=shared)
    cursor = _second_page(before)
    assert _reason(ResultStore(new_key, clock=Clock(), store=shared), cursor) == "forged"
    after = ResultStore(new_key, clock=Clock(), store=shared, previous_keys=[old_key])
    page = after.fetch(cursor, "s1")
    assert page.items == (3, 4, 5)
    assert page.next_cursor is not None
    # the next cursor is signed with the new key: the old key alone refuses it
    assert ResultStore(new_key, clock=Clock(), store=shared).fetch(page.next_cursor, "s1")
    assert _reason(before, page.next_cursor) == "forged"
    for bad in ([b"short"], b"o" * 32, ["o" * 32]):
        with pytest.raises(UsageError, match="previous_keys"):
            ResultStore(new_key, clock=Clock(), previous_keys=bad)  # type: ignore[arg-type]


def test_tampered_cursors_are_refused() -> None:
    results = ResultStore(KEY, clock=Clock())
    cursor = _second_page(results)
    body, _, signature = cursor.partition(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    for field, value in (("o", 0), ("s", "s2"), ("e", 9e18), ("n", 1000)):
        edited = dict(payload, **{field: value})
        raw = json.dumps(edited, separators=(",", ":"), sort_keys=True).encode()
        forged = base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + signature
        assert _reason(results, forged, str(edited["s"])) == "forged", field
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    assert _reason(results, f"{body}.{flipped}") == "forged"


def test_expired_cursors_are_refused() -> None:
    clock = Clock()
    results = ResultStore(KEY, clock=clock, ttl=60)
    cursor = _second_page(results)
    clock.now += 59
    assert results.fetch(cursor, "s1").offset == 3
    clock.now += 1
    assert _reason(results, cursor) == "expired"


def test_a_fetched_page_carries_a_fresh_expiry() -> None:
    clock = Clock()
    results = ResultStore(KEY, clock=clock, ttl=60)
    page = results.fetch(_second_page(results), "s1")
    clock.now += 100
    assert page.next_cursor is not None
    assert _reason(results, page.next_cursor) == "expired"


def test_other_sessions_cursors_are_refused() -> None:
    results = ResultStore(KEY, clock=Clock())
    cursor = _second_page(results, "s1")
    assert _reason(results, cursor, "s2") == "wrong_session"


def test_session_ids_are_escaped_into_one_namespace_part(backend: Store) -> None:
    # issue 33: a session id holding '/' was put raw into the namespace and refused;
    # it is escaped as every other store escapes it (namespace_part)
    results = ResultStore(KEY, clock=Clock(), store=backend, namespace=("t", "tool_results"))
    ids = {}
    for sid in ("a/b", "a%2Fb", "a%252Fb"):
        ids[sid], page = results.put(list(range(5)), session_id=sid, page_size=2)
        assert page.next_cursor is not None
        assert results.fetch(page.next_cursor, sid).items == (2, 3)
    assert backend.get(("t", "tool_results", namespace_part("a/b")), ids["a/b"]) is not None
    assert namespace_part("a/b") == "a%2Fb" and namespace_part("a%2Fb") == "a%252Fb"
    assert results.discard(ids["a/b"], session_id="a/b")
    assert not results.discard(ids["a%2Fb"], session_id="a/b")  # another session's
    assert results.discard(ids["a%2Fb"], session_id="a%2Fb")


def test_a_discarded_result_is_unknown() -> None:
    results = ResultStore(KEY, clock=Clock())
    result_id, page = results.put(list(range(5)), session_id="s1", page_size=2)
    assert results.discard(result_id, session_id="s1")
    assert page.next_cursor is not None
    assert _reason(results, page.next_cursor) == "unknown_result"


def test_cursors_are_deterministic_with_injected_key_and_clock() -> None:
    a = ResultStore(KEY, clock=Clock())
    b = ResultStore(KEY, clock=Clock())
    assert _second_page(a) == _second_page(b)
    ra = ResultStore.with_random_key(random.Random(7).randbytes, clock=Clock())
    rb = ResultStore.with_random_key(random.Random(7).randbytes, clock=Clock())
    assert _second_page(ra) == _second_page(rb)
    assert _second_page(ra) != _second_page(a)


def test_bad_store_arguments() -> None:
    with pytest.raises(UsageError):
        ResultStore(b"short", clock=Clock())
    with pytest.raises(UsageError):
        ResultStore(KEY, clock=Clock(), ttl=0)


def test_fetch_more_tool_definition() -> None:
    tool = fetch_more_tool()
    assert tool["name"] == FETCH_MORE and tool["description"]
    assert tool["input_schema"]["properties"]["cursor"]["type"] == "string"
    assert tool["input_schema"]["required"] == ["cursor"]
    assert fetch_more_tool("more_rows")["name"] == "more_rows"
    # the API refuses such a name, so the request built with it would fail
    for bad in ("fetch more", "fetch.more", "", "x" * 65, 5):
        with pytest.raises(UsageError, match="tool name"):
            fetch_more_tool(bad)  # type: ignore[arg-type]


def test_fetch_more_result_gives_a_page_or_an_error_the_model_can_act_on() -> None:
    clock = Clock()
    results = ResultStore(KEY, clock=clock, ttl=60)
    cursor = _second_page(results)
    ok = fetch_more_result(results, {"cursor": cursor}, session_id="s1", tool_use_id="t1")
    assert ok.is_error is False and ok.tool_use_id == "t1"
    assert isinstance(ok.content, str)
    body = json.loads(ok.content)
    assert body["items"] == [3, 4, 5] and body["showing"] == "items 4-6 of 10"
    assert body["next_cursor"] and FETCH_MORE in body["hint"]
    bad = fetch_more_result(results, {"cursor": "nope"}, session_id="s1", tool_use_id="t2")
    assert bad.is_error is True and "forged" in str(bad.content)
    clock.now += 3600
    late = fetch_more_result(results, {"cursor": cursor}, session_id="s1", tool_use_id="t3")
    assert late.is_error is True and "run the tool again" in str(late.content)
    missing = fetch_more_result(results, {}, session_id="s1", tool_use_id="t4")
    assert missing.is_error is True and "cursor" in str(missing.content)


@pytest.mark.parametrize("ttl", [math.inf, math.nan, 0, -1, "60", True])
def test_a_ttl_that_is_not_a_positive_finite_number_is_refused(ttl: object) -> None:
    # an infinite ttl was taken, and every cursor then carried Infinity: not JSON
    with pytest.raises(UsageError, match="ttl"):
        ResultStore(KEY, clock=Clock(), ttl=ttl)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ttl"):
        EngineConfig.model_validate({"tool_results": {"ttl": ttl}})
