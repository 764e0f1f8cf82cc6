"""The inspector's pictures as inline SVG, drawn on the server from the trace's numbers.

Each shape carries its numbers as ``data-`` attributes (what a test or a reader's
own script reads back) and a ``<title>`` (the tooltip). The SVGs scale to their
box (``viewBox``, the box's full width), so the pages never scroll sideways.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from markupsafe import Markup

from ctxwise.server.inspect._views import Part, TimelineRow

__all__ = ["bar_svg", "timeline_svg"]


def _n(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def bar_svg(
    parts: Sequence[Part],
    *,
    total: int,
    available: int,
    stable_prefix: int,
    cache_read: int | None,
) -> Markup:
    """One stacked bar of ``parts`` against ``available`` (the scale is the larger
    of the two), with the cache-stable prefix and the cached read marked."""
    width = 1000.0
    scale = width / max(available, total, 1)
    out = [
        f'<svg class="bar" viewBox="0 0 {_n(width)} 40" preserveAspectRatio="none" '
        f'role="img" aria-label="tokens by part" data-total="{total}" '
        f'data-available="{available}">'
        f'<rect class="room" x="0" y="6" width="{_n(available * scale)}" height="28"/>'
    ]
    x = 0.0
    for p in parts:
        if p.tokens <= 0:
            continue
        w = p.tokens * scale
        out.append(
            f'<rect class="part part-{p.key}" data-part="{p.key}" data-tokens="{p.tokens}" '
            f'x="{_n(x)}" y="6" width="{_n(w)}" height="28">'
            f"<title>{escape(p.label)}: {p.tokens:,} tokens</title></rect>"
        )
        x += w
    marks = [("stable", stable_prefix, "cache-stable prefix")]
    if cache_read is not None:
        marks.append(("cached", cache_read, "read from the prompt cache"))
    for cls, at, label in marks:
        if at > 0:
            out.append(
                f'<line class="mark mark-{cls}" data-tokens="{at}" x1="{_n(at * scale)}" '
                f'x2="{_n(at * scale)}" y1="0" y2="40"><title>{label}: {at:,} tokens'
                "</title></line>"
            )
    out.append(
        f'<line class="mark mark-available" x1="{_n(available * scale)}" '
        f'x2="{_n(available * scale)}" y1="0" y2="40"><title>available: {available:,} tokens'
        "</title></line></svg>"
    )
    return Markup("".join(out))


def timeline_svg(rows: Sequence[TimelineRow], link: Callable[[int], str]) -> Markup:
    """Three panels over the turns: tokens sent (bars) against the full history
    and the room available (lines), with markers where clearing and compaction
    ran; the prompt cache's reads and writes; the input's cost."""
    if not rows:
        return Markup("")
    W, left, right = 1000.0, 64.0, 10.0
    plot = W - left - right
    slot = plot / len(rows)
    bar = max(1.0, slot * 0.7)
    top_tokens = max(max(r.sent, r.full or 0, r.available) for r in rows) or 1
    top_cache = max(r.cache_read + r.cache_write + r.uncached for r in rows) or 1
    costs = [r.cost or 0.0 for r in rows]
    top_cost = max(costs) or 1.0
    panels = {"tokens": (24.0, 180.0), "cache": (236.0, 90.0), "cost": (360.0, 70.0)}
    height = 460.0
    out = [
        f'<svg class="timeline" viewBox="0 0 {_n(W)} {_n(height)}" role="img" '
        f'aria-label="tokens, cache and cost by turn" data-turns="{len(rows)}">'
    ]

    def y_of(panel: str, value: float, top: float) -> float:
        y0, h = panels[panel]
        return y0 + h - (value / top) * h

    def x_of(i: int) -> float:
        return left + i * slot + (slot - bar) / 2

    titles = {
        "tokens": f"tokens (max {top_tokens:,})",
        "cache": f"prompt cache (max {top_cache:,})",
        "cost": f"input cost, USD (max {top_cost:.4f})",
    }
    for name, (y0, h) in panels.items():
        out.append(
            f'<text class="axis" x="{_n(left)}" y="{_n(y0 - 6)}">{escape(titles[name])}</text>'
            f'<line class="base" x1="{_n(left)}" x2="{_n(W - right)}" y1="{_n(y0 + h)}" '
            f'y2="{_n(y0 + h)}"/>'
        )
    for i, r in enumerate(rows):
        x = x_of(i)
        y = y_of("tokens", r.sent, top_tokens)
        tip = f"turn {r.turn}: {r.sent:,} tokens sent" + (
            f", full history {r.full:,}" if r.full is not None else ""
        )
        out.append(
            f'<a href="{escape(link(r.turn))}"><rect class="sent" data-turn="{r.turn}" '
            f'data-sent="{r.sent}" x="{_n(x)}" y="{_n(y)}" width="{_n(bar)}" '
            f'height="{_n(y_of("tokens", 0, top_tokens) - y)}"><title>{escape(tip)}</title>'
            "</rect></a>"
        )
        base = y_of("cache", 0, top_cache)
        for cls, value in (
            ("cache-read", r.cache_read),
            ("cache-write", r.cache_write),
            ("uncached", r.uncached),
        ):
            if value <= 0:
                continue
            h = value / top_cache * panels["cache"][1]
            out.append(
                f'<rect class="{cls}" data-turn="{r.turn}" data-tokens="{value}" x="{_n(x)}" '
                f'y="{_n(base - h)}" width="{_n(bar)}" height="{_n(h)}"><title>turn {r.turn}: '
                f"{cls.replace('-', ' ')} {value:,}</title></rect>"
            )
            base -= h
        if r.cost is not None:
            y = y_of("cost", r.cost, top_cost)
            out.append(
                f'<rect class="cost" data-turn="{r.turn}" data-usd="{r.cost}" x="{_n(x)}" '
                f'y="{_n(y)}" width="{_n(bar)}" height="{_n(y_of("cost", 0, top_cost) - y)}">'
                f"<title>turn {r.turn}: ${r.cost:.4f}</title></rect>"
            )
        cx = x + bar / 2
        if r.cleared is not None:
            out.append(
                f'<path class="mark-clear" data-turn="{r.turn}" '
                f'd="M{_n(cx - 5)} 6 L{_n(cx + 5)} 6 L{_n(cx)} 16 Z"><title>turn {r.turn}: '
                f"cleared {r.cleared} tool use(s)</title></path>"
            )
        if r.compacted is not None:
            out.append(
                f'<path class="mark-compact" data-turn="{r.turn}" '
                f'd="M{_n(cx)} 4 L{_n(cx + 6)} 11 L{_n(cx)} 18 L{_n(cx - 6)} 11 Z"><title>turn '
                f"{r.turn}: compacted {r.compacted} message(s)</title></path>"
            )
    for cls, values in (
        ("full", [r.full for r in rows]),
        ("available", [r.available for r in rows]),
    ):
        points = [
            f"{_n(x_of(i) + bar / 2)},{_n(y_of('tokens', v, top_tokens))}"
            for i, v in enumerate(values)
            if v is not None
        ]
        if len(points) == 1:
            points.append(points[0])
        if points:
            out.append(f'<polyline class="line-{cls}" points="{" ".join(points)}"/>')
    first, last = rows[0].turn, rows[-1].turn
    out.append(
        f'<text class="axis" x="{_n(left)}" y="{_n(height - 4)}">turn {first}</text>'
        f'<text class="axis end" x="{_n(W - right)}" y="{_n(height - 4)}">turn {last}</text>'
        "</svg>"
    )
    return Markup("".join(out))
