"""The provider's prompt cache, simulated over a session's requests (Anthropic's
breakpoints and lookback, OpenAI's automatic prefix cache)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxwise.errors import UsageError
from ctxwise.prompt_cache import BlockMemo, PromptCache, request_blocks
from ctxwise.tokens import CharCounter

COUNTER = CharCounter()
MARK = {"type": "ephemeral"}


def text(n: int, tag: str) -> str:
    """About ``n`` tokens (four characters each, as CharCounter counts)."""
    return (tag[:3].ljust(3, "x") + " ") * n


def msg(role: str, body: str, mark: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": body}
    if mark is not None:
        block["cache_control"] = mark
    return {"role": role, "content": [block]}


def request(turns: list[str], *, system: str = "", mark: dict[str, Any] = MARK) -> dict[str, Any]:
    """Messages alternating user/assistant, the breakpoint on the last one."""
    out: dict[str, Any] = {"model": "m", "max_tokens": 10}
    if system:
        out["system"] = [{"type": "text", "text": system, "cache_control": dict(MARK)}]
    roles = ["user", "assistant"]
    out["messages"] = [
        msg(roles[i % 2], t, mark if i == len(turns) - 1 else None) for i, t in enumerate(turns)
    ]
    return out


def blocks_tokens(req: dict[str, Any]) -> int:
    return sum(b.tokens for b in request_blocks(req, COUNTER))


def test_an_appended_request_reads_what_the_previous_one_wrote() -> None:
    cache = PromptCache("anthropic")
    turns = [text(800, "a"), text(400, "b")]
    first = cache.charge(request_blocks(request(turns), COUNTER))
    assert first.split.cache_read == 0
    assert first.split.cache_write_5m == first.split.input  # all of it, up to the mark
    turns += [text(300, "c")]
    second = cache.charge(request_blocks(request(turns), COUNTER))
    assert second.split.cache_read == first.split.input
    assert second.split.cache_write_5m == second.split.input - first.split.input
    assert second.split.uncached == 0
    assert second.first_change is None  # only appended


def test_an_edit_in_the_middle_rewrites_from_the_edit_and_says_where() -> None:
    cache = PromptCache("anthropic")
    system = text(1500, "sys")
    turns = [text(600, "a"), text(600, "b"), text(600, "c")]
    cache.charge(request_blocks(request(turns, system=system), COUNTER))
    edited = [turns[0], "[cleared]", turns[2], text(100, "d")]
    charge = cache.charge(request_blocks(request(edited, system=system), COUNTER))
    blocks = request_blocks(request(edited, system=system), COUNTER)
    assert charge.first_change == "messages[1]"
    # the system part (its own breakpoint) is read; everything after it is written
    assert charge.split.cache_read == blocks[0].tokens
    assert charge.split.cache_write_5m == sum(b.tokens for b in blocks[1:])


def test_a_prefix_too_short_to_cache_is_neither_written_nor_read() -> None:
    cache = PromptCache("anthropic", min_tokens=1024)
    small = request([text(10, "a")])
    first = cache.charge(request_blocks(small, COUNTER))
    second = cache.charge(request_blocks(small, COUNTER))
    assert first.split.uncached == first.split.input
    assert second.split.cache_read == 0


def test_a_one_hour_breakpoint_writes_at_the_one_hour_rate() -> None:
    cache = PromptCache("anthropic")
    req = request([text(2000, "a")], mark={"type": "ephemeral", "ttl": "1h"})
    charge = cache.charge(request_blocks(req, COUNTER))
    assert charge.split.cache_write_1h == charge.split.input
    assert charge.split.cache_write_5m == 0


def test_a_breakpoint_further_than_the_lookback_from_the_cached_prefix_misses() -> None:
    turns = [text(300, f"t{i}") for i in range(30)]
    near = PromptCache("anthropic", lookback=20)
    near.charge(request_blocks(request(turns[:5]), COUNTER))
    # 25 blocks later: the written prefix (5 blocks) is out of the breakpoint's reach
    far = near.charge(request_blocks(request(turns), COUNTER))
    assert far.split.cache_read == 0
    close = PromptCache("anthropic", lookback=20)
    close.charge(request_blocks(request(turns[:15]), COUNTER))
    hit = close.charge(request_blocks(request(turns), COUNTER))
    assert hit.split.cache_read > 0


def test_the_state_round_trip_charges_alike() -> None:
    turns = [text(900, "a"), text(400, "b")]
    one = PromptCache("anthropic")
    one.charge(request_blocks(request(turns), COUNTER))
    two = PromptCache.restore("anthropic", one.state(), one.previous)
    nxt = request([*turns, text(200, "c")])
    assert two.charge(request_blocks(nxt, COUNTER)) == one.charge(request_blocks(nxt, COUNTER))
    # a damaged entry is left out: the cache is colder, never wrong in the other way
    cold = PromptCache.restore("anthropic", ["not hex", *one.state()])
    assert cold.state() == one.state()


def test_openai_reads_the_shared_prefix_in_steps_of_128_tokens_from_1024() -> None:
    cache = PromptCache("openai")
    turns = [text(3000, "a")]
    first = cache.charge(request_blocks(request(turns, mark={}), COUNTER))
    assert first.split.cache_read == 0
    second = cache.charge(request_blocks(request([*turns, text(50, "b")], mark={}), COUNTER))
    shared = first.split.input
    assert second.split.cache_read == 1024 + (shared - 1024) // 128 * 128
    assert second.split.cache_write_5m == second.split.cache_write_1h == 0


def test_a_marked_text_message_is_the_same_block_as_its_string_form() -> None:
    # a render writes a message as a string, or as one text block when it marks it
    plain = {"role": "user", "content": "hello there"}
    marked = {
        "role": "user",
        "content": [{"type": "text", "text": "hello there", "cache_control": MARK}],
    }
    a = request_blocks({"messages": [plain]}, COUNTER)
    b = request_blocks({"messages": [marked]}, COUNTER)
    assert a[0].digest == b[0].digest and a[0].tokens == b[0].tokens
    assert b[0].breakpoint == "5m" and a[0].breakpoint is None


def test_the_memo_finds_reused_blocks_by_identity_with_the_same_result() -> None:
    memo = BlockMemo()
    req = request([text(500, "a"), text(500, "b")])
    with_memo = request_blocks(req, COUNTER, memo)
    again = request_blocks(req, COUNTER, memo)
    assert with_memo == again == request_blocks(req, COUNTER)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(UsageError):
        PromptCache("gemini")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        PromptCache("anthropic", lookback=0)


def test_a_message_rebuilt_around_the_same_blocks_is_found_again() -> None:
    # a render joins the results of parallel calls into a new message each turn
    memo = BlockMemo()
    a = {"type": "tool_result", "tool_use_id": "t1", "content": "one"}
    b = {"type": "tool_result", "tool_use_id": "t2", "content": "two"}
    first = request_blocks({"messages": [{"role": "user", "content": [a, b]}]}, COUNTER, memo)
    again = request_blocks({"messages": [{"role": "user", "content": [a, b]}]}, COUNTER, memo)
    assert first == again
    c = {**b, "content": "changed"}
    other = request_blocks({"messages": [{"role": "user", "content": [a, c]}]}, COUNTER, memo)
    assert other[0].digest != first[0].digest
