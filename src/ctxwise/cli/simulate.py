"""CLI commands for the cost simulators: ``simulate compaction`` and ``simulate clearing``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from ctxwise.cli._util import (
    _buffered_console,
    _guard,
    _num_col,
    _print_json,
    _table,
    _text_col,
    _write,
)
from ctxwise.costs import (
    ANTHROPIC_CACHE_READ_FACTOR,
    ANTHROPIC_CACHE_WRITE_FACTOR,
    ClearingBreakEven,
    CompactionSimulation,
    clearing_break_even,
    simulate_compaction,
)

__all__ = ["clearing_cmd", "compaction_cmd", "simulate_app"]

simulate_app = typer.Typer(
    help="Simulate what context management costs in input tokens.", no_args_is_help=True
)

WriteFactorOpt = Annotated[
    float,
    typer.Option(help="Cache write price / base input price (Anthropic 5-minute TTL: 1.25)."),
]


@simulate_app.command("compaction")
def compaction_cmd(
    start_tokens: Annotated[int, typer.Option(help="Context of the first call (tokens).")],
    growth: Annotated[int, typer.Option(help="Tokens the context grows by after each call.")],
    calls: Annotated[
        int, typer.Option(help="Number of model calls in the session (at most 10,000,000).")
    ],
    summary_tokens: Annotated[int, typer.Option(help="Size of a compaction summary (tokens).")],
    trigger: Annotated[int, typer.Option(help="Compact when a call's input would exceed this.")] = (
        150_000
    ),
    prefix_tokens: Annotated[
        int | None,
        typer.Option(help="Prefix compaction keeps verbatim (default: --start-tokens)."),
    ] = None,
    summary_prompt_tokens: Annotated[
        int, typer.Option(help="Summary instruction each summary call adds.")
    ] = 0,
    summary_output_tokens: Annotated[
        int | None, typer.Option(help="Output of a summary call (default: --summary-tokens).")
    ] = None,
    cache_read_factor: Annotated[
        float | None,
        typer.Option(help="Cache read price / base input price (Anthropic: 0.1); enables costs."),
    ] = None,
    cache_write_factor: WriteFactorOpt = ANTHROPIC_CACHE_WRITE_FACTOR,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Cumulative input tokens of a growing session with and without auto-compaction."""

    def run() -> CompactionSimulation:
        return simulate_compaction(
            start_tokens=start_tokens,
            growth=growth,
            calls=calls,
            summary_tokens=summary_tokens,
            trigger=trigger,
            prefix_tokens=prefix_tokens,
            summary_prompt_tokens=summary_prompt_tokens,
            summary_output_tokens=summary_output_tokens,
            cache_read_factor=cache_read_factor,
            cache_write_factor=cache_write_factor,
        )

    sim = _guard(run)
    if as_json:
        _print_json(sim.to_dict())
        return
    console, buf = _buffered_console()
    table = _table(f"{sim.calls} calls, +{sim.growth:,} tokens a call, trigger {sim.trigger:,}")
    _text_col(table, "")
    _num_col(table, "input tokens")
    _num_col(table, "peak input")
    _num_col(table, "compactions")
    if sim.cache_with is not None:
        _num_col(table, "cost with cache")
    rows = [
        ("without compaction", sim.without_compaction, sim.peak_without, 0, sim.cache_without),
        ("with compaction", sim.with_compaction, sim.peak_with, sim.compactions, sim.cache_with),
    ]
    for label, tokens, peak, n, cache in rows:
        cells = [label, f"{tokens:,}", f"{peak:,}", str(n)]
        if cache is not None:
            cells.append(f"{cache.cost:,.0f}")
        table.add_row(*cells)
    console.print(table)
    before = ", ".join(str(s.before_call) for s in sim.summary_calls) or "-"
    console.print(
        f"summary calls: {sim.compactions}, {sim.summary_input_tokens:,} input tokens counted in "
        f"(before calls {before}, 0-based); "
        f"compaction saves {sim.saved_tokens:,} tokens ({sim.saved_fraction:.1%})"
    )
    if sim.cache_with is not None:
        console.print(
            f"costs in base-input-token equivalents: cache reads x{sim.cache_read_factor:g}, "
            f"writes x{sim.cache_write_factor:g}"
        )
    _write(buf)


@simulate_app.command("clearing")
def clearing_cmd(
    context_tokens: Annotated[int, typer.Option(help="Context before clearing (tokens).")],
    cleared_tokens: Annotated[int, typer.Option(help="Tokens of tool results cleared.")],
    edit_point_tokens: Annotated[
        int, typer.Option(help="Tokens before the first cleared result (still cached).")
    ],
    cache_read_factor: Annotated[
        float, typer.Option(help="Cache read price / base input price (Anthropic: 0.1).")
    ] = ANTHROPIC_CACHE_READ_FACTOR,
    cache_write_factor: WriteFactorOpt = ANTHROPIC_CACHE_WRITE_FACTOR,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """After how many later calls clearing old tool results pays for its cache miss."""

    def run() -> ClearingBreakEven:
        return clearing_break_even(
            context_tokens=context_tokens,
            cleared_tokens=cleared_tokens,
            edit_point_tokens=edit_point_tokens,
            cache_read_factor=cache_read_factor,
            cache_write_factor=cache_write_factor,
        )

    be = _guard(run)
    if as_json:
        _print_json(be.to_dict())
        return
    if be.calls_to_break_even is None:
        verdict = "never pays: cached tokens cost nothing, so clearing saves nothing"
    elif be.calls_to_break_even == 0:
        verdict = "pays at once"
    else:
        verdict = f"pays after {be.calls_to_break_even} more call(s)"
    console, buf = _buffered_console()  # wrapped at the terminal's width, between words
    console.print(
        Text(
            f"next call: {be.cost_with:,.0f} instead of {be.cost_without:,.0f} "
            f"(miss {be.miss_cost:,.0f}); each later call saves {be.saving_per_call:,.0f}; "
            f"clearing {verdict}"
        )
    )
    _write(buf)
