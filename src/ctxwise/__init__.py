"""ctxwise: the context layer for LLM agents.

On every turn ctxwise decides what enters the model's context window: it counts
tokens, reads and writes provider transcript formats, and assembles sections
under a token budget with a report of every decision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxwise._version import __version__
from ctxwise.assembly import (
    Assembly,
    Budget,
    Section,
    SectionReport,
    SectionStatus,
    assemble,
    order_for_recall,
)
from ctxwise.composition import Composition, CompositionItem, ToolTokens, composition
from ctxwise.costs import (
    CacheCost,
    ClearingBreakEven,
    CompactionSimulation,
    SimulationError,
    SummaryCall,
    clearing_break_even,
    simulate_compaction,
)
from ctxwise.editing import (
    ClearedItem,
    EditParameterError,
    EditResult,
    clear_thinking,
    clear_tool_uses,
    context_management,
)
from ctxwise.errors import (
    BackendError,
    BudgetError,
    CtxwiseError,
    FormatError,
    MissingDependencyError,
    OutputError,
    PinnedOverflowError,
    ProviderError,
    SpecError,
    TokenizerUnavailableError,
    UnknownFormatError,
    UsageError,
)
from ctxwise.formats import (
    TranscriptFile,
    detect_format,
    read_transcript,
    read_transcript_file,
    read_transcripts,
)
from ctxwise.messages import (
    CompactBoundary,
    ContentBlock,
    MediaBlock,
    Message,
    OpaqueBlock,
    PairingProblem,
    ProblemKind,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)
from ctxwise.pairing import PairingError, repair_pairing
from ctxwise.tokens import (
    CharCounter,
    TiktokenCounter,
    TokenCounter,
    WordCounter,
    get_counter,
    truncate_to_tokens,
)

if TYPE_CHECKING:
    from ctxwise.compaction import (
        AutoCompactor,
        Compaction,
        CompactionArchiveError,
        CompactionBudgetError,
        CompactionSettings,
        CompactionThrashError,
        DroppedMedia,
        EmptyTranscriptError,
        SummarizerError,
        WindowItem,
        compact,
        safe_cut_points,
    )
    from ctxwise.embeddings import Embedder, HashingEmbedder, SentenceTransformerEmbedder
    from ctxwise.memory import (
        CaseFacts,
        InMemoryStore,
        LongTermMemory,
        Rules,
        SQLiteStore,
        Store,
        TieredMemory,
    )
    from ctxwise.orchestrator import Pipeline, Trace, TurnResult
    from ctxwise.policy import Allowed, Blocked, PolicyGate, compile_rule
    from ctxwise.providers import AnthropicCounter
    from ctxwise.routing import (
        Intent,
        IntentRouter,
        KeywordClassifier,
        RouteDecision,
        RouteReason,
    )
    from ctxwise.sources import Source, StaticSource
    from ctxwise.spec import AssemblySpec, load_spec
    from ctxwise.summarize import ExtractiveSummarizer, Summarizer

# Modules that pull in heavier libraries (pydantic and yaml for specs, numpy for
# routing) load on first use, so `import ctxwise` and the CLI start fast.
_LAZY = {
    "AnthropicCounter": "ctxwise.providers",
    "AssemblySpec": "ctxwise.spec",
    "load_spec": "ctxwise.spec",
    "Embedder": "ctxwise.embeddings",
    "HashingEmbedder": "ctxwise.embeddings",
    "SentenceTransformerEmbedder": "ctxwise.embeddings",
    "Intent": "ctxwise.routing",
    "IntentRouter": "ctxwise.routing",
    "KeywordClassifier": "ctxwise.routing",
    "RouteDecision": "ctxwise.routing",
    "RouteReason": "ctxwise.routing",
    "Pipeline": "ctxwise.orchestrator",
    "Trace": "ctxwise.orchestrator",
    "TurnResult": "ctxwise.orchestrator",
    "Source": "ctxwise.sources",
    "CaseFacts": "ctxwise.memory",
    "InMemoryStore": "ctxwise.memory",
    "Rules": "ctxwise.memory",
    "Allowed": "ctxwise.policy",
    "Blocked": "ctxwise.policy",
    "PolicyGate": "ctxwise.policy",
    "compile_rule": "ctxwise.policy",
    "LongTermMemory": "ctxwise.memory",
    "SQLiteStore": "ctxwise.memory",
    "Store": "ctxwise.memory",
    "TieredMemory": "ctxwise.memory",
    "ExtractiveSummarizer": "ctxwise.summarize",
    "Summarizer": "ctxwise.summarize",
    "StaticSource": "ctxwise.sources",
    "AutoCompactor": "ctxwise.compaction",
    "Compaction": "ctxwise.compaction",
    "CompactionArchiveError": "ctxwise.compaction",
    "CompactionBudgetError": "ctxwise.compaction",
    "CompactionSettings": "ctxwise.compaction",
    "CompactionThrashError": "ctxwise.compaction",
    "DroppedMedia": "ctxwise.compaction",
    "EmptyTranscriptError": "ctxwise.compaction",
    "SummarizerError": "ctxwise.compaction",
    "WindowItem": "ctxwise.compaction",
    "compact": "ctxwise.compaction",
    "safe_cut_points": "ctxwise.compaction",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ctxwise' has no attribute {name!r}")


__all__ = [
    "Allowed",
    "AnthropicCounter",
    "Assembly",
    "AssemblySpec",
    "AutoCompactor",
    "BackendError",
    "Blocked",
    "Budget",
    "BudgetError",
    "CacheCost",
    "CaseFacts",
    "CharCounter",
    "ClearedItem",
    "ClearingBreakEven",
    "CompactBoundary",
    "Compaction",
    "CompactionArchiveError",
    "CompactionBudgetError",
    "CompactionSettings",
    "CompactionSimulation",
    "CompactionThrashError",
    "Composition",
    "CompositionItem",
    "ContentBlock",
    "CtxwiseError",
    "DroppedMedia",
    "EditParameterError",
    "EditResult",
    "Embedder",
    "EmptyTranscriptError",
    "ExtractiveSummarizer",
    "FormatError",
    "HashingEmbedder",
    "InMemoryStore",
    "Intent",
    "IntentRouter",
    "KeywordClassifier",
    "LongTermMemory",
    "MediaBlock",
    "Message",
    "MissingDependencyError",
    "OpaqueBlock",
    "OutputError",
    "PairingError",
    "PairingProblem",
    "PinnedOverflowError",
    "Pipeline",
    "PolicyGate",
    "ProblemKind",
    "ProviderError",
    "RouteDecision",
    "RouteReason",
    "Rules",
    "SQLiteStore",
    "Section",
    "SectionReport",
    "SectionStatus",
    "SentenceTransformerEmbedder",
    "SimulationError",
    "Source",
    "SpecError",
    "StaticSource",
    "Store",
    "Summarizer",
    "SummarizerError",
    "SummaryCall",
    "TextBlock",
    "ThinkingBlock",
    "TieredMemory",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "ToolResultBlock",
    "ToolTokens",
    "ToolUseBlock",
    "Trace",
    "Transcript",
    "TranscriptFile",
    "TurnResult",
    "UnknownFormatError",
    "UsageError",
    "WindowItem",
    "WordCounter",
    "__version__",
    "assemble",
    "clear_thinking",
    "clear_tool_uses",
    "clearing_break_even",
    "compact",
    "compile_rule",
    "composition",
    "context_management",
    "detect_format",
    "get_counter",
    "load_spec",
    "order_for_recall",
    "read_transcript",
    "read_transcript_file",
    "read_transcripts",
    "repair_pairing",
    "safe_cut_points",
    "simulate_compaction",
    "truncate_to_tokens",
]
