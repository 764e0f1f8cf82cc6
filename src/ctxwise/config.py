"""`EngineConfig`: everything an :class:`~ctxwise.Engine` is built from, as data.

Load it from a TOML file (``ctxwise.toml``) with :func:`load_config`, or build it
in code. Unknown keys are errors at every level, so a typo never passes
silently; relative paths in a file are relative to that file. Every key, with
its default::

    model = "claude-sonnet-5-5"   # the model named in each request
    render = "anthropic"          # anthropic | openai: the request format
    max_tokens = 1024             # the reply's max_tokens, written into each request
    budget = 100000               # tokens of each request (system, context, history)
    reserve = 0                   # of the budget, kept free (e.g. for framing the
                                  # counter does not see); requests fit budget - reserve
    counter = "auto"              # how tokens are counted: auto (the counter for model:
                                  # Claude -> the calibrated Anthropic counter, GPT/o-series
                                  # -> OpenAI's tokenizer and overheads, else char) | char
                                  # | word | tiktoken[:ENCODING] | anthropic[:chars|:o200k]
                                  # | openai:MODEL | auto:MODEL (see docs/tokens.md)
    safety_margin = "auto"        # plan each request to fit budget - reserve with this
                                  # share to spare for the counter's error: the request
                                  # holds at most (budget - reserve) / ((1 + margin) x
                                  # the session's correction factor) counted tokens;
                                  # auto: the counter's measured 95th-percentile error
                                  # against the model's provider (0 when not measured);
                                  # 0 to 4
    store = "sqlite:///ctxwise.db"  # sessions, traces and memory: memory, sqlite:///PATH
                                  # or postgresql://… (relative PATH: to the config file)
    system = ""                   # the system prompt
    system_file = ""              # or a file holding it (not both)
    context = "user"              # where routed and recalled sections go: "user" (a
                                  # context block in the latest user turn, so the history
                                  # prefix stays cacheable) or "system" (after the
                                  # stable system prefix)
    context_share = 0.25          # of the room the pinned parts leave, what routed and
                                  # recalled context may take before history is compacted
    order = "recall"              # given | recall: order of the context sections

    [router]                      # optional; without one every source is loaded
    file = "router.json"          # an IntentRouter file (ctxwise router build), or
    keywords = {label = ["word", …]}  # a keyword classifier, rules in this order
    default = ""                  # keywords only: the label when none matches

    [routes]                      # label = the sources it needs (a [sources] table,
    billing = ["billing_faq", "memory"]  # memory, or a source given to the Engine in code)

    fallback = ["billing_faq"]    # (top level) the sources used when the router refuses
                                  # or names a label with no route; leave it out for every
                                  # source (the default); [] loads none

    [sources.NAME]                # a static source; "memory" is built in (recall); not
                                  # system, rules, "case facts" or recalled (the Engine's own)
    text = "…"                    # or file = "PATH"
    priority = 50                 # higher wins when the budget is tight
    stable = false                # true: same every turn, goes in the cached prefix
    truncatable = true            # may be cut on a word boundary to fit
    pinned = false                # always kept whole

    [memory]
    recall = true                 # recall compacted turns by similarity ("memory" source)
    k = 5                         # items recalled per turn
    preset = "neutral"            # neutral | dialogue | dialogue-minilm: recall settings
                                  # (dialogue-minilm: only with [embedder] kind = "minilm")
    namespace = "ctxwise"         # first part of each session's memory namespace

    [embedder]                    # the one encoder: memory recall and tool search (see
                                  # docs/embedders.md); nothing here downloads a model
    kind = "hashing"              # hashing (offline, no model) | minilm (the packaged
                                  # all-MiniLM-L6-v2) | sentence-transformers | fastembed
                                  # | model2vec (a model folder: path) | endpoint (an
                                  # OpenAI-compatible /embeddings URL: base_url, model)
    dim = 0                       # vector width; 0: the encoder's own (hashing: 1024;
                                  # endpoint: learned from its first answer); a model of
                                  # another width is refused
    bigrams = true                # hashing: hash word pairs too
    path = ""                     # sentence-transformers, fastembed, model2vec: the model
                                  # folder (relative: to the config file)
    model = ""                    # fastembed: the model the folder holds (e.g.
                                  # BAAI/bge-small-en-v1.5); endpoint: the model name
                                  # (Azure: the deployment's)
    threads = 0                   # local encoders' CPU threads; 0: half the CPUs, 1 to 4
                                  # (every core of a small shared machine oversubscribes)
    batch_size = 64               # texts per encoder call, or per endpoint request
    base_url = ""                 # endpoint: the API root, e.g. https://api.openai.com/v1,
                                  # http://localhost:11434/v1 (Ollama); no default
    api_key_env = ""              # endpoint: the environment variable holding the key,
                                  # read when the Engine is built ("": send no key)
    api_key_header = "authorization"  # endpoint: authorization (Bearer) | api-key (Azure)
    api_version = ""              # endpoint: the api-version query parameter (Azure)
    request_dim = false           # endpoint: send dim as "dimensions" (models that
                                  # shorten their vectors)
    timeout = 30                  # endpoint: seconds per request
    retries = 2                   # endpoint: tries again after a 429, a 5xx or no answer
    cache = false                 # keep model vectors in a SQLite file between runs
                                  # (never for hashing)
    cache_path = ""               # that file ("": embeddings.sqlite in $CTXWISE_CACHE_DIR,
                                  # $XDG_CACHE_HOME/ctxwise or ~/.cache/ctxwise)

    [facts]
    extractor = "prose"           # prose | support | none: case facts from the messages
    rules = true                  # capture standing rules ("never call before 9am")

    [gates]
    file = ""                     # a policy gate file (PolicyGate.to_dict format)
    rules = []                    # or the same rules inline
    vocabulary = {}               # phrase = tool: a rule stated in a session ("do not
                                  # refund order 4417 until the address check is done")
                                  # becomes a gate rule of that session (compile_rule)
    id_fields = {}                # noun = tool input field holding its id (default
                                  # NOUN_id)

    [clearing]
    enabled = true
    mode = "local"                # local: clear here; server: send Anthropic's
                                  # clear_tool_uses edit as the request's
                                  # context_management (render = "anthropic" only;
                                  # TurnResult.headers holds the beta header)
    trigger = 0.7                 # clear old tool results when history passes this share
                                  # of its room
    keep_last = 3                 # tool uses that keep their results
    exclude_tools = []            # tools whose results are never cleared

    [compaction]
    enabled = true
    target = 0.5                  # compact history to this share of its room when it no
                                  # longer fits
    summary_tokens = 2000         # the summary's ceiling

    [tools]                       # a deferred tool catalog (ctxwise.tools.ToolCatalog)
    catalog = ""                  # its file: LiveMCPBench JSONL, an MCP tools/list JSON,
                                  # or an Anthropic or OpenAI tools array ("": no catalog,
                                  # unless one is given to the Engine)
    skip_invalid = false          # leave out definitions whose schema does not validate
    always = []                   # tools always sent (name or server/name)
    k = 5                         # tools found for the latest user message and sent
    mode = "client"               # client: ctxwise's tool_search tool; server:
                                  # Anthropic's tool search (render = "anthropic")
    server_search = "bm25"        # bm25 | regex: Anthropic's search tool (mode = "server")
    embedder = "none"             # none: the search ranks with [embedder] when that is a
                                  # model encoder, else with BM25 alone (hashing vectors
                                  # rank below it); or an embedder name (hashing[:DIM],
                                  # minilm, st:DIR, ...: the older spelling, for tool
                                  # search alone; refused beside a non-default [embedder])
    max_catalog_bytes = 67108864  # the largest catalog file read (64 MiB): a larger one
                                  # is refused before it is read (0: no limit)

    [costs]                       # what each turn costs, with the provider's prompt cache
    track = true                  # simulate the cache and price each request (trace.cache)
    min_cache_tokens = 1024       # the shortest prefix the provider caches (Anthropic:
                                  # 1,024 on most models, more on some Haiku models)
    gate = true                   # clear old tool results only when the tokens saved over
                                  # the horizon are worth the cache re-write the edit
                                  # causes (a history over its room is edited anyway)
    horizon = 0                   # turns expected to follow (0: as many as the session
                                  # has had, at least one)
    [costs.prices."MODEL"]        # a model's prices, US dollars per million tokens,
    input = 3.0                   # over ctxwise.pricing.DEFAULT_PRICES (a model with no
    output = 15.0                 # price has its cost reported as unknown, not zero)
    cache_write_5m = 3.75
    cache_write_1h = 6.0
    cache_read = 0.3
    long_prompt_tokens = 0        # a model priced by prompt length: over this many
    long_prompt_factor = 1.0      # input tokens every rate is this many times higher
                                  # (0: none)

    [tool_results]                # what Engine.tool_result does to a tool's result
    store_over = 0                # tokens: a larger list or text result is stored and
                                  # paged behind a cursor with a fetch_more tool (0: never)
    max_chars = 16777216          # the largest result Engine.tool_result accepts, in
                                  # characters (16 Mi): a larger one is refused (0: no
                                  # limit)
    page_size = 20                # items (or lines) per page
    ttl = 3600                    # seconds a cursor stays valid
    key_env = "CTXWISE_CURSOR_KEY"  # the environment variable holding the cursor key
                                  # (16+ bytes), needed when store_over > 0
    previous_key_envs = []        # environment variables each holding a key key_env
                                  # held before: cursors they signed still open (rotation)

    [tool_results.trim.TOOL]      # trim this tool's results (ctxwise.tools.trim)
    fields = []                   # fields kept (dotted paths); [] keeps every field
    max_items = 0                 # lists keep this many items (0: no cap)
    max_tokens = 0                # then cut to this many tokens (0: no cut)

    [memory_tool]                 # Anthropic's memory tool (render = "anthropic")
    enabled = false
    backend = "store"             # store: the Engine's store, one namespace per session;
                                  # directory: one folder on disk
    directory = "memories"        # backend = "directory": the folder (relative: to
                                  # the config file)
    max_file_bytes = 1048576      # the largest memory file, in UTF-8 bytes (1 MiB): a
                                  # command that would make one larger is refused
                                  # with an error result the model reads

Raises :class:`~ctxwise.errors.ConfigError` with the file and the key path.
"""

