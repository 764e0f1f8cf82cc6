"""The REST API over the Engine, versioned under ``/v1``, one tenant per key.

Every route runs on the Engines of the caller's tenant (:mod:`ctxwise.server.engines`),
so a session id names a session of that tenant alone: the same id under another
key is another tenant's session, or none. Routes:

- ``GET /v1/sessions``: the tenant's session ids;
- ``GET /v1/sessions/{id}``: its version, message and turn counts;
- ``GET /v1/sessions/{id}/messages``: the live history (what the next request renders);
- ``POST /v1/sessions/{id}/turns``: a turn (:meth:`ctxwise.Engine.turn`): what is new
  in, the request to send and its trace out;
- ``POST /v1/sessions/{id}/records``: append without building a request
  (:meth:`ctxwise.Engine.record`: the model's final answer);
- ``GET /v1/sessions/{id}/traces`` and ``…/traces/{turn}``: the turns' traces;
- ``GET /v1/sessions/{id}/ledger[?turn=N]``: a turn's ledger (:mod:`ctxwise.ledger`:
  every message's fate, reason, tokens and pointer, and the diff from the turn
  before); ``GET …/original?pointer=P``: what a pointer points at, or why it is gone;
  ``GET …/find?text=T[&turn=N]``: where a text is now;
- ``GET /v1/sessions/{id}/usage``: what the provider billed for each answer the
  session recorded (the usage the proxy's upstream sent back), priced at the
  answer's model, and the session's total;
- ``GET /v1/sessions/{id}/facts``, ``GET|POST /v1/sessions/{id}/rules``;
- ``POST /v1/sessions/{id}/handoff``: the verbatim context a subagent needs for a task;
- ``POST /v1/sessions/{id}/tools/check``: may this tool call run (the policy gates);
- ``POST /v1/memory/remember`` and ``POST /v1/memory/recall``: notes in long-term
  memory, shared by the tenant's sessions or kept to one.

Bodies and answers are pydantic models (the OpenAPI document at ``/openapi.json``
describes each); errors have one shape, ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from ctxwise.engine import Engine
from ctxwise.errors import UnknownTurnError, UsageError
from ctxwise.formats import neutral
from ctxwise.formats.usage import billed_split
from ctxwise.ledger import LedgerReader
from ctxwise.memory.facts import Rules
from ctxwise.memory.longterm import LongTermMemory
from ctxwise.memory.store import NamespaceNotFoundError, namespace_part
from ctxwise.messages import Message
from ctxwise.pricing import TokenSplit, cost_usd, price_for
from ctxwise.server.auth import tenant_of
from ctxwise.server.engines import EnginePool
from ctxwise.sessions import check_session_id

__all__ = ["router"]


Tenant = Annotated[str, Depends(tenant_of)]
SessionId = Annotated[
    str, Path(min_length=1, max_length=200, description="A session id of the key's tenant")
]
router = APIRouter(prefix="/v1", tags=["rest"])


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnBody(_Body):
    """What is new since the last turn, as :meth:`ctxwise.Engine.turn` takes it."""

    messages: list[dict[str, Any] | str] = Field(
        description="Messages in any provider's shape (Anthropic, OpenAI Chat or Responses "
        "items, ctxwise's neutral form), a provider response as it came back, tool results, "
        "or plain strings (user messages)."
    )
    system: str | None = Field(default=None, description="This call's system prompt.")
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="This call's tool definitions, counted in the budget."
    )
    expected_version: int | None = Field(
        default=None, ge=0, description="Fail with 409 unless the session is at this version."
    )


class TurnOut(BaseModel):
    version: int
    request: dict[str, Any] = Field(description="The provider request body to send.")
    headers: dict[str, str] = Field(description="HTTP headers the request needs.")
    trace: dict[str, Any]


class RecordBody(_Body):
    messages: list[dict[str, Any] | str]


class Version(BaseModel):
    version: int


class SessionList(BaseModel):
    sessions: list[str]


class SessionInfo(BaseModel):
    session_id: str
    version: int
    messages: int = Field(description="Messages in the live history.")
    turns: int


class MessagesOut(BaseModel):
    messages: list[dict[str, Any]] = Field(description="ctxwise's neutral JSON form.")


class TracesOut(BaseModel):
    traces: list[dict[str, Any]]


class BilledAnswer(BaseModel):
    position: int = Field(description="The answer's position in the session's log.")
    model: str | None
    uncached: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    output: int
    cost_usd: float | None = Field(description="None: no price known for the model.")


class UsageOut(BaseModel):
    """The provider's own usage, answer by answer: the ledger of what was billed."""

    answers: list[BilledAnswer]
    input: int = Field(description="Every input token billed, cached or not.")
    cache_read: int
    cache_write: int
    output: int
    cost_usd: float | None = Field(description="None when some answer's model has no price.")
    unpriced: int = Field(description="Answers whose model has no price.")
    without_usage: int = Field(description="Assistant messages that carried no usage.")


