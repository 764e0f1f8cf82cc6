"""The provider's prompt cache, simulated over the requests a session sends.

A request is a sequence of blocks in the order the provider reads them: each tool
definition, each system block, then each message (:func:`request_blocks`; a cache
breakpoint inside a message is taken at the message's end, where ctxwise's renders
put it). Each block has its tokens and a digest chained over
every block before it, so two requests share a prefix exactly as far as their
chained digests agree.

:class:`PromptCache` charges one request after another the way the providers
document their caches:

- **Anthropic** (``cache_control`` breakpoints): a breakpoint writes the prefix
  that ends at it; a later request reads the longest prefix already written that
  ends at one of its block boundaries at most ``lookback`` (20) blocks before one of
  its own breakpoints. The tokens from there to the last breakpoint are written
  (at the breakpoint's lifetime, ``5m`` or ``1h``), the rest is uncached. A prefix
  shorter than ``min_tokens`` (1,024 on most models) is not cached.
- **OpenAI** (automatic): a request reads the prefix it shares with the previous
  one, in steps of 128 tokens from 1,024 on; nothing costs extra to write.

Every request is assumed to come within the cache's lifetime of the one before
(an agent's calls come seconds apart); an idle gap longer than the lifetime would
miss where this says it hits. :attr:`CacheCharge.first_change` names the block
where a request first differs from the previous one: where an edit broke the
cached prefix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxwise.errors import CtxwiseError, UsageError
from ctxwise.formats import anthropic, openai
from ctxwise.pricing import TokenSplit
from ctxwise.tokens import TokenCounter

__all__ = ["BlockMemo", "CacheCharge", "PrefixBlock", "PromptCache", "request_blocks"]

Provider = Literal["anthropic", "openai"]


@dataclass(frozen=True, slots=True)
class PrefixBlock:
    """One block of a request: ``where`` it is (``tools[3]``, ``system[0]``,
    ``messages[5]``), its tokens, the digest of the request up to and including it,
    and its cache breakpoint's lifetime (``None``: none)."""

    where: str
    tokens: int
    digest: bytes
    breakpoint: Literal["5m", "1h"] | None = None