from __future__ import annotations

import contextvars
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ctxwise._io import read_text_file
from ctxwise.errors import ConfigError, UsageError
from ctxwise.pricing import Price
from ctxwise.tokens import TokenCounter

__all__ = [
    "ClearingConfig",
    "CompactionConfig",
    "CostsConfig",
    "EmbedderConfig",
    "EngineConfig",
    "FactsConfig",
    "GatesConfig",
    "MemoryConfig",
    "MemoryToolConfig",
    "RouterConfig",
    "SourceConfig",
    "ToolResultsConfig",
    "ToolsConfig",
    "TrimConfig",
    "config_from_dict",
    "load_config",
]

BUILTIN_SOURCES = ("memory",)
"""Source names the Engine provides itself."""

ENGINE_SECTIONS = ("system", "rules", "case facts", "recalled")
"""Names of the sections the Engine adds itself (the system prompt, the standing
rules, the case facts, recalled memory): a static source's section takes its
source's name, so no source may be named so."""


PRESET_EMBEDDERS = {"dialogue-minilm": "minilm"}
"""The recall presets fit to one embedder's vectors, by its name: the config's copy
of :data:`ctxwise.memory.longterm.PRESET_EMBEDDERS` (this module sits below
``memory``; a test keeps the two equal), as ``memory.preset`` copies the preset
names."""


