"""A child forked inside ``Store.exclusive`` that leaves the block there does not
let the lock go for its parent.

SQLite: the lock file was removed by whoever left the block, so a forked child
that returned through the ``with`` removed the file its parent still held a lock
on, and the next store to ask made a new file and took the lock (two holders).
PostgreSQL: the child sent ``pg_advisory_unlock`` over the connection it shares
with its parent, which let the parent's session lock go. The child here is a real
second process (``os.fork`` in a child Python, not in the test process, which may
run threads).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._children import child_line, python_child
from tests._stores import fresh_schema, postgres_dsn

pytest.importorskip("fcntl", reason="flock and fork: POSIX only")

_FORKING_HOLDER = """
import os, sys
from ctxwise.errors import StoreError

kind, where, schema = sys.argv[1:]


def open_store():
    if kind == "sqlite":
        from ctxwise.memory.sqlite import SQLiteStore
        return SQLiteStore(where)
    from ctxwise.memory.postgres import PostgresStore
    return PostgresStore(where, dim=8, schema=schema)


store = open_store()


def hold() -> str:
    with store.exclusive("job-7"):
        pid = os.fork()
        if pid == 0:
            return "child"  # the child leaves the block: its exit code runs there
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        other = open_store()
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
with store.exclusive("job-7"):  # the parent let it go: free again
    print("free", flush=True)
if kind == "postgres":
    store.drop()
store.close()
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_forked_child_leaving_the_block_keeps_the_parents_lock(kind: str, tmp_path: Path) -> None:
    where = str(tmp_path / "store.db") if kind == "sqlite" else postgres_dsn()
    with python_child(_FORKING_HOLDER, kind, where, fresh_schema()) as child:
        lines = [child_line(child), child_line(child)]
        assert child.wait() == 0
    assert lines == ["refused", "free"]
    assert not list(tmp_path.glob("store.db.*.lock"))  # SQLite: removed when let go
