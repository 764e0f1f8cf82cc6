"""Long jobs over fresh calls: a verbatim line store, a checked state table, resume.

:class:`Relay` carries a job across many model calls, each of which sees only
the current chunk and a capped carry. See the guide's Relay section.
"""

from __future__ import annotations

from ctxwise.errors import RelayError, RelayStateError
from ctxwise.relay.carry import Shares
from ctxwise.relay.evaluation import RelayScore, score_run
from ctxwise.relay.lines import (
    DroppedLine,
    DropPolicy,
    ExampleScorer,
    KeptLine,
    LineScorer,
    LineStore,
    line_shape,
)
from ctxwise.relay.manifest import DirectoryRuns, Manifest, RunStore, StoreRuns
from ctxwise.relay.run import Rejection, Relay, RelayResult, StepRecord
from ctxwise.relay.spec import RelaySpec, build_relay, load_spec
from ctxwise.relay.step import (
    FaultyStep,
    LLMStep,
    Step,
    StepFailed,
    StepRequest,
    StepResult,
    keep_state,
)
from ctxwise.relay.table import Change, Check, StateTable, Violation
from ctxwise.relay.workload import (
    Answers,
    Examples,
    HandoverParser,
    NeedleLine,
    TableSpec,
    Workload,
    generate,
    load_workload,
    write_workload,
)

__all__ = [
    "Answers",
    "Change",
    "Check",
    "DirectoryRuns",
    "DropPolicy",
    "DroppedLine",
    "ExampleScorer",
    "Examples",
    "FaultyStep",
    "HandoverParser",
    "KeptLine",
    "LLMStep",
    "LineScorer",
    "LineStore",
    "Manifest",
    "NeedleLine",
    "Rejection",
    "Relay",
    "RelayError",
    "RelayResult",
    "RelayScore",
    "RelaySpec",
    "RelayStateError",
    "RunStore",
    "Shares",
    "StateTable",
    "Step",
    "StepFailed",
    "StepRecord",
    "StepRequest",
    "StepResult",
    "StoreRuns",
    "TableSpec",
    "Violation",
    "Workload",
    "build_relay",
    "generate",
    "keep_state",
    "line_shape",
    "load_spec",
    "load_workload",
    "score_run",
    "write_workload",
]