def _parts(request: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for i, tool in enumerate(request.get("tools") or ()):
        yield f"tools[{i}]", tool
    system = request.get("system")
    if isinstance(system, str):
        yield "system[0]", system
    elif isinstance(system, Sequence):
        for i, block in enumerate(system):
            yield f"system[{i}]", block
    for i, message in enumerate(request.get("messages") or ()):
        yield f"messages[{i}]", message


def _breakpoint(value: Any) -> Literal["5m", "1h"] | None:
    """The lifetime of the last cache mark in ``value`` (a block, or a message's blocks)."""
    if not isinstance(value, dict):
        return None
    last = value.get("cache_control")
    content = value.get("content")
    if type(content) is list:
        for b in content:
            mark = b.get("cache_control") if type(b) is dict else None
            if mark is not None:
                last = mark
    if not isinstance(last, dict):
        return None
    return "1h" if last.get("ttl") == "1h" else "5m"


def _unmarked(value: Any) -> Any:
    """``value`` without its cache marks (a mark does not change what is read), a
    message's text content as its one text block (the same to the provider: a
    render writes it either way, as a mark needs a block)."""
    if not isinstance(value, Mapping):
        return value
    out = {k: v for k, v in value.items() if k != "cache_control"}
    content = out.get("content")
    if isinstance(content, str) and "role" in out:
        content = out["content"] = [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        out["content"] = [
            {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, Mapping) else b
            for b in content
        ]
    return out


_Found = tuple[bytes, int, Literal["5m", "1h"] | None]
"""A block's digest, tokens and cache mark."""


class BlockMemo:
    """Each block's digest and tokens, kept for the objects a request reuses.

    A session's request shares the message objects it encoded on earlier turns
    (:func:`ctxwise.formats.request.render_anthropic`), so a block seen before is
    found by identity, not serialized and counted again. Only the objects of the
    latest request are kept (held, so an identity is never reused), and that
    request's digests, to say where the next one first differs."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Any, _Found]] = {}
        self._joined: dict[tuple[int, ...], tuple[Any, _Found]] = {}
        self.previous: tuple[bytes, ...] = ()
        """The session's previous request's block digests, cut
        (:attr:`PromptCache.previous`): kept in memory, not in the session state."""
        self.chains: list[tuple[bytes, bytes]] = []
        """The previous request's blocks as (digest, chained digest): a request that
        repeats its prefix reuses the chain instead of hashing it again."""

    @staticmethod
    def _parts(value: Any) -> tuple[int, ...] | None:
        """A message rebuilt around the same blocks (a render joins the results of
        parallel calls into a new message each turn) is known by its blocks."""
        if type(value) is not dict or "role" not in value:
            return None
        content = value.get("content")
        if type(content) is not list or len(content) < 2:
            return None
        return (hash(value["role"]), *(id(b) for b in content))

    def block(self, value: Any, counter: TokenCounter, render: Provider) -> _Found:
        """``value``'s digest, tokens and cache mark (found again, or worked out)."""
        hit = self._seen.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        parts = self._parts(value)
        if parts is not None:
            joined = self._joined.get(parts)
            if joined is not None and joined[0]["content"] == value["content"]:
                return (*joined[1][:2], _breakpoint(value))
        bare = _unmarked(value)
        text = bare if isinstance(bare, str) else json.dumps(bare, ensure_ascii=False)
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        return digest, _tokens(bare, text, counter, render), _breakpoint(value)

    def keep(self, values: Sequence[Any], found: Sequence[_Found]) -> None:
        seen = self._seen
        joined = {}
        for v, f in zip(values, found, strict=True):
            hit = seen.get(id(v))
            if hit is not None and hit[0] is v:
                continue  # found by identity: never rebuilt, no key by its blocks needed
            parts = self._parts(v)
            if parts is not None:
                joined[parts] = (v, f)  # held: its blocks' identities stay theirs
        self._seen = {id(v): (v, f) for v, f in zip(values, found, strict=True)}
        self._joined = joined


def _tokens(value: Any, text: str, counter: TokenCounter, render: Provider) -> int:
    """A block's tokens as the budget counts them: a message as
    ``counter.count_messages`` counts it (its share of a request: the request's own
    overhead left out), a system text as its text, a tool definition as its JSON."""
    if isinstance(value, str):
        return counter.count(value)
    if isinstance(value, Mapping) and "role" in value:
        codec = anthropic if render == "anthropic" else openai
        try:
            decoded = codec.decode_messages([value]).messages
        except CtxwiseError:  # not a message the codec reads: counted as sent
            return counter.count(text)
        overhead = int(getattr(counter, "request_overhead", 0))
        return max(0, counter.count_messages(decoded) - overhead) if decoded else 0
    if isinstance(value, Mapping) and value.get("type") == "text":
        body = value.get("text")
        if isinstance(body, str):
            return counter.count(body)
    return counter.count(text)


def request_blocks(
    request: Mapping[str, Any],
    counter: TokenCounter,
    memo: BlockMemo | None = None,
    *,
    render: Provider = "anthropic",
) -> list[PrefixBlock]:
    """``request``'s blocks in the order the provider reads them: each tool
    definition, each system block, each message (see the module docstring), a
    ``render`` request (``anthropic`` or ``openai``). A block's tokens are counted
    as the budget counts them (:func:`_tokens`); its digest chains every block
    before it. ``memo`` skips the blocks the previous request of the same session
    already had (by identity)."""
    memo = memo if memo is not None else BlockMemo()
    values: list[Any] = []
    found: list[_Found] = []
    out: list[PrefixBlock] = []
    chain = b""
    chains = memo.chains
    same = True  # every block so far is the previous request's: its chain is too
    kept: list[tuple[bytes, bytes]] = []
    for i, (where, value) in enumerate(_parts(request)):
        got = memo.block(value, counter, render)
        digest, tokens, mark = got
        values.append(value)
        found.append(got)
        if same and i < len(chains) and chains[i][0] == digest:
            chain = chains[i][1]
        else:
            same = False
            chain = hashlib.blake2b(chain + digest, digest_size=16).digest()
        kept.append((digest, chain))
        out.append(PrefixBlock(where, tokens, chain, mark))
    memo.keep(values, found)
    memo.chains = kept
    return out


@dataclass(frozen=True, slots=True)
class CacheCharge:
    """What one request pays for: its token ``split``, how far it read the cache
    (``read_to``: blocks), and where it first differs from the previous request
    (``first_change``; ``None``: it only appended to it, or it is the first)."""

    split: TokenSplit
    read_to: int
    first_change: str | None
    blocks: int


class PromptCache:
    """The cache of one conversation, charged request by request (module docstring).

    Raises:
        UsageError: an unknown provider, or a negative setting.
    """

    def __init__(self, provider: Provider, *, min_tokens: int = 1024, lookback: int = 20) -> None:
        if provider not in ("anthropic", "openai"):
            raise UsageError(f"provider must be anthropic or openai, got {provider!r}")
        if min_tokens < 0 or lookback < 1:
            raise UsageError("min_tokens must be >= 0 and lookback >= 1")
        self.provider = provider
        self.min_tokens = min_tokens
        self.lookback = lookback
        self._written: dict[bytes, None] = {}  # the digests of prefixes written, oldest first
        self._previous: list[bytes] = []  # the previous request's chained digests, cut

    _KEEP = 4
    """Written prefixes remembered: as many as one request can set (four
    breakpoints), enough for the next request to find what the latest ones wrote,
    and a session's state stays one size however long it runs."""
    _CUT = 8
    """Bytes of each previous block's digest kept to find the first change."""

    def state(self) -> list[str]:
        """What :meth:`restore` takes back: the prefixes written (hex digests), the
        latest last; at most :attr:`_KEEP`, so a session's state row can hold them."""
        return [d.hex() for d in list(self._written)[-self._KEEP :]]

    @property
    def previous(self) -> tuple[bytes, ...]:
        """The previous request's block digests, cut (for :attr:`CacheCharge.first_change`)."""
        return tuple(self._previous)

    @classmethod
    def restore(
        cls,
        provider: Provider,
        written: Sequence[str] = (),
        previous: Sequence[bytes] = (),
        *,
        min_tokens: int = 1024,
        lookback: int = 20,
    ) -> PromptCache:
        """A cache as :meth:`state` and :attr:`previous` described it (a malformed
        entry is left out: the cache is an estimate, and a colder one only
        estimates higher). Without ``previous`` the first change is not found."""
        cache = cls(provider, min_tokens=min_tokens, lookback=lookback)
        for digest in written:
            try:
                cache._written[bytes.fromhex(digest)] = None
            except ValueError:
                continue
        cache._previous = list(previous)
        return cache

    def charge(self, blocks: Sequence[PrefixBlock], output_tokens: int = 0) -> CacheCharge:
        """Charge one request (its :func:`request_blocks`) and remember what it cached."""
        ends = [0]
        for b in blocks:
            ends.append(ends[-1] + b.tokens)
        total = ends[-1]
        shared = self._shared(blocks)
        changed = bool(self._previous) and shared < min(len(self._previous), len(blocks))
        first = blocks[shared].where if changed else None
        self._previous = [b.digest[: self._CUT] for b in blocks]
        if self.provider == "openai":
            return self._charge_openai(ends, total, shared, first, output_tokens)
        marks = [i for i, b in enumerate(blocks) if b.breakpoint is not None]
        read_to = 0
        for m in marks:
            for j in range(m, max(-1, m - self.lookback), -1):
                if blocks[j].digest in self._written and j + 1 > read_to:
                    read_to = j + 1
                    break
        write_5m = write_1h = 0
        done = read_to
        for m in marks:
            end = m + 1
            if ends[end] < self.min_tokens or end <= done:
                continue
            size = ends[end] - ends[done]
            if blocks[m].breakpoint == "1h":
                write_1h += size
            else:
                write_5m += size
            done = end
            self._remember(blocks[m].digest)
        for m in marks:  # a read refreshes every breakpoint up to it
            if m < read_to:
                self._remember(blocks[m].digest)
        uncached = total - ends[read_to] - write_5m - write_1h
        split = TokenSplit(uncached, ends[read_to], write_5m, write_1h, output_tokens)
        return CacheCharge(split, read_to, first, len(blocks))

    def _charge_openai(
        self,
        ends: list[int],
        total: int,
        shared: int,
        first: str | None,
        output_tokens: int,
    ) -> CacheCharge:
        """OpenAI reads the prefix shared with the previous request, counted in steps
        of 128 tokens from 1,024 on, and writes nothing at a premium."""
        tokens = ends[shared]
        hit = 0 if tokens < 1024 else 1024 + (tokens - 1024) // 128 * 128
        split = TokenSplit(total - hit, hit, 0, 0, output_tokens)
        return CacheCharge(split, shared, first, len(ends) - 1)

    def _remember(self, digest: bytes) -> None:
        self._written.pop(digest, None)
        self._written[digest] = None
        while len(self._written) > self._KEEP:
            del self._written[next(iter(self._written))]

    def _shared(self, blocks: Sequence[PrefixBlock]) -> int:
        """How many leading blocks ``blocks`` shares with the previous request."""
        before = self._previous
        n = 0
        for old, b in zip(before, blocks, strict=False):
            if old != b.digest[: self._CUT]:
                break
            n += 1
        return n
