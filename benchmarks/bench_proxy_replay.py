"""The three shared Claude Code sessions replayed through the proxy (issue 31): every
forwarded request checked, and the bill with the prompt cache simulated against
passing the same requests through unchanged.

**The client.** For each recorded API call (an assistant message of the transcript)
the client sends what Claude Code sent: the conversation of the call's compaction
segment up to that call, in full, as one ``POST /v1/messages`` with only the ctxwise
key, as docs/server.md sets Claude Code up: the session is derived from the
conversation's start, so after Claude Code's own compaction, whose history starts
again at its summary, the proxy serves a new session. The transcript
holds no system prompt and no tool definitions, so the requests carry none. Like
Claude Code, the client marks its latest message with a ``cache_control``
breakpoint (5-minute); the proxy takes the client's marks off and the Engine sets
its own.

**The upstream.** An ``httpx.MockTransport`` in the app (``create_app(transport=)``)
answers each forwarded request with the recorded assistant message of that call
(its content blocks, its id, its recorded ``output_tokens``), so the client's next
request holds exactly what the recording has. The usage's prompt side is what the
provider would count for the *forwarded* request: the recorded prompt of the call
holds Claude Code's system prompt and tool definitions, which these requests lack,
and an edited request is not the one the recording was billed for. So it is the
recorded prompt less the segment's fixed prefix (the segment's first recorded
prompt less ctxwise's count of that first request, as
``ctxwise.replay.calibration_rows`` takes it), scaled by the forwarded request's
count over the original's: the provider-to-counter ratio of the recording, applied
to what the proxy sent. Fed back raw, the prefix the requests do not carry would
teach the proxy's calibration a count it never sent.

**Checks**, on every request that reached the upstream: tool pairs whole
(``ctxwise.pairing.problems`` on the decoded request) and the request's tokens
(``counter_for_model(model)``: messages plus tool definitions) within the budget;
the max ratio to the budget is reported. Responses that failed open
(``x-ctxwise-fail-open``) or were not 200 are counted too. Invalid, over budget,
failed open and errors must all be 0.

**Cost.** One simulator (``ctxwise.prompt_cache``: ``request_blocks`` counted with
``counter_for_model(model)``, ``PromptCache("anthropic")``), one price
(``ctxwise.pricing.price_for``, the model most of the file's calls used), the
recorded output tokens of each call on both sides, each policy a
``ctxwise.replay.ReplayCost``:

- ``pass-through``: the client's requests unchanged, with the client's mark on the
  latest message (where Claude Code puts its moving breakpoint);
- ``ctxwise``: the forwarded requests, with the breakpoints the Engine set;
- ``ctxwise, client marks``: the forwarded requests with the Engine's marks taken
  off and the client's rule applied (one mark on the latest message), so both sides
  are simulated with the same breakpoint placement.

``recorded`` is what the file's own calls were billed
(``ctxwise.formats.usage.claude_code_billed``); it includes Claude Code's system
prompt and tool definitions, so it is reference, not the same requests.

Configurations: the long sessions at budgets 50,000 and 100,000 with the edit
gate on (the default) and off (``[costs] gate = false``), and at 200,000 (the
Claude models' context window: no recorded request passes it, so passing through
unchanged is always possible there; the Engine still compacts when the history
passes its own room, the budget less the context's share); the other Claude Code
files (subagents and fixtures) at 50,000 with the gate on, reported apart.
``named_session``: the first configuration again with one ``x-ctxwise-session``
header for the whole file (as the SDK example of docs/server.md names a
conversation), counting the requests the proxy refuses. ``--every N`` sends only
every ``N``-th call (the calls in between are still in the history of the next one
sent); by default every call is sent.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

import ctxwise
from _common import (
    CLAUDE_CODE_DIR,
    claude_code_files,
    long_sessions,
    print_table,
    say,
    write_results,
)
from ctxwise import EngineConfig
from ctxwise.formats import anthropic
from ctxwise.formats.usage import BilledCall, claude_code_billed, most_used_model
from ctxwise.messages import Message
from ctxwise.pairing import problems, repair_pairing
from ctxwise.pricing import Price, TokenSplit, cost_usd, price_for
from ctxwise.prompt_cache import BlockMemo, PromptCache, request_blocks
from ctxwise.replay import ReplayCost, TurnCost
from ctxwise.server.app import create_app
from ctxwise.server.keys import KeyStore
from ctxwise.server.settings import ServeSettings
from ctxwise.tokens import TokenCounter, counter_for_model

BUDGETS = (50_000, 100_000, 200_000)
SMALL_BUDGET = 50_000
MAX_TOKENS = 32_000
MARK = {"type": "ephemeral"}
SESSION = "claude-code-replay"


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded API call: the client's request (the segment's history up to the
    call, its latest message marked) and the recorded reply."""

    n: int
    request: dict[str, Any]
    reply: Message
    billed: BilledCall | None
    provider_ratio: float
    """The recording's provider count of the request's messages over ctxwise's count."""


