"""The scripted agent session behind ``ctxwise demo``.

A coding agent fixes a rounding bug over five turns. On every turn ctxwise
builds the window from the system prompt and standing rules (pinned), the tool
catalog (stable, cached), the conversation so far (one section per earlier
turn, more recent turns ranked higher, all truncatable) and the live task, and
assembles it under a budget. The kitchen sink (everything, no budget) is
measured in the same run for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxwise.assembly import Assembly, Budget, Section, assemble
from ctxwise.formats import anthropic as anthropic_format
from ctxwise.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
    block_text,
)
from ctxwise.orchestrator import Pipeline
from ctxwise.routing import KeywordClassifier
from ctxwise.sources import StaticSource
from ctxwise.tokens import CharCounter, TokenCounter, WordCounter

__all__ = [
    "ROUTING_QUERIES",
    "DemoStep",
    "DemoTurn",
    "demo_script",
    "demo_transcript",
    "routing_pipeline",
    "run_demo",
]

SYSTEM = (
    "You are a careful coding agent working in the repository `shop`. Read before you edit, "
    "run the tests after every change, and explain what you changed and why in two sentences."
)
RULES = (
    "Standing rules: never push to main; never change tests to make them pass; money is Decimal."
)
TOOLS = (
    "Tools: read_file(path) returns a file's text. run_tests(selector) runs pytest and returns "
    "its report. edit_file(path, old, new) replaces one exact snippet. git_diff() shows the "
    "working-tree diff. search(pattern) greps the repository and lists matching lines."
)

_TOTALS_PY = """from dataclasses import dataclass

@dataclass
class Line:
    sku: str
    unit_price: float
    quantity: int

def line_total(line: Line) -> float:
    return round(line.unit_price * line.quantity, 2)

def invoice_total(lines: list[Line], tax_rate: float) -> float:
    subtotal = sum(line_total(l) for l in lines)
    tax = subtotal * tax_rate
    return round(subtotal + tax, 2)

def format_total(amount: float) -> str:
    return f"EUR {amount:,.2f}"
"""

_TEST_FAIL = """============================= test session starts ==============================
collected 14 items

tests/test_totals.py ........F.....                                      [100%]

=================================== FAILURES ===================================
________________________ test_invoice_total_three_lines ________________________
    def test_invoice_total_three_lines():
        lines = [Line("A-1", 19.99, 3), Line("B-7", 0.35, 7), Line("C-2", 4.10, 1)]
>       assert invoice_total(lines, tax_rate=0.19) == Decimal("79.18")
E       AssertionError: assert 79.17 == Decimal('79.18')
tests/test_totals.py:41: AssertionError
=========================== short test summary info ============================
FAILED tests/test_totals.py::test_invoice_total_three_lines - AssertionError
========================= 1 failed, 13 passed in 0.21s =========================
"""

_SEARCH = """shop/billing/totals.py:8:    unit_price: float
shop/billing/totals.py:11:    return round(line.unit_price * line.quantity, 2)
shop/billing/totals.py:15:    return round(subtotal + tax, 2)
shop/checkout/views.py:52:    total = invoice_total(cart.lines, tax_rate=settings.TAX_RATE)
shop/checkout/views.py:58:    return render(request, "checkout.html", {"total": format_total(t)})
shop/reports/monthly.py:23:    revenue += invoice_total(order.lines, order.tax_rate)
"""

_DIFF = """--- a/shop/billing/totals.py
+++ b/shop/billing/totals.py
@@ -1,16 +1,20 @@
 from dataclasses import dataclass
+from decimal import ROUND_HALF_UP, Decimal
+
+CENT = Decimal("0.01")

 @dataclass
 class Line:
     sku: str
-    unit_price: float
+    unit_price: Decimal
     quantity: int

-def line_total(line: Line) -> float:
-    return round(line.unit_price * line.quantity, 2)
+def line_total(line: Line) -> Decimal:
+    return (line.unit_price * line.quantity).quantize(CENT, ROUND_HALF_UP)
"""

_TEST_PASS = """============================= test session starts ==============================
collected 14 items

tests/test_totals.py ..............                                      [100%]