class FactsOut(BaseModel):
    session_id: str
    facts: Any


class RulesOut(BaseModel):
    session_id: str
    rules: Any
    added: list[str] = Field(default_factory=list)


class RuleBody(_Body):
    text: str = Field(min_length=1, max_length=10_000, description="A standing rule, stated.")


class HandoffBody(_Body):
    task: str = Field(min_length=1, max_length=100_000)
    budget: int = Field(default=4000, ge=1, le=10_000_000)


class HandoffOut(BaseModel):
    prompt: str
    report: dict[str, Any]


class ToolCheckBody(_Body):
    tool: str = Field(min_length=1, max_length=200)
    input: dict[str, Any] = Field(default_factory=dict)


class RememberBody(_Body):
    text: str = Field(min_length=1, max_length=1_000_000)
    session: str | None = Field(default=None, description="Keep it to this session.")
    metadata: dict[str, Any] = Field(default_factory=dict)


class RememberOut(BaseModel):
    id: str
    session: str | None


class RecallBody(_Body):
    query: str = Field(min_length=1, max_length=100_000)
    k: int = Field(default=5, ge=1, le=100)
    session: str | None = None


class RecallItem(BaseModel):
    id: str
    text: str
    score: float
    metadata: dict[str, Any]


class RecallOut(BaseModel):
    items: list[RecallItem]


def _pool(request: Request) -> EnginePool:
    pool: EnginePool = request.app.state.pool
    return pool


# ---------------------------------------------------------------------- sessions


@router.get("/sessions", response_model=SessionList, summary="The tenant's sessions")
async def list_sessions(request: Request, tenant: Tenant) -> SessionList:
    ids = await _pool(request).run(tenant, lambda e: e.sessions.sessions())
    return SessionList(sessions=ids)


@router.get("/sessions/{session_id}", response_model=SessionInfo, summary="One session")
async def get_session(request: Request, tenant: Tenant, session_id: SessionId) -> SessionInfo:
    def read(engine: Engine) -> SessionInfo:
        version = engine.sessions.require(check_session_id(session_id))
        return SessionInfo(
            session_id=session_id,
            version=version,
            messages=len(engine.session_messages(session_id)),
            turns=len(engine.sessions.traces(session_id)),
        )

    return await _pool(request).run(tenant, read)


@router.get(
    "/sessions/{session_id}/messages", response_model=MessagesOut, summary="The live history"
)
async def get_messages(request: Request, tenant: Tenant, session_id: SessionId) -> MessagesOut:
    messages = await _pool(request).run(tenant, lambda e: e.session_messages(session_id))
    return MessagesOut(messages=[neutral.encode_message(m) for m in messages])


@router.post("/sessions/{session_id}/turns", response_model=TurnOut, summary="Run a turn")
async def post_turn(
    request: Request, tenant: Tenant, session_id: SessionId, body: TurnBody
) -> TurnOut:
    def turn(engine: Engine) -> TurnOut:
        result = engine.turn(
            session_id,
            body.messages,
            expected_version=body.expected_version,
            system=body.system,
            tools=body.tools,
            warn_unanswered=False,
        )
        return TurnOut(
            version=result.version,
            request=result.request,
            headers=dict(result.headers),
            trace=result.trace.to_dict(),
        )

    return await _pool(request).run(tenant, turn)


@router.post(
    "/sessions/{session_id}/records", response_model=Version, summary="Append, build nothing"
)
async def post_record(
    request: Request, tenant: Tenant, session_id: SessionId, body: RecordBody
) -> Version:
    version = await _pool(request).run(tenant, lambda e: e.record(session_id, body.messages))
    return Version(version=version)


@router.get("/sessions/{session_id}/traces", response_model=TracesOut, summary="Every trace")
async def get_traces(request: Request, tenant: Tenant, session_id: SessionId) -> TracesOut:
    traces = await _pool(request).run(tenant, lambda e: e.traces(session_id))
    return TracesOut(traces=[t.to_dict() for t in traces])


