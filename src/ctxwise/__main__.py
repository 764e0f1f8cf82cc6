"""``python -m ctxwise``: the ``ctxwise`` command (as ``python -m ctxwise.cli``)."""

from ctxwise.cli import main

if __name__ == "__main__":  # importing the module (a package walk) runs nothing
    main()
