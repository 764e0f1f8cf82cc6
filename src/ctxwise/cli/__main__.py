"""``python -m ctxwise.cli``: the ``ctxwise`` command."""

from ctxwise.cli import main

main()