@router.get("/sessions/{session_id}/traces/{turn}", summary="One turn's trace")
async def get_trace(
    request: Request, tenant: Tenant, session_id: SessionId, turn: int
) -> dict[str, Any]:
    traces = await _pool(request).run(tenant, lambda e: e.traces(session_id))
    for t in traces:
        if t.turn == turn:
            return t.to_dict()
    raise HTTPException(404, f"session {session_id!r} has no turn {turn}")


class OriginalOut(BaseModel):
    pointer: str
    text: str | None
    gone: str | None


class FindOut(BaseModel):
    turn: int
    hits: list[dict[str, Any]]


def _reader(engine: Engine, session_id: str) -> LedgerReader:
    return LedgerReader.for_engine(engine, check_session_id(session_id))


def _turn_of(reader: LedgerReader, turn: int | None) -> int:
    """``turn``, or the latest; a turn the session does not have is a 404."""
    try:
        return reader.trace(reader.turns if turn is None else turn).turn
    except UnknownTurnError as e:
        raise HTTPException(404, str(e)) from None


@router.get("/sessions/{session_id}/ledger", summary="One turn's ledger")
async def get_ledger(
    request: Request, tenant: Tenant, session_id: SessionId, turn: int | None = None
) -> dict[str, Any]:
    def read(engine: Engine) -> dict[str, Any]:
        reader = _reader(engine, session_id)
        try:
            return {"turns": reader.turns, **reader.ledger(_turn_of(reader, turn)).to_dict()}
        except UnknownTurnError as e:  # a turn whose trace holds no ledger
            raise HTTPException(404, str(e)) from None

    return await _pool(request).run(tenant, read)


@router.get("/sessions/{session_id}/original", response_model=OriginalOut, summary="Open a pointer")
async def get_original(
    request: Request, tenant: Tenant, session_id: SessionId, pointer: str
) -> OriginalOut:
    def read(engine: Engine) -> OriginalOut:
        found = _reader(engine, session_id).original(pointer)
        return OriginalOut(pointer=found.pointer, text=found.text, gone=found.gone)

    return await _pool(request).run(tenant, read)


@router.get("/sessions/{session_id}/find", response_model=FindOut, summary="Where is this now")
async def get_find(
    request: Request, tenant: Tenant, session_id: SessionId, text: str, turn: int | None = None
) -> FindOut:
    def read(engine: Engine) -> FindOut:
        reader = _reader(engine, session_id)
        at = _turn_of(reader, turn)
        try:
            hits = reader.find(text, at)
        except UnknownTurnError as e:
            raise HTTPException(404, str(e)) from None
        return FindOut(turn=at, hits=[h.to_dict() for h in hits])

    return await _pool(request).run(tenant, read)


def _usage(engine: Engine, session_id: str) -> UsageOut:
    engine.sessions.require(check_session_id(session_id))
    prices = engine.config.costs.prices
    answers: list[BilledAnswer] = []
    without = 0
    total = TokenSplit()
    money: float | None = 0.0
    for i, message in enumerate(neutral.decode_messages(engine.sessions.log(session_id))):
        if message.role != "assistant":
            continue
        usage = next((v for k, v in message.extra.items() if k.endswith(".usage")), None)
        split = billed_split(usage)
        if split is None:
            without += 1
            continue
        model = next((v for k, v in message.extra.items() if k.endswith(".model")), None)
        name = model if isinstance(model, str) else None
        usd = cost_usd(split, price_for(name, prices))
        money = None if usd is None or money is None else money + usd
        total = total + split
        answers.append(
            BilledAnswer(
                position=i,
                model=name,
                uncached=split.uncached,
                cache_read=split.cache_read,
                cache_write_5m=split.cache_write_5m,
                cache_write_1h=split.cache_write_1h,
                output=split.output,
                cost_usd=usd,
            )
        )
    return UsageOut(
        answers=answers,
        input=total.input,
        cache_read=total.cache_read,
        cache_write=total.cache_write_5m + total.cache_write_1h,
        output=total.output,
        cost_usd=money,
        unpriced=sum(a.cost_usd is None for a in answers),
        without_usage=without,
    )