============================== 14 passed in 0.19s ==============================
"""


@dataclass(frozen=True, slots=True)
class DemoTurn:
    """One scripted turn: the user's message and the agent's work on it."""

    user: str
    calls: tuple[tuple[str, dict[str, Any], str], ...]
    reply: str


def demo_script() -> tuple[DemoTurn, ...]:
    return (
        DemoTurn(
            "Customers say invoice totals are sometimes one cent too low. Can you find out why?",
            (
                ("search", {"pattern": "invoice_total|round\\("}, _SEARCH),
                ("read_file", {"path": "shop/billing/totals.py"}, _TOTALS_PY),
            ),
            "Totals are computed in binary floats and rounded twice, once per line and once at "
            "the end, so half-cent values can round down. I will reproduce it with the tests.",
        ),
        DemoTurn(
            "Please run the billing tests first so we see it fail.",
            (("run_tests", {"selector": "tests/test_totals.py"}, _TEST_FAIL),),
            "test_invoice_total_three_lines fails: 79.17 instead of 79.18, the one-cent loss.",
        ),
        DemoTurn(
            "Fix it with Decimal and round half up, as the rules say.",
            (
                (
                    "edit_file",
                    {"path": "shop/billing/totals.py", "old": "float", "new": "Decimal"},
                    "ok",
                ),
                ("git_diff", {}, _DIFF),
            ),
            "Prices are now Decimal and each line is quantized to cents with ROUND_HALF_UP.",
        ),
        DemoTurn(
            "Run the tests again.",
            (("run_tests", {"selector": "tests/test_totals.py"}, _TEST_PASS),),
            "All 14 tests pass.",
        ),
        DemoTurn(
            "Summarize the change for the pull request description.",
            (),
            "Invoice totals used floats and double rounding; they now use Decimal with "
            "ROUND_HALF_UP per line, which fixes the one-cent undercharge.",
        ),
    )


def _turn_messages(turn: DemoTurn, index: int) -> list[Message]:
    msgs = [Message.text_message("user", turn.user)]
    for j, (name, args, result) in enumerate(turn.calls):
        call_id = f"toolu_demo_{index}_{j}"
        msgs.append(Message("assistant", (ToolUseBlock(call_id, name, args),)))
        msgs.append(Message("user", (ToolResultBlock(call_id, result),)))
    msgs.append(Message("assistant", (TextBlock(turn.reply),)))
    return msgs


def _render_turn(messages: Sequence[Message]) -> str:
    lines = []
    for m in messages:
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                lines.append(f"assistant called {block_text(b)}")
            elif isinstance(b, ToolResultBlock):
                lines.append(f"tool result:\n{block_text(b)}")
            else:
                lines.append(f"{m.role}: {block_text(b)}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class DemoStep:
    turn: int
    task: str
    assembly: Assembly
    kitchen_sink_tokens: int
    request: dict[str, Any]


def run_demo(budget: int = 700, counter: TokenCounter | None = None) -> list[DemoStep]:
    """Replay the script; on each turn assemble the window the agent would send."""
    ctr = counter if counter is not None else CharCounter()
    steps: list[DemoStep] = []
    for i, turn in enumerate(demo_script()):
        earlier = [_render_turn(_turn_messages(t, k)) for k, t in enumerate(demo_script()[:i])]
        sections = [
            Section("system", SYSTEM, priority=100, pinned=True, stable=True),
            Section("tools", TOOLS, priority=90, stable=True),
            Section("rules", RULES, priority=95, pinned=True),
        ]
        for k, text in enumerate(earlier):
            # recency ranks: the last turn is worth most, the first least
            sections.append(Section(f"turn {k + 1}", text, priority=10 + k, truncatable=True))
        # the live task is sent last, outside the sections: reserve its tokens
        task_tokens = ctr.count(turn.user)
        assembly = assemble(sections, Budget(budget, reserve=task_tokens), ctr)
        sink = sum(ctr.count(s.content) for s in sections) + task_tokens
        request = anthropic_format.render_request(
            assembly, turn.user, model="claude-sonnet-5-5", max_tokens=1024
        )
        steps.append(DemoStep(i + 1, turn.user, assembly, sink, request))
    return steps


def demo_transcript() -> Transcript:
    """The whole scripted session as a transcript of neutral messages."""
    messages: list[Message] = [Message.text_message("system", SYSTEM)]
    for i, turn in enumerate(demo_script()):
        messages.extend(_turn_messages(turn, i))
    return Transcript(tuple(messages), source="ctxwise-demo")


# -- the reference routing scenario ------------------------------------------

ROUTING_SOURCES = {
    "retrieval": (
        "Retrieved docs: The refund policy allows returns within 30 days. "
        "Shipping is free over fifty dollars. Support hours are 9 to 5. ",
        12,
    ),
    "memory": (
        "Long-term memory: user prefers terse answers, is on the Pro plan, lives in Berlin, "
        "asked about invoices twice before. ",
        8,
    ),
    "tools": (
        "Tool definitions: search(query) read_file(path) write_file(path,text) run_tests() "
        "git_diff() open_pr(title,body) list_dir(path). ",
        14,
    ),
    "code": (
        "Code context: def process(order): validate(order); charge(order.card); return "
        "Receipt(order.id)  # plus 200 lines of the surrounding module. ",
        16,
    ),
}
ROUTING_RULES = (
    (
        "coding",
        (
            "bug",
            "stack",
            "trace",
            "function",
            "code",
            "test",
            "error",
            "deploy",
            "refactor",
            "import",
            "exception",
            "fix",
        ),
    ),
    (
        "factual",
        ("what", "when", "how", "policy", "refund", "hours", "price", "where", "who", "does", "is"),
    ),
    (
        "chitchat",
        ("hi", "hey", "hello", "thanks", "thank", "lol", "cool", "nice", "ok", "okay", "bye"),
    ),
)
ROUTES = {"coding": ["code", "tools", "memory"], "factual": ["retrieval", "memory"], "chitchat": []}
ROUTING_QUERIES = (
    "What is your refund policy?",
    "Fix this stack trace in the deploy function",
    "hey thanks, that was nice",
    "When are your support hours?",
    "There is a bug in the test, the import throws an exception",
)


def routing_pipeline(sources: Sequence[Any] | None = None) -> Pipeline:
    """The reference scenario: four sources, a keyword classifier, a routes table,
    tokens = round(words × 1.3), budget 4,000. ``sources`` replaces the built-in
    ones (tests pass counting wrappers)."""
    counter = WordCounter()
    if sources is None:
        sources = [
            StaticSource(name, text * repeat, counter=counter)
            for name, (text, repeat) in ROUTING_SOURCES.items()
        ]
    router = KeywordClassifier(ROUTING_RULES, default="factual")
    return Pipeline(router, sources, ROUTES, 4000, counter)
