"""The top level is deliberate: ``ctxwise.__all__`` is exactly what ``ctxwise`` exposes,
and every public name of every public submodule is either exported there or
listed below with the reason it stays in its module (after httpx's
``tests/test_exported_members.py``).
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import ctxwise
from ctxwise.errors import MissingDependencyError

# Names that stay in their submodule, grouped by why. An entry ``"ctxwise.a.X"``
# covers ``X`` in ``ctxwise.a`` and in every module below it that exports the same
# object (``ctxwise.memory.Extraction`` covers ``ctxwise.memory.facts.Extraction``);
# ``"ctxwise.a.*"`` covers every name in ``ctxwise.a.__all__``.
ALLOWLIST: dict[str, set[str]] = {
    "constants: tuning defaults and markers, reached as ctxwise.<module>.NAME": {
        "ctxwise.compaction.DEFAULT_NAMESPACE",
        "ctxwise.compaction.DEFAULT_SUMMARY_TOKENS",
        "ctxwise.compaction.DEFAULT_TRIGGER_TOKENS",
        "ctxwise.compaction.PINNED_HEADER",
        "ctxwise.compaction.SUMMARY_HEADER",
        "ctxwise.compaction.pinned.PINNED_KEY",
        "ctxwise.compaction.settings.DEFAULT_TAIL_SHARE",
        "ctxwise.compaction.settings.DEFAULT_USER_SHARE",
        "ctxwise.composition.KINDS",
        "ctxwise.costs.ANTHROPIC_CACHE_READ_FACTOR",
        "ctxwise.costs.ANTHROPIC_CACHE_WRITE_FACTOR",
        "ctxwise.editing.CLEAR_THINKING",
        "ctxwise.editing.CLEAR_TOOL_USES",
        "ctxwise.editing.CONTEXT_MANAGEMENT_BETA",
        "ctxwise.editing.DEFAULT_PLACEHOLDER",
        "ctxwise.editing.MISSING_RESULT_TEXT",
        "ctxwise.formats.FORMATS",
        "ctxwise.formats.MAX_ID_CHARS",
        "ctxwise.formats.MAX_TRANSCRIPT_BYTES",
        "ctxwise.formats.SHAPES",
        "ctxwise.memory.PRESETS",
        "ctxwise.memory.facts.DEFAULT_KINDS",
        "ctxwise.memory.facts.KINDS",
        "ctxwise.memory.facts.LIST_KEYS",
        "ctxwise.memory.facts.MAX_TEXT_CHARS",
        "ctxwise.memory.facts.PRESETS",
        "ctxwise.memory.longterm.PRESET_EMBEDDERS",
        "ctxwise.memory.longterm.RRF_K",
        "ctxwise.memory.longterm.STOPWORDS",
        "ctxwise.memory.postgres.MIGRATIONS",
        "ctxwise.memory.sqlite.ANN_MIN_ITEMS",
        "ctxwise.memory.sqlite.LEXICAL_CAP",
        "ctxwise.memory.sqlite.SCHEMA_VERSION",
        "ctxwise.memory.store.BM25_B",
        "ctxwise.memory.store.BM25_K1",
        "ctxwise.memory.store.MAX_TEXT_CHARS",
        "ctxwise.memory.store.SCORE_DIGITS",
        "ctxwise.pairing.MISSING_RESULT_TEXT",
        "ctxwise.routing.OUT_OF_SCOPE",
        "ctxwise.routing.SCORERS",
        "ctxwise.routing.calibration.DEFAULT_OBJECTIVE",
        "ctxwise.routing.calibration.OBJECTIVES",
        "ctxwise.routing.evaluation.HOLDOUT_EVERY",
        "ctxwise.routing.router.ROUTER_FORMAT",
        "ctxwise.routing.router.ROUTER_VERSION",
        "ctxwise.summarize.CUT_LEFT",
        "ctxwise.summarize.CUT_RIGHT",
        "ctxwise.summarize.DEFAULT_INSTRUCTIONS",
    },
    "type aliases for annotations, reached as ctxwise.<module>.Name": {
        "ctxwise.formats.FormatName",
        "ctxwise.formats.Shape",
        "ctxwise.memory.Namespace",
        "ctxwise.memory.RecallMode",
        "ctxwise.messages.MessageKind",
        "ctxwise.messages.Placement",
        "ctxwise.messages.Role",
        "ctxwise.retention.SpecificKind",
    },
    "codecs and readers per format: reached as ctxwise.formats.<format>.X": {
        "ctxwise.formats.anthropic.*",
        "ctxwise.formats.claude_code.*",
        "ctxwise.formats.inputs.*",
        "ctxwise.formats.openai.*",
        "ctxwise.formats.responses.*",
    },
    "advanced compaction parts: reached as ctxwise.compaction.<part>.X": {
        "ctxwise.compaction.archive.archive",
        "ctxwise.compaction.core.scannable",
        "ctxwise.compaction.cuts.is_real_user",
        "ctxwise.compaction.cuts.is_summary",
        "ctxwise.compaction.cuts.user_messages",
        "ctxwise.compaction.pinned.PINNED_HEADER",
        "ctxwise.compaction.result.dropped_media",
        "ctxwise.compaction.result.media_note",
        "ctxwise.compaction.settings.SettingsOverrides",
        "ctxwise.compaction.summary.SummaryCall",  # not ctxwise.SummaryCall (costs)
        "ctxwise.compaction.summary.summarizer_call",
    },
    "advanced memory parts (extractor and tier seams, backend helpers): ctxwise.memory.X": {
        "ctxwise.memory.Extraction",
        "ctxwise.memory.Extractor",
        "ctxwise.memory.Pinned",
        "ctxwise.memory.longterm.check_preset_embedder",
        "ctxwise.memory.longterm.lexical_query",
        "ctxwise.memory.longterm.recall_settings",
        "ctxwise.memory.sqlite.VectorIndexInfo",
        "ctxwise.memory.store.bm25_idf",
        "ctxwise.memory.store.bm25_term",
        "ctxwise.memory.store.check_k",
        "ctxwise.memory.store.check_namespace",
        "ctxwise.memory.store.exact_dots",
        "ctxwise.memory.store.fts_tokens",
        "ctxwise.memory.store.namespace_part",
        "ctxwise.memory.store.rank_key",
        "ctxwise.memory.tiered.turn_items",
        "ctxwise.memory.tiered.turn_spans",
        "ctxwise.memory.urls.store_kind",
    },
    "token counting against providers (counters, usage steps, their calibration; issue 30):"
    " reached as ctxwise.tokens.X, ctxwise.formats.usage.X, ctxwise.calibration.X": {
        "ctxwise.calibration.*",
        "ctxwise.formats.usage.*",
        "ctxwise.tokens.*",
        "ctxwise.tokens.anthropic.*",
        "ctxwise.tokens.models.*",
        "ctxwise.tokens.openai.*",
    },
    "evaluation harnesses behind ctxwise eval: reached as ctxwise.<area>.evaluation.X": {
        "ctxwise.memory.evaluation.*",
        "ctxwise.routing.evaluation.*",
    },
    "routing parts (scorers, calibration): IntentRouter is the entry; ctxwise.routing.X": {
        "ctxwise.routing.BowScorer",
        "ctxwise.routing.Calibration",
        "ctxwise.routing.EmbeddingScorer",
        "ctxwise.routing.FitReport",
        "ctxwise.routing.HybridScorer",
        "ctxwise.routing.LexicalScorer",
        "ctxwise.routing.RoutingMetrics",
        "ctxwise.routing.Scorer",
        "ctxwise.routing.calibrate",
        "ctxwise.routing.make_scorer",
        "ctxwise.routing.routing_metrics",
        "ctxwise.routing.calibration.decide",
        "ctxwise.routing.calibration.harmonic_mean",
        "ctxwise.routing.router.arrays_path",
        "ctxwise.routing.scorers.SavableScorer",
        "ctxwise.routing.scorers.ScorerState",
    },
    "embedder adapters behind their extras, and the one embedder setting: ctxwise.embeddings.X": {
        "ctxwise.embeddings.EmbedderSpec",
        "ctxwise.embeddings.EndpointEmbedder",
        "ctxwise.embeddings.FastEmbedEmbedder",
        "ctxwise.embeddings.Model2VecEmbedder",
        "ctxwise.embeddings.build_embedder",
        "ctxwise.embeddings.embedder_name",
        "ctxwise.embeddings.parse_embedder",
    },
    "helpers of one module: reached as ctxwise.<module>.x": {
        "ctxwise.assembly.fit_as_sent",
        "ctxwise.embeddings.tokenize",
        "ctxwise.embedding_cache.bypassing",
        "ctxwise.embedding_cache.default_cache_dir",
        "ctxwise.embedding_cache.default_cache_path",
        "ctxwise.embedding_cache.model_key",
        "ctxwise.messages.block_text",
        "ctxwise.messages.check_messages",
        "ctxwise.messages.message_problem",
        "ctxwise.pairing.placement_for",
        "ctxwise.pairing.problems",
        "ctxwise.policy.tool_outcome",
        "ctxwise.summarize.Excerpt",
        "ctxwise.summarize.format_excerpt",
        "ctxwise.summarize.parse_excerpt",
        "ctxwise.summarize.render_turns",
        "ctxwise.summarize.summarize_range",
    },
    "the text analyzer shared by every index: reached as ctxwise.text.X": {
        "ctxwise.text.*",
    },
    "the search core (BM25, its index, fusion, sparse postings): reached as ctxwise.search.X": {
        "ctxwise.search.*",
        "ctxwise.search.bm25.*",
        "ctxwise.search.fusion.*",
        "ctxwise.search.sparse.*",
    },
    "the summary-retention measure used by the benchmarks: ctxwise.retention.X": {
        "ctxwise.retention.*",
    },
    "provider adapters over the SDK extras: reached as ctxwise.providers.X": {
        "ctxwise.providers.AnthropicChat",
        "ctxwise.providers.ChatModel",
        "ctxwise.providers.OpenAIChat",
        "ctxwise.providers.OpenAIYesNo",
        "ctxwise.providers.YesNoModel",
        "ctxwise.providers.scoring.*",
    },
    "prices and the prompt cache, simulated: ctxwise.pricing.X, ctxwise.prompt_cache.X": {
        "ctxwise.pricing.*",
        "ctxwise.prompt_cache.*",
    },
    "integrations, each behind its extra: reached as ctxwise.integrations.<name>.X": {
        "ctxwise.integrations.claude_agent_sdk.*",
        "ctxwise.integrations.langchain.*",
        "ctxwise.integrations.langgraph.*",
        "ctxwise.integrations.mcp_server.*",
        "ctxwise.integrations.openai_agents.*",
        "ctxwise.integrations.pydantic_ai.*",
    },
    "the steps of a turn, one module each (Steps, TurnState, TurnContext top level)": {
        "ctxwise.turn.Assembled",
        "ctxwise.turn.BudgetPlan",
        "ctxwise.turn.Classifier",
        "ctxwise.turn.FunctionStep",
        "ctxwise.turn.Remember",
        "ctxwise.turn.SessionView",
        "ctxwise.turn.Step",
        "ctxwise.turn.ToolsPlan",
        "ctxwise.turn.default_steps",
        "ctxwise.turn.record_steps",
        "ctxwise.turn.step",
        "ctxwise.turn.append.append",
        "ctxwise.turn.append.check_pairing",
        "ctxwise.turn.assemble.FIT_ATTEMPTS",
        "ctxwise.turn.assemble.assemble_window",
        "ctxwise.turn.assemble.fit_window",
        "ctxwise.turn.cost.*",
        "ctxwise.turn.calibrate.*",
        "ctxwise.turn.budget.budget",
        "ctxwise.turn.budget.pinned_sections",
        "ctxwise.turn.context.Classifier",
        "ctxwise.turn.context.LogReader",
        "ctxwise.turn.context.OnceSummarizer",
        "ctxwise.turn.edit.OPENAI_CACHE_READ_FACTOR",
        "ctxwise.turn.edit.cache_factors",
        "ctxwise.turn.edit.clear",
        "ctxwise.turn.edit.clear_pays",
        "ctxwise.turn.edit.compact_history",
        "ctxwise.turn.edit.count_turns",
        "ctxwise.turn.edit.edit",
        "ctxwise.turn.edit.latest_exchange",
        "ctxwise.turn.effects.Remember",
        "ctxwise.turn.effects.pending",
        "ctxwise.turn.effects.remember",
        "ctxwise.turn.gather.gather",
        "ctxwise.turn.gather.gather_sections",
        "ctxwise.turn.observe.observe",
        "ctxwise.turn.pipeline.FunctionStep",
        "ctxwise.turn.pipeline.Step",
        "ctxwise.turn.pipeline.step",
        "ctxwise.turn.render.render",
        "ctxwise.turn.route.check_sendable",
        "ctxwise.turn.route.choose",
        "ctxwise.turn.route.route",
        "ctxwise.turn.state.Assembled",
        "ctxwise.turn.state.BudgetPlan",
        "ctxwise.turn.state.Remember",
        "ctxwise.turn.state.SessionView",
        "ctxwise.turn.state.ToolsPlan",
        "ctxwise.turn.tools.MEMORY_TOOL",
        "ctxwise.turn.tools.as_openai",
        "ctxwise.turn.tools.loaded_tools",
        "ctxwise.turn.tools.plan_tools",
        "ctxwise.turn.tools.tools",
        "ctxwise.turn.trace.trace",
        "ctxwise.memory.source.SessionMemory",
    },
    "the orchestrator's classifier seam (the engine replaces it)": {
        "ctxwise.orchestrator.Classifier",
    },
    "the Pipeline's own result and trace (ctxwise.TurnResult and ctxwise.Trace are the Engine's)": {
        "ctxwise.orchestrator.Trace",
        "ctxwise.orchestrator.TurnResult",
    },
    "Engine config parts (sections of ctxwise.toml): reached as ctxwise.config.X": {
        "ctxwise.config.ClearingConfig",
        "ctxwise.config.CompactionConfig",
        "ctxwise.config.EmbedderConfig",
        "ctxwise.config.FactsConfig",
        "ctxwise.config.GatesConfig",
        "ctxwise.config.MemoryConfig",
        "ctxwise.config.RouterConfig",
        "ctxwise.config.SourceConfig",
        "ctxwise.config.ToolsConfig",
        "ctxwise.config.ToolResultsConfig",
        "ctxwise.config.TrimConfig",
        "ctxwise.config.MemoryToolConfig",
        "ctxwise.config.CostsConfig",
        "ctxwise.config.config_from_dict",
    },
    "trace parts, each a field of ctxwise.Trace: reached as ctxwise.trace.X": {
        "ctxwise.trace.ToolEventTrace",
        "ctxwise.trace.CacheTrace",
        "ctxwise.trace.CalibrationTrace",
        "ctxwise.trace.EditGateTrace",
        "ctxwise.trace.FailOpenTrace",
        "ctxwise.trace.ToolsTrace",
        "ctxwise.trace.TRACE_FORMAT",
        "ctxwise.trace.ClearTrace",
        "ctxwise.trace.CompactionTrace",
        "ctxwise.trace.RouteTrace",
        "ctxwise.trace.SectionTrace",
        "ctxwise.trace.TokensTrace",
    },
    "session store internals for backend authors: reached as ctxwise.sessions.X": {
        "ctxwise.sessions.HistoryRow",
        "ctxwise.sessions.SessionCommit",
        "ctxwise.sessions.SessionSnapshot",
        "ctxwise.sessions.check_session_id",
        "ctxwise.sessions.store.dumps",
        "ctxwise.sessions.postgres.PostgresSessionStore",
    },
    "the replay harness behind ctxwise replay: reached as ctxwise.replay.X": {
        "ctxwise.replay.*",
    },
    "the ledger read back (issue 32): reached as ctxwise.ledger.X": {
        "ctxwise.ledger.*",
        "ctxwise.trace.LedgerTrace",
        "ctxwise.trace.SummaryTrace",
        "ctxwise.turn.ledger.ledger",
        "ctxwise.turn.ledger.ranges",
    },
    "ctxwise's own JSON form and the request renderer: ctxwise.formats.<module>.X": {
        "ctxwise.formats.neutral.*",
        "ctxwise.formats.request.*",
    },
    "the command line: reached as ctxwise.cli.X (the ctxwise script)": {
        "ctxwise.cli.app",
        "ctxwise.cli.main",
    },
    "the command line's command groups, one module each: ctxwise.cli.<group>.X": {
        "ctxwise.cli.assemble.*",
        "ctxwise.cli.clear.*",
        "ctxwise.cli.compact.*",
        "ctxwise.cli.demo.*",
        "ctxwise.cli.engine.*",
        "ctxwise.cli.evals.*",
        "ctxwise.cli.explain.*",
        "ctxwise.cli.handoff.*",
        "ctxwise.cli.mcp.*",
        "ctxwise.cli.relay.*",
        "ctxwise.cli.routing.*",
        "ctxwise.cli.serve.*",
        "ctxwise.cli.simulate.*",
        "ctxwise.cli.tools.*",
        "ctxwise.cli.hook.*",
    },
    "the tool catalog's values and tool results, trimmed and paged: ctxwise.tools.X": {
        "ctxwise.tools.DEFAULT_K",
        "ctxwise.tools.TOOL_SEARCH",
        "ctxwise.tools.SearchOutcome",
        "ctxwise.tools.ToolHit",
        "ctxwise.tools.ToolTurn",
        "ctxwise.tools.catalog.*",
        "ctxwise.tools.search.*",
        "ctxwise.tools.evaluation.*",
        "ctxwise.tools.Page",
        "ctxwise.tools.ResultStore",
        "ctxwise.tools.Trimmed",
        "ctxwise.tools.fetch_more_result",
        "ctxwise.tools.fetch_more_tool",
        "ctxwise.tools.paginate",
        "ctxwise.tools.trim",
        "ctxwise.tools.trim_text",
        "ctxwise.tools.cursors.*",
        "ctxwise.tools.trim.*",
        "ctxwise.tools.given.*",
    },
    "handoff parts (select_context and Handoff are top level): ctxwise.handoff.X": {
        "ctxwise.handoff.DEFAULT_BUDGET",
        "ctxwise.handoff.DEFAULT_RECENT_SHARE",
        "ctxwise.handoff.Chunk",
        "ctxwise.handoff.ChunkScorer",
        "ctxwise.handoff.HybridScorer",
        "ctxwise.handoff.LLMScorer",
        "ctxwise.handoff.SIZE_EXPONENT",
        "ctxwise.handoff.Selected",
        "ctxwise.handoff.chunk_transcript",
        "ctxwise.handoff.identifiers",
        "ctxwise.handoff.EscalationBrief",
        "ctxwise.handoff.escalation_brief",
        "ctxwise.handoff.chunks.*",
        "ctxwise.handoff.escalation.*",
        "ctxwise.handoff.report.*",
        "ctxwise.handoff.evaluation.*",
        "ctxwise.handoff.scoring.*",
        "ctxwise.handoff.select.*",
    },
    "synthesis of subagent reports: reached as ctxwise.provenance.X": {
        "ctxwise.provenance.*",
    },
    "Claude Code hooks (run as `ctxwise hook EVENT`): ctxwise.integrations.claude_code_hooks.X": {
        "ctxwise.integrations.claude_code_hooks.*",
    },
    "relay parts (Relay is top level): reached as ctxwise.relay.X": {
        "ctxwise.relay.*",
        "ctxwise.relay.carry.*",
        "ctxwise.relay.evaluation.*",
        "ctxwise.relay.lines.*",
        "ctxwise.relay.manifest.*",
        "ctxwise.relay.run.*",
        "ctxwise.relay.spec.*",
        "ctxwise.relay.step.*",
        "ctxwise.relay.table.*",
        "ctxwise.relay.workload.*",
    },
    "test code for users (conformance suites, fakes), imported on demand: ctxwise.testing.X": {
        "ctxwise.testing.*",
        "ctxwise.testing.fakes.*",
        "ctxwise.testing.suite.*",
        "ctxwise.testing.upstream.*",
    },
    "tenants and the service (issue 31): ctxwise.tenancy.X, ctxwise.server.<module>.X": {
        "ctxwise.server.app.SETTINGS_ENV",
        "ctxwise.server.app.app_from_env",
        "ctxwise.server.app.create_app",
        "ctxwise.server.auth.KEY_HEADER",
        "ctxwise.server.auth.tenant_of",
        "ctxwise.server.engines.EnginePool",
        "ctxwise.server.keys.ApiKey",
        "ctxwise.server.keys.KeyStore",
        "ctxwise.server.proxy.FAIL_OPEN_HEADER",
        "ctxwise.server.proxy.SESSION_HEADER",
        "ctxwise.server.proxy.include_proxy",
        "ctxwise.server.proxy.router",
        "ctxwise.server.rest.router",
        "ctxwise.server.settings.ServeSettings",
        "ctxwise.server.shapes.API",
        "ctxwise.server.shapes.api_of",
        "ctxwise.server.shapes.error_body",
        "ctxwise.server.shapes.error_type",
        "ctxwise.server.tenants.TenantEngine",
        "ctxwise.tenancy.Partition",
        "ctxwise.tenancy.check_tenant",
        "ctxwise.tenancy.open_partition",
        "ctxwise.tenancy.partition",
    },
    "the web inspector (issue 32): ctxwise.server.inspect.X, its command ctxwise.cli.inspect_ui": {
        "ctxwise.cli.inspect_ui.*",
        "ctxwise.server.inspect.*",
        "ctxwise.server.inspect.app.*",
    },
    "the memory tool: reached as ctxwise.memory_tool.X": {
        "ctxwise.memory_tool.*",
    },
    "saving an edited or compacted transcript file (write_back is top level): ctxwise.formats.X": {
        "ctxwise.formats.check_destination",
        "ctxwise.formats.save_transcript_file",
    },
    "writing a compaction back into its file, a layer above the codecs: ctxwise.compaction.X": {
        "ctxwise.compaction.write_back_compaction",
    },
}

ALLOWED = {entry for group in ALLOWLIST.values() for entry in group}


def _touch_lazy_names() -> set[str]:
    """Resolve every name in ``__all__`` (so lazily exported ones land in the module's
    namespace); return those that need an optional extra that is not installed."""
    missing_extra: set[str] = set()
    for name in ctxwise.__all__:
        try:
            getattr(ctxwise, name)
        except MissingDependencyError:
            missing_extra.add(name)
    return missing_extra


MISSING_EXTRA = _touch_lazy_names()


def _public_submodules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(ctxwise.__path__, "ctxwise."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        names.append(info.name)
    return sorted(names)


SUBMODULES = _public_submodules()


def _import_or_skip(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except MissingDependencyError as exc:
        pytest.skip(f"{name}: optional extra missing ({exc})")
    except ImportError as exc:
        if exc.name and exc.name.partition(".")[0] != "ctxwise":
            pytest.skip(f"{name}: optional dependency {exc.name} missing")
        raise


def test_all_is_sorted_and_unique() -> None:
    assert list(ctxwise.__all__) == sorted(ctxwise.__all__)
    duplicates = sorted({n for n in ctxwise.__all__ if ctxwise.__all__.count(n) > 1})
    assert not duplicates, duplicates


def test_every_name_in_all_resolves() -> None:
    unresolved = [
        name for name in ctxwise.__all__ if name not in MISSING_EXTRA and not hasattr(ctxwise, name)
    ]
    assert not unresolved, unresolved


def test_all_equals_the_public_namespace() -> None:
    # vars(), not dir(): a module __dir__ could echo __all__ and make this vacuous
    public = {
        name
        for name, value in vars(ctxwise).items()
        if not (name.startswith("__") and name.endswith("__"))
        and not name.startswith("_")
        and not isinstance(value, types.ModuleType)
    }
    exported = {name for name in ctxwise.__all__ if not name.startswith("__")}
    assert public - exported == set(), "exposed but not in __all__"
    assert exported - public - MISSING_EXTRA == set(), "in __all__ but not exposed"
    assert "__version__" in ctxwise.__all__


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = ctxwise.no_such_name  # type: ignore[attr-defined]


def test_the_walk_sees_the_package() -> None:
    # guard against a vacuous pass; private modules (the demo scenarios) are not walked
    assert {"ctxwise.tokens", "ctxwise.memory", "ctxwise.memory.sqlite"} <= set(SUBMODULES)
    assert not [m for m in SUBMODULES if "._" in m]


@pytest.mark.parametrize("module_name", SUBMODULES)
def test_submodule_defines_all(module_name: str) -> None:
    module = _import_or_skip(module_name)
    assert isinstance(getattr(module, "__all__", None), list | tuple), (
        f"{module_name} has no __all__"
    )


def _allowed(module_name: str, name: str, value: object) -> bool:
    parts = module_name.split(".")
    for depth in range(len(parts), 0, -1):
        package_name = ".".join(parts[:depth])
        if f"{package_name}.*" in ALLOWED and package_name == module_name:
            return True
        if f"{package_name}.{name}" in ALLOWED:
            package = importlib.import_module(package_name)
            if getattr(package, name, None) is value:
                return True
    return False


@pytest.mark.parametrize("module_name", SUBMODULES)
def test_submodule_names_are_exported_or_allowlisted(module_name: str) -> None:
    module = _import_or_skip(module_name)
    stray = []
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name)
        if isinstance(value, types.ModuleType):
            continue  # a subpackage listing its modules
        if name in ctxwise.__all__ and getattr(ctxwise, name, None) is value:
            continue
        if not _allowed(module_name, name, value):
            stray.append(name)
    assert not stray, (
        f"{module_name} exports {stray}: export them from ctxwise/__init__.py "
        "or add them to ALLOWLIST with the reason they stay in their module"
    )


def test_allowlist_has_no_stale_entries() -> None:
    stale = []
    for entry in sorted(ALLOWED):
        module_name, _, name = entry.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except MissingDependencyError:
            continue
        except ModuleNotFoundError:
            stale.append(entry)
            continue
        if name == "*":
            continue
        if name not in getattr(module, "__all__", ()) or (
            name in ctxwise.__all__ and getattr(ctxwise, name, None) is getattr(module, name)
        ):
            stale.append(entry)
    assert not stale, f"allowlisted but not exported by that module, or now top level: {stale}"