@router.get("/sessions/{session_id}/usage", response_model=UsageOut, summary="What was billed")
async def get_usage(request: Request, tenant: Tenant, session_id: SessionId) -> UsageOut:
    return await _pool(request).run(tenant, lambda e: _usage(e, session_id))


@router.get("/sessions/{session_id}/facts", response_model=FactsOut, summary="Case facts")
async def get_facts(request: Request, tenant: Tenant, session_id: SessionId) -> FactsOut:
    facts = await _pool(request).run(tenant, lambda e: e.facts(session_id))
    return FactsOut(session_id=session_id, facts=facts.to_dict()["facts"])


@router.get("/sessions/{session_id}/rules", response_model=RulesOut, summary="Standing rules")
async def get_rules(request: Request, tenant: Tenant, session_id: SessionId) -> RulesOut:
    rules = await _pool(request).run(tenant, lambda e: e.rules(session_id))
    return RulesOut(session_id=session_id, rules=rules.to_dict()["rules"])


@router.post("/sessions/{session_id}/rules", response_model=RulesOut, summary="State a rule")
async def post_rule(
    request: Request, tenant: Tenant, session_id: SessionId, body: RuleBody
) -> RulesOut:
    found = Rules().capture(body.text)
    if not found:
        raise UsageError(
            f"{body.text[:80]!r} is not a standing rule ctxwise recognizes: state it as "
            "'always …', 'never …', 'do not …', 'from now on …' (nothing was recorded)"
        )

    def add(engine: Engine) -> Rules:
        engine.sessions.require(check_session_id(session_id))
        engine.record(session_id, [Message.text_message("user", body.text)])
        return engine.rules(session_id)

    rules = await _pool(request).run(tenant, add)
    return RulesOut(session_id=session_id, rules=rules.to_dict()["rules"], added=found)


@router.post(
    "/sessions/{session_id}/handoff", response_model=HandoffOut, summary="Subagent context"
)
async def post_handoff(
    request: Request, tenant: Tenant, session_id: SessionId, body: HandoffBody
) -> HandoffOut:
    handoff = await _pool(request).run(
        tenant, lambda e: e.handoff(session_id, body.task, body.budget)
    )
    return HandoffOut(prompt=handoff.render(), report=handoff.report())


@router.post("/sessions/{session_id}/tools/check", summary="May this tool call run")
async def post_tool_check(
    request: Request, tenant: Tenant, session_id: SessionId, body: ToolCheckBody
) -> dict[str, Any]:
    def check(engine: Engine) -> dict[str, Any]:
        decision = engine.check_tool(session_id, body.tool, body.input)
        out: dict[str, Any] = {"session_id": session_id, **decision.to_dict()}
        if not decision.allowed:
            out["rule_text"] = decision.rule.text
        return out

    return await _pool(request).run(tenant, check)


# ---------------------------------------------------------------------- memory


def _memory(engine: Engine, session: str | None) -> LongTermMemory:
    """The notes of the tenant (``session`` None) or of one of its sessions."""
    if engine.memory is None:  # pragma: no cover - a tenant's Engine always has one
        raise UsageError("this Engine has no memory store")
    scope = (
        ("shared",) if session is None else ("session", namespace_part(check_session_id(session)))
    )
    cfg = engine.config
    return LongTermMemory(
        engine.memory,
        (cfg.memory.namespace, "notes", *scope),
        engine.embedder,
        preset=cfg.memory.preset,
    )


@router.post("/memory/remember", response_model=RememberOut, summary="Keep a note")
async def post_remember(request: Request, tenant: Tenant, body: RememberBody) -> RememberOut:
    if not body.text.strip():
        raise UsageError("empty text: there is nothing to remember")
    item = await _pool(request).run(
        tenant, lambda e: _memory(e, body.session).remember(body.text, body.metadata)
    )
    return RememberOut(id=item, session=body.session)


@router.post("/memory/recall", response_model=RecallOut, summary="Recall notes")
async def post_recall(request: Request, tenant: Tenant, body: RecallBody) -> RecallOut:
    def recall(engine: Engine) -> RecallOut:
        try:
            hits = _memory(engine, body.session).recall(body.query, k=body.k)
        except NamespaceNotFoundError:
            hits = []
        return RecallOut(
            items=[
                RecallItem(
                    id=h.item.id,
                    text=h.item.text,
                    score=round(h.score, 6),
                    metadata=dict(h.item.metadata),
                )
                for h in hits
            ]
        )

    return await _pool(request).run(tenant, recall)
