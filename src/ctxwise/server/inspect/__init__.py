"""The web inspector (extra ``server``): what the model saw on every turn, and why.

Served at ``/inspect`` by ``ctxwise serve`` (each tenant sees its own sessions,
behind the login form) and by ``ctxwise inspect-ui --store …`` over one local
store, read-only and without keys (:mod:`ctxwise.server.inspect.app`). Its pages:

- the sessions;
- a session's timeline: tokens sent against the full history on every turn, the
  prompt cache's reads and writes, the input's cost, and where clearing and
  compaction ran;
- a turn: its tokens by part against the budget with the cached prefix marked, the
  route decision with its scores, and the ledger as a table (filter it by fate,
  tool and text; open any pointer to its original);
- the diff between two turns' requests, and one original.

Every number comes from the turn's :class:`~ctxwise.trace.Trace` and the ledger
(:mod:`ctxwise.ledger`); the inspector only reads them.

Why server-rendered HTML (Jinja2, autoescaped) with a little plain JavaScript,
rather than a bundled front end: there is no build step and no npm toolchain in a
Python package, the pages are exactly what the server computed from the trace
(the pictures are inline SVG drawn on the server), the templates, stylesheet and
script ship inside the package (no CDN: it works offline), and every page reads
with JavaScript off; only the ledger table's filters need it.
"""

from ctxwise.server.inspect.app import (
    COOKIE,
    Access,
    ServiceSource,
    Source,
    StoreSource,
    create_inspector,
    local_app,
)

__all__ = [
    "COOKIE",
    "Access",
    "ServiceSource",
    "Source",
    "StoreSource",
    "create_inspector",
    "local_app",
]