@dataclass(slots=True)
class Session:
    path: Path
    model: str
    price: Price | None
    counter: TokenCounter
    calls: list[Call]
    billed: list[BilledCall]
    repaired: int


def mark_latest(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with a 5-minute mark on the latest message's last block (a copy of
    that message; the others shared), as Claude Code marks its requests."""
    if not messages:
        return messages
    last = dict(messages[-1])
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    for i in range(len(blocks) - 1, -1, -1):
        b = blocks[i]
        if b.get("type") in ("thinking", "redacted_thinking") or b.get("text") == "":
            continue
        blocks[i] = {**b, "cache_control": dict(MARK)}
        break
    last["content"] = blocks
    return [*messages[:-1], last]


def unmarked(value: Any) -> Any:
    """``value`` with every ``cache_control`` taken off (nested in lists and dicts)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def normal(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``messages`` unmarked, a text content as its one text block (the same to the
    provider): what tells an edited request from the client's."""
    out = []
    for m in unmarked(list(messages)):
        if isinstance(m.get("content"), str):
            m = {**m, "content": [{"type": "text", "text": m["content"]}]}
        out.append(m)
    return out


def client_marks(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with its marks replaced by the client's rule (the latest message only)."""
    out = {k: unmarked(v) for k, v in body.items()}
    out["messages"] = mark_latest(out["messages"])
    return out


def load(path: Path, every: int) -> Session:
    text = path.read_text(encoding="utf-8")
    billed, _ = claude_code_billed(text)
    model = most_used_model(billed, EngineConfig().model)
    counter = counter_for_model(model)
    by_id = {c.id: c for c in billed}
    t, fixed = repair_pairing(ctxwise.read_transcript(path))
    messages = t.messages
    starts = list(t.segment_starts())
    encoded = [anthropic.encode_message(m) if m.role != "system" else None for m in messages]
    calls: list[Call] = []
    prefix: dict[int, int] = {}
    ratio = 1.0
    k = 0
    for i, m in enumerate(messages):
        start = max(s for s in starts if s <= i)
        history = [x for x in encoded[start:i] if x is not None]
        if m.role != "assistant" or not history or history[0]["role"] != "user":
            continue
        size = counter.count_messages([x for x in messages[start:i] if x.role != "system"])
        call = by_id.get(m.id or "")
        if call is not None:
            prompt = call.split.input
            if start not in prefix:  # the segment's first call: its prompt less this request
                prefix[start] = max(0, prompt - size)
            ratio = max(prompt - prefix[start], 1) / max(size, 1)
        k += 1
        if (k - 1) % every:
            continue
        request = {"model": model, "max_tokens": MAX_TOKENS, "messages": mark_latest(history)}
        calls.append(Call(len(calls), request, m, call, ratio))
    return Session(path, model, price_for(model), counter, calls, billed, len(fixed))


@dataclass(slots=True)
class Run:
    """What one pass of a session through the proxy produced."""

    forwarded: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    fail_open: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    invalid: list[str] = field(default_factory=list)
    over: int = 0
    max_ratio: float = 0.0
    edited: int = 0
    seconds: float = 0.0


def counted(body: Mapping[str, Any], counter: TokenCounter) -> tuple[int, list[str]]:
    """The request's tokens (messages and tool definitions) and its pairing problems."""
    decoded = anthropic.decode_request(dict(body))
    found = [str(p) for p in problems(decoded.messages)]
    tokens = counter.count_messages(decoded.messages) + sum(
        counter.count(json.dumps(t, ensure_ascii=False)) for t in body.get("tools", [])
    )
    return tokens, found


def through_proxy(s: Session, budget: int, gate: bool, work: Path, *, named: bool = False) -> Run:
    """Every call of ``s`` sent through the proxy (module docstring); ``named``: with
    one ``x-ctxwise-session`` header for the whole file."""
    config = work / f"ctxwise-{budget}-{gate}.toml"
    config.write_text(
        f'model = "{s.model}"\nbudget = {budget}\n[costs]\ngate = {str(gate).lower()}\n'
    )
    store = f"sqlite:///{work}/proxy-{s.path.stem}-{budget}-{gate}-{named}.db"
    run = Run()
    current: list[Call] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        call = current[0]
        run.forwarded.append(body)
        tokens, found = counted(body, s.counter)
        if found:
            run.invalid.append(f"call {call.n}: {found[0]}")
        run.over += tokens > budget
        run.max_ratio = max(run.max_ratio, tokens / budget)
        reply = anthropic.encode_response(call.reply)
        output = call.billed.split.output if call.billed is not None else 1
        reply.update(
            model=s.model,
            stop_reason="tool_use"
            if any(b.get("type") == "tool_use" for b in reply["content"])
            else "end_turn",
            stop_sequence=None,
            usage={
                "input_tokens": round(call.provider_ratio * tokens),
                "output_tokens": output,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        )
        return httpx.Response(200, json=reply)

    settings = ServeSettings(store=store, config=config, anthropic_upstream="http://upstream.test")
    with KeyStore(store) as keys:
        _, key = keys.create("bench")
    app = create_app(settings, transport=httpx.MockTransport(upstream))
    headers = {"x-ctxwise-key": key, "x-api-key": "sk-fake"}
    if named:
        headers["x-ctxwise-session"] = SESSION
    start = time.perf_counter()
    with TestClient(app) as client:
        for call in s.calls:
            current[:] = [call]
            r = client.post("/v1/messages", json=call.request, headers=headers)
            run.statuses.append(r.status_code)
            if r.status_code != 200:
                run.refused.append(f"call {call.n}: {r.status_code} {r.text[:300]}")
            if "x-ctxwise-fail-open" in r.headers:
                run.fail_open.append(f"call {call.n}: {r.headers['x-ctxwise-fail-open']}")
            run.sessions.add(r.headers.get("x-ctxwise-session", ""))
            if call.n % 50 == 49:
                say(f"  {call.n + 1} calls, {time.perf_counter() - start:.0f}s")
    run.seconds = time.perf_counter() - start
    run.edited = sum(
        1
        for call, sent in zip(s.calls, run.forwarded, strict=False)
        if normal(sent["messages"]) != normal(call.request["messages"])
    )
    return run


def priced(s: Session, bodies: Sequence[Mapping[str, Any]]) -> ReplayCost:
    """``bodies`` (one per call, in order) charged against one simulated cache."""
    cache = PromptCache("anthropic")
    memo = BlockMemo()
    seen: dict[str, Any] = {}
    turns = []
    for call, body in zip(s.calls, bodies, strict=True):
        output = call.billed.split.output if call.billed is not None else 0
        # one object per distinct message, so the memo counts each message once
        shared = [seen.setdefault(json.dumps(m, sort_keys=True), m) for m in body["messages"]]
        blocks = request_blocks({**body, "messages": shared}, s.counter, memo)
        charge = cache.charge(blocks, output)
        rec = call.billed
        turns.append(
            TurnCost(
                call.n,
                charge.split,
                cost_usd(charge.split, s.price),
                charge.first_change,
                None,
                None if rec is None else rec.split,
                None if rec is None else cost_usd(rec.split, price_for(rec.model)),
            )
        )
    recorded_usd = 0.0
    unpriced = 0
    for c in s.billed:
        usd = cost_usd(c.split, price_for(c.model))
        unpriced += usd is None
        recorded_usd += usd or 0.0
    return ReplayCost(
        model=s.model,
        turns=tuple(turns),
        total=sum((t.split for t in turns), TokenSplit()),
        usd=None if s.price is None else sum(t.usd or 0.0 for t in turns),
        cache_breaks=sum(1 for t in turns if t.first_change is not None),
        recorded_total=sum((c.split for c in s.billed), TokenSplit()),
        recorded_usd=recorded_usd,
        recorded_calls=len(s.billed),
        recorded_unpriced=unpriced,
    )


def cost_row(cost: ReplayCost) -> dict[str, Any]:
    data = cost.to_dict()
    del data["turns"]
    t = cost.total
    data["input"] = t.input
    data["written"] = t.cache_write_5m + t.cache_write_1h
    return data


def measure(
    s: Session, budget: int, gate: bool, work: Path, passthrough: ReplayCost
) -> dict[str, Any]:
    run = through_proxy(s, budget, gate, work)
    if len(run.forwarded) != len(s.calls):
        raise SystemExit(
            f"{s.path.name}: {len(run.forwarded)} of {len(s.calls)} requests reached the "
            f"upstream (statuses {sorted(set(run.statuses))})"
        )
    ctx = priced(s, run.forwarded)
    marked = priced(s, [client_marks(b) for b in run.forwarded])
    base = passthrough.usd or 0.0
    return {
        "budget": budget,
        "gate": gate,
        "requests": len(run.forwarded),
        "errors": sum(1 for x in run.statuses if x != 200),
        "fail_open": len(run.fail_open),
        "invalid": len(run.invalid),
        "over_budget": run.over,
        "max_budget_ratio": round(run.max_ratio, 4),
        "edited_requests": run.edited,
        "sessions": len(run.sessions),
        "seconds": round(run.seconds, 1),
        "problems": (run.invalid + run.fail_open)[:5],
        "ctxwise": cost_row(ctx),
        "ctxwise_client_marks": cost_row(marked),
        "usd_ratio": None if not base or ctx.usd is None else round(ctx.usd / base, 4),
        "usd_ratio_client_marks": None
        if not base or marked.usd is None
        else round(marked.usd / base, 4),
    }


def session_result(s: Session, configs: Sequence[tuple[int, bool]], work: Path) -> dict[str, Any]:
    passthrough = priced(s, [c.request for c in s.calls])
    sizes = [counted(c.request, s.counter)[0] for c in s.calls]
    rows = []
    for budget, gate in configs:
        row = measure(s, budget, gate, work, passthrough)
        row["passthrough_over_budget"] = sum(1 for n in sizes if n > budget)
        rows.append(row)
        say(
            f"{s.path.name[:12]} {budget:,} gate={'on' if gate else 'off'}: "
            f"{row['requests']} requests in {row['seconds']}s, "
            f"${row['ctxwise']['usd']:.3f} vs pass-through ${passthrough.usd or 0:.3f}"
        )
    probe = through_proxy(s, configs[0][0], configs[0][1], work, named=True)
    return {
        "file": str(s.path.relative_to(CLAUDE_CODE_DIR)),
        "named_session": {
            "budget": configs[0][0],
            "requests": len(s.calls),
            "refused": len(probe.refused),
            "first_refused": probe.refused[:1],
        },
        "model": s.model,
        "calls": len(s.calls),
        "repaired": s.repaired,
        "passthrough": cost_row(passthrough),
        "passthrough_max_tokens": max(sizes, default=0),
        "recorded_usd": passthrough.recorded_usd,
        "recorded_calls": passthrough.recorded_calls,
        "runs": rows,
    }


def usd(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def table_rows(results: Sequence[dict[str, Any]]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for r in results:
        p = r["passthrough"]
        name = r["file"][:8] if "/" not in r["file"] else r["file"].rsplit("/", 1)[1][:16]
        out.append(
            [name, "pass-through", "", f"{p['input']:,}", f"{p['total']['cache_read']:,}",
             f"{p['written']:,}", f"{p['total']['uncached']:,}", usd(p["usd"]), "", "",
             usd(r["recorded_usd"]), "", "", "", f"max {r['passthrough_max_tokens']:,} tokens"]
        )  # fmt: skip
        for x in r["runs"]:
            c = x["ctxwise"]
            out.append(
                [name, f"ctxwise {x['budget'] // 1000}k", "on" if x["gate"] else "off",
                 f"{c['input']:,}", f"{c['total']['cache_read']:,}", f"{c['written']:,}",
                 f"{c['total']['uncached']:,}", usd(c["usd"]), f"{x['usd_ratio']:.3f}",
                 f"{x['usd_ratio_client_marks']:.3f}", "", f"{x['edited_requests']}",
                 f"{x['invalid']} / {x['over_budget']} / {x['fail_open'] + x['errors']}",
                 f"{x['max_budget_ratio']:.2f}",
                 f"{x['passthrough_over_budget']} of {x['requests']}"]
            )  # fmt: skip
    return out


COLUMNS = [
    "session", "policy", "gate", "input", "read", "written", "uncached", "$",
    "$ / pass", "$ / pass (client marks)", "recorded $", "edited", "invalid / over / failed",
    "max / budget", "pass-through over budget",
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=int, default=1, help="send every N-th call (default 1)")
    ap.add_argument("--long-only", action="store_true", help="skip the small Claude Code files")
    args = ap.parse_args()
    configs = [(b, g) for b in BUDGETS for g in (True, False)]
    long_paths = long_sessions()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        long = [session_result(load(p, args.every), configs, work) for p in long_paths]
        small = (
            []
            if args.long_only
            else [
                session_result(load(p, 1), [(SMALL_BUDGET, True)], work)
                for p in claude_code_files()
                if p not in long_paths
            ]
        )
    print_table(
        "the long Claude Code sessions through the proxy: pass-through vs ctxwise, cache simulated",
        COLUMNS,
        table_rows(long),
    )
    if small:
        print_table("the other Claude Code files at 50,000 tokens", COLUMNS, table_rows(small))
    every = [x for r in long + small for x in r["runs"]]
    write_results(
        "bench_proxy_replay",
        {
            "budgets": list(BUDGETS),
            "small_budget": SMALL_BUDGET,
            "every": args.every,
            "breakpoints": "pass-through: one 5-minute mark on the latest message's last block "
            "(Claude Code's moving breakpoint); ctxwise: the Engine's marks as forwarded; "
            "ctxwise_client_marks: the forwarded requests with the pass-through rule",
            "totals": {
                "requests": sum(x["requests"] for x in every),
                "invalid": sum(x["invalid"] for x in every),
                "over_budget": sum(x["over_budget"] for x in every),
                "fail_open": sum(x["fail_open"] for x in every),
                "errors": sum(x["errors"] for x in every),
                "costlier_than_passthrough": sum(
                    1 for x in every if x["usd_ratio"] is not None and x["usd_ratio"] > 1
                ),
                "runs": len(every),
            },
            "seconds": round(time.perf_counter() - start, 1),
            "long": long,
            "small": small,
        },
        packages=("fastapi", "httpx"),
    )


if __name__ == "__main__":
    main()
