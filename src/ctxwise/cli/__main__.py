"""``python -m ctxwise.cli``: the ``ctxwise`` command."""

from ctxwise.cli import main

if __name__ == "__main__":  # importing the module (a package walk) runs nothing
    main()
