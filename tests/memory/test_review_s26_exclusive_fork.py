"""A child forked inside ``Store.exclusive`` that leaves the block there does not
let the lock go for its parent.

The SQLite lock file was removed by whoever left the block: a forked child that
returned through the ``with`` removed the file its parent still held a lock on, so
the next store to ask made a new file and took the lock while the parent held it
(two holders). The child here is a real second process (``os.fork`` in a child
Python, not in the test process, which may run threads).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._children import child_line, python_child

pytest.importorskip("fcntl", reason="flock: POSIX only")

_FORKING_HOLDER = """
import os, sys
from ctxwise.errors import StoreError
from ctxwise.memory.sqlite import SQLiteStore

path = sys.argv[1]
store = SQLiteStore(path)


def hold() -> str:
    with store.exclusive("job-7"):
        pid = os.fork()
        if pid == 0:
            return "child"  # the child leaves the block: its exit code runs there
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        other = SQLiteStore(path)
        try:
            with other.exclusive("job-7"):
                return "taken twice"
        except StoreError:
            return "refused"
        finally:
            other.close()


result = hold()
if result == "child":
    os._exit(0)
print(result, flush=True)
"""


def test_a_forked_child_leaving_the_block_keeps_the_parents_lock(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with python_child(_FORKING_HOLDER, str(db)) as child:
        line = child_line(child)
        assert child.wait() == 0
    assert line == "refused"
    # the parent let go at the end of its block: the lock file is gone, the lock free
    assert not list(tmp_path.glob("store.db.*.lock"))
