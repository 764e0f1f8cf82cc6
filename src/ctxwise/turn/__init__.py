"""A turn as a pipeline of small steps over a frozen :class:`TurnState`.

:meth:`Engine.turn <ctxwise.engine.Engine.turn>` loads the session, runs
:func:`default_steps` (each one module here: append, observe, calibrate, route,
tools, budget, edit, gather, assemble, render, cost, ledger, trace, and calibrate's
estimate), commits what they built in one transaction, then runs the turn's effects
(:mod:`ctxwise.turn.effects`). Each
step is a plain function of ``(state, ctx)`` that returns the next state, so it
can be tested alone on a hand-built state and a :class:`TurnContext` made from a
config, with no store.

Change the steps of an Engine through ``engine.steps``
(:class:`~ctxwise.turn.pipeline.Steps`: insert, replace, wrap, remove); each
step's time is in the trace's ``timings_ms`` under its name::

    from ctxwise.turn import step

    @step("audit")
    def audit(state, ctx):
        log.info("routed %s", state.route.label)
        return state

    engine.steps.insert(audit, after="route")
"""

from __future__ import annotations

from ctxwise.turn.append import append
from ctxwise.turn.assemble import assemble_window
from ctxwise.turn.budget import budget
from ctxwise.turn.calibrate import calibrate, estimate
from ctxwise.turn.context import Classifier, TurnContext
from ctxwise.turn.cost import cost
from ctxwise.turn.edit import edit
from ctxwise.turn.gather import gather
from ctxwise.turn.ledger import ledger
from ctxwise.turn.observe import observe
from ctxwise.turn.pipeline import FunctionStep, Step, Steps, step
from ctxwise.turn.render import render
from ctxwise.turn.route import route
from ctxwise.turn.state import (
    Assembled,
    BudgetPlan,
    Remember,
    SessionView,
    ToolsPlan,
    TurnState,
)
from ctxwise.turn.tools import tools
from ctxwise.turn.trace import trace

__all__ = [
    "Assembled",
    "BudgetPlan",
    "Classifier",
    "FunctionStep",
    "Remember",
    "SessionView",
    "Step",
    "Steps",
    "ToolsPlan",
    "TurnContext",
    "TurnState",
    "default_steps",
    "record_steps",
    "step",
]


def record_steps() -> list[Step]:
    """What :meth:`Engine.record <ctxwise.engine.Engine.record>` runs: append, observe,
    calibrate (a response's usage recorded is learned from, as in a turn)."""
    return [
        FunctionStep("append", append),
        FunctionStep("observe", observe),
        FunctionStep("calibrate", calibrate),
    ]


def default_steps() -> list[Step]:
    """The steps of a turn, in order."""
    return [
        *record_steps(),
        FunctionStep("route", route),
        FunctionStep("tools", tools),
        FunctionStep("budget", budget),
        FunctionStep("edit", edit),
        FunctionStep("gather", gather),
        FunctionStep("assemble", assemble_window),
        FunctionStep("render", render),
        FunctionStep("cost", cost),
        FunctionStep("ledger", ledger),
        FunctionStep("trace", trace),
        FunctionStep("estimate", estimate),
    ]