_BUILDING: contextvars.ContextVar[bool] = contextvars.ContextVar("ctxwise_config", default=False)


class _Strict(BaseModel):
    # strict: no lax coercion ("100" is not 100, true is not 1, "off" is not false);
    # an int is still taken for a float key
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def __init__(self, **data: Any) -> None:
        # built in code, a bad value is a ConfigError naming the model and the key
        # path. pydantic calls this for a section inside an EngineConfig too: there
        # the ValidationError goes on up, so the path starts at the section
        # (clearing.trigger)
        outermost = _BUILDING.set(True) if not _BUILDING.get() else None
        try:
            super().__init__(**data)
        except ValidationError as e:
            if outermost is None:
                raise
            raise ConfigError(type(self).__name__, _where(e)) from None
        finally:
            if outermost is not None:
                _BUILDING.reset(outermost)


class RouterConfig(_Strict):
    file: str | None = None
    keywords: dict[str, list[str]] | None = None
    default: str | None = None

    @field_validator("keywords")
    @classmethod
    def _no_keywords(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        # {} is the documented default: no keyword router, so `file = "router.json"`
        # beside it (as docs/engine.md lists them) is a file router; it was refused
        # as giving both, and {} alone built a router that refused every query
        return value or None

    @field_validator("default")
    @classmethod
    def _no_default(cls, value: str | None) -> str | None:
        # "" is the documented default: no label (the router refuses, the fallback
        # is used); a keyword router given "" matched every query to label ''
        return None if value is not None and not value.strip() else value

    @model_validator(mode="after")
    def _one_kind(self) -> RouterConfig:
        if (self.file is None) == (self.keywords is None):
            raise ValueError("give exactly one of 'file' or 'keywords'")
        if self.default is not None and self.keywords is None:
            raise ValueError("'default' applies to keyword routers only")
        return self


class SourceConfig(_Strict):
    text: str | None = None
    file: str | None = None
    # finite: a NaN or infinite priority cannot be ranked (Section refuses it)
    priority: float = Field(default=50, allow_inf_nan=False)
    stable: bool = False
    truncatable: bool = True
    pinned: bool = False

    @model_validator(mode="after")
    def _one_content(self) -> SourceConfig:
        if (self.text is None) == (self.file is None):
            raise ValueError("give exactly one of 'text' or 'file'")
        return self


class MemoryConfig(_Strict):
    recall: bool = True
    k: int = Field(default=5, ge=1, le=100)
    preset: Literal["neutral", "dialogue", "dialogue-minilm"] = "neutral"
    namespace: str = Field(default="ctxwise", min_length=1, pattern=r"^[^/\x00]+$")


class FactsConfig(_Strict):
    extractor: Literal["prose", "support", "none"] = "prose"
    rules: bool = True


class GatesConfig(_Strict):
    file: str | None = None
    rules: list[dict[str, Any]] = Field(default_factory=list)
    vocabulary: dict[str, str] = Field(default_factory=dict)
    id_fields: dict[str, str] = Field(default_factory=dict)


class ClearingConfig(_Strict):
    enabled: bool = True
    mode: Literal["local", "server"] = "local"
    trigger: float = Field(default=0.7, gt=0, le=1)
    keep_last: int = Field(default=3, ge=0)
    exclude_tools: list[str] = Field(default_factory=list)


class CompactionConfig(_Strict):
    enabled: bool = True
    target: float = Field(default=0.5, gt=0, lt=1)
    summary_tokens: int = Field(default=2000, ge=50)


class ToolsConfig(_Strict):
    catalog: str = ""
    skip_invalid: bool = False
    always: list[str] = Field(default_factory=list)
    k: int = Field(default=5, ge=0, le=50)
    mode: Literal["client", "server"] = "client"
    server_search: Literal["bm25", "regex"] = "bm25"
    embedder: str = "none"
    max_catalog_bytes: int = Field(default=64 * 2**20, ge=0)

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        # checked here: it is built only with a catalog, so a typo passed silently
        if value != "none":
            from ctxwise.embeddings import parse_embedder

            try:
                parse_embedder(value)
            except UsageError as exc:
                raise ValueError(str(exc).replace("; choose ", "; choose none, ", 1)) from None
        return value


class EmbedderConfig(_Strict):
    """``[embedder]``: which encoder, and how it runs (the module docstring lists
    every key; :func:`ctxwise.embeddings.build_embedder` builds it)."""

    kind: Literal[
        "hashing", "minilm", "sentence-transformers", "fastembed", "model2vec", "endpoint"
    ] = "hashing"
    dim: int = Field(default=0, ge=0)
    bigrams: bool = True
    path: str = ""
    model: str = ""
    threads: int = Field(default=0, ge=0, le=1024)
    batch_size: int = Field(default=64, ge=1, le=65536)
    base_url: str = ""
    api_key_env: str = ""
    api_key_header: Literal["authorization", "api-key"] = "authorization"
    api_version: str = ""
    request_dim: bool = False
    timeout: float = Field(default=30, gt=0, le=3600, allow_inf_nan=False)
    retries: int = Field(default=2, ge=0, le=10)
    cache: bool = False
    cache_path: str = ""

    @model_validator(mode="after")
    def _buildable(self) -> EmbedderConfig:
        from ctxwise.embeddings._build import check_embedder

        try:
            check_embedder(self)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
        return self

    @classmethod
    def from_name(cls, name: str) -> EmbedderConfig:
        """The settings a short embedder name (``minilm``, ``st:DIR``, ...) stands for,
        as :func:`ctxwise.embeddings.parse_embedder` reads it (threads: auto)."""
        from dataclasses import asdict

        from ctxwise.embeddings import parse_embedder

        spec = asdict(parse_embedder(name))
        spec["threads"] = 0
        return cls(**spec)


class TrimConfig(_Strict):
    fields: list[str] = Field(default_factory=list)
    max_items: int = Field(default=0, ge=0)
    max_tokens: int = Field(default=0, ge=0)


class ToolResultsConfig(_Strict):
    store_over: int = Field(default=0, ge=0)
    max_chars: int = Field(default=16 * 2**20, ge=0)
    page_size: int = Field(default=20, ge=1)
    ttl: float = Field(default=3600, gt=0, allow_inf_nan=False)
    key_env: str = Field(default="CTXWISE_CURSOR_KEY", min_length=1)
    previous_key_envs: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    trim: dict[str, TrimConfig] = Field(default_factory=dict)


class CostsConfig(_Strict):
    track: bool = True
    min_cache_tokens: int = Field(default=1024, ge=0)
    gate: bool = True
    horizon: int = Field(default=0, ge=0, le=10_000)
    prices: dict[str, Price] = Field(default_factory=dict)


class MemoryToolConfig(_Strict):
    enabled: bool = False
    backend: Literal["store", "directory"] = "store"
    directory: str = "memories"
    max_file_bytes: int = Field(default=2**20, ge=1)


class EngineConfig(_Strict):
    """See the module docstring for every key and its default.

    Built in code (``EngineConfig(...)``, or a section such as
    ``ClearingConfig(...)``), a bad value is a :class:`ConfigError` naming the
    model and the key path, as from a file (:func:`config_from_dict` for parsed
    data).
    """

    model: str = Field(default="claude-sonnet-5-5", min_length=1)
    render: Literal["anthropic", "openai"] = "anthropic"
    max_tokens: int = Field(default=1024, ge=1)
    budget: int = Field(default=100_000, ge=1)
    reserve: int = Field(default=0, ge=0)
    counter: str = "auto"
    safety_margin: float | Literal["auto"] = Field(default="auto", union_mode="left_to_right")
    store: str = "sqlite:///ctxwise.db"
    system: str = ""
    system_file: str | None = None
    context: Literal["user", "system"] = "user"
    context_share: float = Field(default=0.25, ge=0, lt=1)
    order: Literal["given", "recall"] = "recall"
    router: RouterConfig | None = None
    routes: dict[str, list[str]] = Field(default_factory=dict)
    fallback: list[str] | None = None
    sources: dict[str, SourceConfig] = Field(default_factory=dict)
    memory: MemoryConfig = MemoryConfig()
    facts: FactsConfig = FactsConfig()
    gates: GatesConfig = GatesConfig()
    clearing: ClearingConfig = ClearingConfig()
    compaction: CompactionConfig = CompactionConfig()
    tools: ToolsConfig = ToolsConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    tool_results: ToolResultsConfig = ToolResultsConfig()
    memory_tool: MemoryToolConfig = MemoryToolConfig()
    costs: CostsConfig = CostsConfig()
    base_dir: str | None = Field(default=None, exclude=True)
    """Where relative paths resolve (the config file's folder); not a file key."""

    @model_validator(mode="after")
    def _consistent(self) -> EngineConfig:
        if not _encodable(self.store):
            raise ValueError(
                "store: holds a lone surrogate (half of a character), so it names no file "
                "or database; give memory, sqlite:///PATH or postgresql://…"
            )
        if self.reserve >= self.budget:
            raise ValueError(f"reserve ({self.reserve}) must be below budget ({self.budget})")
        if self.clearing.mode == "server" and self.render != "anthropic":
            raise ValueError("clearing.mode = 'server' needs render = 'anthropic'")
        if self.tools.mode == "server" and self.render != "anthropic":
            raise ValueError("tools.mode = 'server' needs render = 'anthropic'")
        if self.memory_tool.enabled and self.render != "anthropic":
            raise ValueError("memory_tool needs render = 'anthropic' (it is Anthropic's tool)")
        if self.system and self.system_file:
            raise ValueError("give 'system' or 'system_file', not both")
        for name in self.sources:
            if not name:
                raise ValueError("sources: a source needs a name ([sources.NAME])")
            if name in BUILTIN_SOURCES:
                raise ValueError(f"source name {name!r} is built in; choose another")
            if name in ENGINE_SECTIONS:
                raise ValueError(
                    f"source name {name!r} is the name of a section the Engine adds "
                    f"itself ({', '.join(ENGINE_SECTIONS)}); choose another"
                )
        # a name no [sources] table gives may be a source given to the Engine in
        # code: the Engine refuses an unknown one (see unknown_sources)
        for label, chosen in self.routes.items():
            if not chosen:
                raise ValueError(f"route {label!r} names no source")
            _once(f"route {label!r}", chosen)
        if self.router is not None and self.router.keywords is not None:
            check_route_labels(
                self.routes, [*self.router.keywords, *filter(None, [self.router.default])]
            )
        _once("fallback", self.fallback or [])
        if self.tools.embedder != "none" and self.embedder != EmbedderConfig():
            raise ValueError(
                f"tools.embedder = {self.tools.embedder!r} and [embedder] both name an"
                " embedder: give it once, in [embedder] (tools.embedder is its older"
                " spelling, for tool search alone)"
            )
        from ctxwise.embeddings import embedder_name

        wanted = PRESET_EMBEDDERS.get(self.memory.preset)
        used = embedder_name(self.embedder)
        if wanted is not None and used != wanted:
            raise ValueError(
                f"memory.preset: recall preset {self.memory.preset!r} was chosen for the"
                f" {wanted} embedder, not {used}: set [embedder] kind = {wanted!r}, or"
                " choose a preset for any embedder (dialogue, neutral)"
            )
        return self

    @field_validator("counter")
    @classmethod
    def _known_counter(cls, value: str) -> str:
        # the name only: building it (tiktoken's extra) is the Engine's
        from ctxwise.tokens import check_counter_name

        try:
            return check_counter_name(value)
        except UsageError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("safety_margin")
    @classmethod
    def _margin(cls, value: float | str) -> float | str:
        if isinstance(value, float | int) and not (0.0 <= value <= 4.0):
            raise ValueError(f"must be 'auto' or a number from 0 to 4, got {value!r}")
        return value

    def margin_for(self, counter: TokenCounter, *, calibrated: bool = False) -> float:
        """The safety margin the budget keeps with ``counter``: ``safety_margin``, or
        when it is ``"auto"`` the counter's measured 95th-percentile error against
        ``model``'s provider (:func:`ctxwise.tokens.default_safety_margin`), and once
        the session has ``calibrated`` on a response's usage, the measured
        95th-percentile error of the calibrated estimate when that is smaller
        (:func:`ctxwise.tokens.calibrated_margin`)."""
        if self.safety_margin == "auto":
            from ctxwise.tokens import calibrated_margin, default_safety_margin

            margin = default_safety_margin(counter, self.model)
            after = calibrated_margin(counter, self.model) if calibrated else None
            return margin if after is None else min(margin, after)
        return float(self.safety_margin)

    def tool_search_embedder(self) -> EmbedderConfig | None:
        """The embedder tool search ranks with (None: BM25 alone):
        ``tools.embedder`` when it names one (its older spelling), else
        ``[embedder]`` when it is a model encoder, else None: hashing vectors
        measured below BM25 alone on LiveMCPBench (docs/benchmarks.md)."""
        if self.tools.embedder != "none":
            return EmbedderConfig.from_name(self.tools.embedder)
        return None if self.embedder.kind == "hashing" else self.embedder

    def unknown_sources(self, known: set[str]) -> str | None:
        """What names a source not in ``known`` (the config's sources, the built-in
        ones and those given to the Engine in code), or None."""
        for label, chosen in self.routes.items():
            unknown = [n for n in chosen if n not in known]
            if unknown:
                return (
                    f"route {label!r} names unknown source(s) {', '.join(unknown)}; "
                    f"known: {', '.join(sorted(known))}"
                )
        unknown = [n for n in self.fallback or () if n not in known]
        if unknown:
            return (
                f"fallback names unknown source(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return None

    def path(self, value: str) -> Path:
        """``value`` resolved against the config file's folder."""
        p = Path(value)
        return p if p.is_absolute() or self.base_dir is None else Path(self.base_dir) / p

    def store_url(self) -> str:
        """``store`` with a relative SQLite path resolved against the config's folder."""
        scheme, sep, rest = self.store.partition("://")
        if scheme == "sqlite" and sep and rest.startswith("/") and not rest.startswith("//"):
            relative = rest[1:]
            if relative and relative != ":memory:" and self.base_dir is not None:
                return f"sqlite:///{self.path(relative)}"
        return self.store


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_route_labels(routes: dict[str, list[str]], labels: list[str]) -> None:
    """Refuse a route for a label the router never gives (a typo): it was never
    used, and the label it was meant for fell back instead."""
    stray = [label for label in routes if label not in labels]
    if stray:
        raise ValueError(
            f"routes: {', '.join(map(repr, stray))} is no label of the router "
            f"(its labels: {', '.join(labels)}); name a route after a label"
        )


def _once(what: str, names: list[str]) -> None:
    """Refuse a source named twice: the Engine would call it twice and refuse its
    second section as a name already used, on every turn."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"{what} names source(s) more than once: {', '.join(twice)}; list each once"
        )


def _where(error: ValidationError) -> str:
    """The first error as ``key.path: what is wrong`` (just the problem when it is
    about the keys together, e.g. ``reserve (…) must be below budget (…)``)."""
    first = error.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def config_from_dict(
    data: Any, *, source: str = "config", base_dir: str | None = None
) -> EngineConfig:
    """An :class:`EngineConfig` from parsed data; :class:`ConfigError` naming the key."""
    if not isinstance(data, dict):
        raise ConfigError(source, "a config is a table of keys")
    if "base_dir" in data:
        raise ConfigError(source, "base_dir: unknown key")
    try:
        return EngineConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as e:
        raise ConfigError(source, _where(e)) from None
    except ConfigError as e:  # from EngineConfig.__init__: name the source instead
        raise ConfigError(source, e.detail) from None


# a config is a few kilobytes: a larger file is a mistake (a log, a data file)
MAX_CONFIG_BYTES = 16 * 2**20


def load_config(path: str | Path) -> EngineConfig:
    """Read a ``ctxwise.toml``; :class:`ConfigError` for a missing file, bad TOML
    or a bad key (named with its path, e.g. ``clearing.trigger``), and for a path
    that is not a regular file (a FIFO, ``/dev/zero``, ``/dev/stdin``: refused
    before it is read) or holds more than ``MAX_CONFIG_BYTES`` (16 MiB)."""
    if not isinstance(path, str | Path):
        raise ConfigError(repr(path), "a config path is a str or a Path")
    p = Path(path)
    # as every file ctxwise reads: UTF-8 with or without a byte order mark (as
    # Windows editors save it), UTF-16 or UTF-32 when a mark says so
    text = read_text_file(p, "a TOML config", ConfigError, max_bytes=MAX_CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(p), f"bad TOML: {e}") from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise ConfigError(str(p), "bad TOML: nested too deeply") from None
    except ValueError as e:  # an integer of more digits than int() converts
        raise ConfigError(str(p), f"bad TOML: {e}") from None
    return config_from_dict(data, source=str(p), base_dir=str(p.parent.resolve()))
