"""One exception tree: every error ctxwise defines lives in ``ctxwise.errors``,
hangs under ``UsageError`` or ``BackendError``, is exported, and pickles."""

from __future__ import annotations

import ast
import importlib
import pickle
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import ctxwise
import ctxwise.errors as errors
from ctxwise.compaction.errors import WindowItem
from ctxwise.errors import BackendError, CtxwiseError, MissingDependencyError, UsageError
from ctxwise.messages import PairingProblem, ProblemKind

PACKAGE = Path(ctxwise.__file__).resolve().parent


def _modules() -> tuple[list[ModuleType], list[str]]:
    """Every module of the package, and the ones skipped for a missing optional extra."""
    skipped: list[str] = []

    def onerror(name: str) -> None:
        skipped.append(name)

    loaded: list[ModuleType] = []
    for info in pkgutil.walk_packages(ctxwise.__path__, "ctxwise.", onerror=onerror):
        try:
            loaded.append(importlib.import_module(info.name))
        except MissingDependencyError:
            skipped.append(info.name)
        except ModuleNotFoundError as e:
            if (e.name or "").partition(".")[0] == "ctxwise":
                raise
            skipped.append(info.name)
    return loaded, skipped


def _exception_classes() -> set[type[BaseException]]:
    """Every exception class defined in ctxwise: bound in a module, or a subclass of the root."""
    modules, _ = _modules()
    found: set[type[BaseException]] = set()
    for module in modules:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.partition(".")[0] == "ctxwise"
            ):
                found.add(value)
    stack: list[type[BaseException]] = [CtxwiseError, errors.CtxwiseWarning]
    while stack:
        cls = stack.pop()
        if cls.__module__.partition(".")[0] == "ctxwise":
            found.add(cls)
        stack.extend(cls.__subclasses__())
    return found


CLASSES = sorted(_exception_classes(), key=lambda c: c.__name__)


def test_the_walk_finds_the_tree() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"CtxwiseError", "PairingError", "StoreError", "CompactionBudgetError"} <= names
    assert len(CLASSES) >= len(errors.__all__)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_exception_lives_in_errors_under_a_branch(cls: type[BaseException]) -> None:
    assert cls.__module__ == "ctxwise.errors", f"{cls.__qualname__} is defined in {cls.__module__}"
    assert cls.__name__ in errors.__all__
    assert getattr(errors, cls.__name__) is cls
    if issubclass(cls, Warning):
        assert issubclass(cls, errors.CtxwiseWarning), f"{cls.__name__} hangs off no root"
    elif cls is not CtxwiseError:
        assert issubclass(cls, UsageError | BackendError), f"{cls.__name__} hangs off the root"
    assert not issubclass(cls, UsageError) or not issubclass(cls, BackendError)


def test_no_module_but_errors_defines_an_error_class() -> None:
    """Also catches modules the walk skipped for a missing extra."""
    defined = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                defined.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert defined == []


def test_the_docstring_draws_every_class() -> None:
    tree = errors.__doc__ or ""
    for name in errors.__all__:
        assert re.search(rf"(    |── ){name}\s", tree), name


def test_errors_imports_nothing_from_ctxwise_at_run_time() -> None:
    source = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    for node in source.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n.partition(".")[0] == "ctxwise" for n in names), ast.dump(node)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("ctxwise.costs", "SimulationError"),
        ("ctxwise.pairing", "PairingError"),
        ("ctxwise.compaction.errors", "EmptyTranscriptError"),
        ("ctxwise.compaction.errors", "CompactionBudgetError"),
        ("ctxwise.compaction.errors", "SummarizerError"),
        ("ctxwise.compaction.errors", "CompactionArchiveError"),
        ("ctxwise.compaction.errors", "CompactionThrashError"),
        ("ctxwise.compaction", "CompactionBudgetError"),
        ("ctxwise.compaction._claude_code", "ClaudeCodeWriteError"),
        ("ctxwise.editing", "EditParameterError"),
        ("ctxwise.memory.store", "StoreError"),
        ("ctxwise.memory.store", "NamespaceNotFoundError"),
        ("ctxwise.memory", "StoreError"),
        ("ctxwise.memory.urls", "StoreURLError"),
    ],
)
def test_the_old_homes_re_export_the_same_class(module: str, name: str) -> None:
    home = importlib.import_module(module)
    assert getattr(home, name) is getattr(errors, name)
    assert name in home.__all__


_ITEM = WindowItem(3, "user", "tool_result", 1_234, "grep", "toolu_1")
_PROBLEM = PairingProblem(ProblemKind.ORPHAN_RESULT, "toolu_9", 4, "no earlier tool_use")

SAMPLES: dict[str, BaseException] = {
    "CtxwiseError": CtxwiseError("something"),
    "UsageError": UsageError("placement must be 'loose', 'anthropic' or 'openai'"),
    "BackendError": BackendError("the disk is gone"),
    "BudgetError": errors.BudgetError(-1, "must be positive"),
    "PinnedOverflowError": errors.PinnedOverflowError(100, 150, ["rules", "facts"]),
    "SpecError": errors.SpecError("spec.yaml", "budget: field required"),
    "FormatError": errors.FormatError("a.jsonl", "not JSON", line=7),
    "UnknownFormatError": errors.UnknownFormatError("a.txt", "unknown format"),
    "UnsupportedInputError": errors.UnsupportedInputError("int", "a list of messages", index=2),
    "OutputError": errors.OutputError("/x/out.json", "is a directory"),
    "MissingDependencyError": MissingDependencyError("psycopg", "postgres", "PostgresStore"),
    "PairingError": errors.PairingError([_PROBLEM], "anthropic", "t.json", repairable=False),
    "EditParameterError": errors.EditParameterError("keep", -2, "must be >= 0"),
    "SimulationError": errors.SimulationError("calls", 0, "must be positive"),
    "EmptyTranscriptError": errors.EmptyTranscriptError("t.json", "no messages"),
    "CompactionBudgetError": errors.CompactionBudgetError(
        10, {"system": 8, "latest user message": 5}, _ITEM, source="x.json"
    ),
    "CompactionThrashError": errors.CompactionThrashError(3, 1_000, 1_500, _ITEM, "over again"),
    "ClaudeCodeWriteError": errors.ClaudeCodeWriteError("s.jsonl", "no summary", ["renamed t1"]),
    "NamespaceNotFoundError": errors.NamespaceNotFoundError(("acme", "u1")),
    "StoreURLError": errors.StoreURLError("mysql://app:secret@db/app", reason="unknown scheme"),
    "TokenizerUnavailableError": errors.TokenizerUnavailableError("o200k_base", "offline"),
    "ProviderError": errors.ProviderError("anthropic", "rate limited", status=429),
    "StoreError": errors.StoreError("db.sqlite: not a usable SQLite store"),
    "StoreDimensionError": errors.StoreDimensionError("ctxwise_eval", 1024, 384),
    "NewerSchemaError": errors.NewerSchemaError("memory.db", 5, 4, ["005_from_the_future"]),
    "StepError": errors.StepError("gather", "KeyError: 'memory'"),
    "SummarizerError": errors.SummarizerError(
        "LLMSummarizer", "timeout", archive_id="arch-1", archived_messages=12
    ),
    "CompactionArchiveError": errors.CompactionArchiveError(("acme", "archive"), "disk full"),
    "ConfigError": errors.ConfigError("ctxwise.toml", "clearing.keep_lats: unknown key"),
    "UnknownSessionError": errors.UnknownSessionError("s-42"),
    "UnknownTurnError": errors.UnknownTurnError("s-42", 9, turns=3),
    "PointerError": errors.PointerError("log:x", "a log position is a whole number"),
    "HistoryRewoundError": errors.HistoryRewoundError("s-42", at=3, gone=2, first="id:m5"),
    "SessionConflictError": errors.SessionConflictError("s-42", expected=3, found=4),
    "SessionBusyError": errors.SessionBusyError("s-42", 0.5),
    "SessionStoreError": errors.SessionStoreError("ctxwise.db: disk I/O error"),
    "ProxyInputError": errors.ProxyInputError("messages.3: a tool_result answers no call"),
    "UpstreamError": errors.UpstreamError(504, "the upstream did not answer in time"),
    "CursorError": errors.CursorError("expired", detail="result r1"),
    "ToolCatalogError": errors.ToolCatalogError(
        "duplicate", tool="search", server="web", detail="twice on one server"
    ),
    "RelayError": errors.RelayError("workload", "chunks/0003.txt is missing", path="log"),
    "RelayStateError": errors.RelayStateError("hash mismatch", path="runs/job/state-000004.json"),
    "StepFailed": errors.StepFailed("the reply is not JSON"),
    "IntegrationError": errors.IntegrationError(
        "langchain", "version", "langchain 0.3.27 is installed", supported=">=1.5,<2"
    ),
    "CtxwiseWarning": errors.CtxwiseWarning("probably not what was meant"),
    "UnansweredTurnWarning": errors.UnansweredTurnWarning("session-1"),
    "SubagentReportError": errors.SubagentReportError(
        [("findings[0].source", "needs a url or a document"), ("gaps[1].status", "bad")],
        source="market sizing",
    ),
}


def test_every_class_has_a_pickle_sample() -> None:
    assert set(SAMPLES) == {c.__name__ for c in CLASSES}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_exception_pickles_with_its_fields(name: str) -> None:
    err = SAMPLES[name]
    assert type(err).__name__ == name
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.args == err.args
    assert vars(back) == vars(err)
    if type(err) not in (CtxwiseError, UsageError, BackendError, errors.CtxwiseWarning):
        assert vars(err), f"{name} carries no structured field"


def test_pickled_fields_are_the_structured_values() -> None:
    back = pickle.loads(pickle.dumps(SAMPLES["CompactionBudgetError"]))
    assert isinstance(back, errors.CompactionBudgetError)
    assert (back.budget, back.required, back.largest, back.source) == (10, 13, _ITEM, "x.json")
    pairing = pickle.loads(pickle.dumps(SAMPLES["PairingError"]))
    assert isinstance(pairing, errors.PairingError)
    assert pairing.problems == (_PROBLEM,) and pairing.repairable is False
    url = pickle.loads(pickle.dumps(SAMPLES["StoreURLError"]))
    assert isinstance(url, errors.StoreURLError) and "secret" not in str(url)
    assert url.url == "mysql://app:secret@db/app"
    missing = pickle.loads(pickle.dumps(SAMPLES["MissingDependencyError"]))
    assert isinstance(missing, MissingDependencyError) and isinstance(missing, ImportError)
    assert missing.extra == "postgres"


def test_a_parameter_error_shows_any_value_without_raising() -> None:
    from ctxwise.errors import EditParameterError, SimulationError

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    # an int past Python's int -> str limit has no repr: building the message raised
    # ValueError instead of the error
    for cls in (EditParameterError, SimulationError):
        err = cls("keep", 10**5000, "must be smaller")
        assert str(err) == "keep=<int of 16,610 bits>: must be smaller" and err.value == 10**5000
        assert "keep=<Broken>" in str(cls("keep", Broken(), "bad"))
        assert len(str(cls("keep", "x" * 10_000, "too long"))) < 300
