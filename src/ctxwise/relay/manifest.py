"""Where a relay run's state lives between steps: a manifest and its state files.

After every step the run commits, atomically, a state file (everything the next
step needs: kept lines, table, notes, the record of drops and rejections) and a
:class:`Manifest` naming it with its SHA-256. A crash at any point leaves either
the previous commit or the new one, never a mix; :meth:`RunStore.load` checks
the hashes before a run resumes.

Two backends: :class:`DirectoryRuns` (a folder per run) and :class:`StoreRuns`
(a namespace per run in a :class:`~ctxwise.memory.Store`, committed with one
atomic ``put_many``).

While a relay runs a run, :meth:`RunStore.hold` keeps every other process (and
every other relay in this one) off it: a second ``run`` or ``resume`` of the same
run is refused with :class:`~ctxwise.errors.RelayError` (``"run"``). Every lock is
one the operating system or the database server drops when its holder dies, so a
killed run never blocks its resume:

- :class:`DirectoryRuns`: an exclusive ``flock`` on the run's folder;
- :class:`StoreRuns`: the store's own lock, :meth:`Store.exclusive
  <ctxwise.memory.Store.exclusive>` (a lock file beside a SQLite database, a
  session advisory lock on PostgreSQL, this process only for an in-memory store),
  named after the run's namespace; a third-party store that does not override it
  (or an object without it) is held against this process only.

On Windows (no ``flock``) folders and SQLite files are held against this process's
other relays only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

try:
    import fcntl
except ImportError:  # Windows: runs are not locked
    fcntl = None  # type: ignore[assignment]

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxwise._io import replace_file
from ctxwise._schema import describe
from ctxwise.errors import RelayError, RelayStateError
from ctxwise.memory.store import NewItem, Store

__all__ = [
    "MANIFEST_FORMAT",
    "AgentStatus",
    "DirectoryRuns",
    "Manifest",
    "RunStore",
    "StateFile",
    "StoreRuns",
    "check_run_id",
]

MANIFEST_FORMAT = "ctxwise-relay-manifest"
_PART_CHARS = 500_000
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is a safe name (letters, digits, ``._-``; at most 128), else
    a :class:`RelayError`."""
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id) or ".." in run_id:
        raise RelayError("run", f"run id {run_id!r} must be 1-128 letters, digits, '.', '_' or '-'")
    return run_id


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StateFile(_Model):
    """A state file: its name in the run folder (or, less ``.json``, its item id) and
    its hash. Only a name :meth:`RunStore.commit` gives: a damaged manifest cannot
    point outside the run."""

    name: str = Field(pattern=r"^state-[0-9]{6,}\.json$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class AgentStatus(_Model):
    """One part of the run (``scorer``, ``step``): its status after the last
    committed step, the step it last finished, and its count of failed attempts."""

    status: Literal["idle", "ok", "rejected", "done"]
    last_step: int = Field(ge=-1)
    failures: int = Field(default=0, ge=0)


class Manifest(_Model):
    """The run's commit record: which step is the last completed one (``step``, −1
    before the first), the job it belongs to, and the state file with its hash."""

    format: Literal["ctxwise-relay-manifest"] = "ctxwise-relay-manifest"
    version: Literal[1] = 1
    run_id: str
    job: str = Field(pattern=r"^[0-9a-f]{64}$")
    phase: Literal["running", "done"]
    step: int = Field(ge=-1)
    steps: int = Field(ge=1)
    agents: dict[str, AgentStatus]
    state: StateFile | None = None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _attachment_name(name: str) -> str:
    if not re.match(r"^[a-z][a-z0-9_-]{0,31}\.json$", name) or name == "manifest.json":
        raise RelayError("run", f"attachment name {name!r} must be like 'spec.json'")
    return name


def _state_name(step: int) -> str:
    return f"state-{step + 1:06d}.json"


class RunStore(ABC):
    """Keeps runs: a manifest and its state per run id."""

    @abstractmethod
    def _read_manifest(self, run_id: str) -> bytes | None:
        """The manifest's bytes, or None when the run does not exist."""

    @abstractmethod
    def _read_state(self, run_id: str, name: str) -> bytes | None:
        """A state file's bytes, or None when it is missing."""

    @abstractmethod
    def _commit(self, run_id: str, name: str, state: bytes, manifest: bytes) -> None:
        """Write ``state`` as ``name``, then the manifest, so a crash leaves the old
        commit or the new one; then remove the run's other state files."""

    @abstractmethod
    def where(self, run_id: str) -> str:
        """Where the run is kept, for messages."""

    @abstractmethod
    def attach(self, run_id: str, name: str, data: bytes) -> None:
        """Keep ``data`` as ``name`` with the run (e.g. the spec it was started from)."""

    @abstractmethod
    def attachment(self, run_id: str, name: str) -> bytes | None:
        """What :meth:`attach` kept as ``name``, or None."""

    @contextlib.contextmanager
    def hold(self, run_id: str, *, create: bool = False) -> Iterator[None]:
        """Hold ``run_id`` while a :class:`~ctxwise.relay.Relay` runs it (``create``:
        the run is being started). This base does nothing; :class:`DirectoryRuns`
        and :class:`StoreRuns` take a lock a second holder is refused
        (:class:`RelayError` ``"run"``, see the module docstring)."""
        yield

    def exists(self, run_id: str) -> bool:
        """Whether a manifest exists for ``run_id``."""
        return self._read_manifest(check_run_id(run_id)) is not None

    def commit(self, manifest: Manifest, state: bytes) -> Manifest:
        """Commit ``state`` for ``manifest.step`` and return the manifest that names it."""
        name = _state_name(manifest.step)
        final = manifest.model_copy(
            update={"state": StateFile(name=name, sha256=_sha(state), bytes=len(state))}
        )
        self._commit(manifest.run_id, name, state, final.model_dump_json(indent=2).encode())
        return final

    def manifest(self, run_id: str) -> Manifest:
        """The run's manifest.

        Raises:
            RelayError: (``"run"``) no run has this id.
            RelayStateError: the manifest does not parse.
        """
        raw = self._read_manifest(check_run_id(run_id))
        if raw is None:
            raise RelayError("run", f"no run {run_id!r} in {self.where(run_id)}")
        try:
            found = Manifest.model_validate_json(raw)
        except ValidationError as exc:
            raise RelayStateError(
                f"the manifest is damaged ({describe(exc)})", path=self.where(run_id)
            ) from None
        if found.run_id != run_id:
            raise RelayStateError(
                f"the manifest is for run {found.run_id!r}", path=self.where(run_id)
            )
        return found

    def load(self, run_id: str) -> tuple[Manifest, bytes | None]:
        """The manifest and its state file, checked against the recorded hash.

        Raises:
            RelayError: no run has this id.
            RelayStateError: the manifest is damaged, or the state file is missing or
                does not match its hash.
        """
        manifest = self.manifest(run_id)
        if manifest.state is None:
            return manifest, None
        data = self._read_state(run_id, manifest.state.name)
        where = f"{self.where(run_id)}/{manifest.state.name}"
        if data is None:
            raise RelayStateError("the state file the manifest names is missing", path=where)
        if len(data) != manifest.state.bytes or _sha(data) != manifest.state.sha256:
            raise RelayStateError(
                "the state file does not match the hash in the manifest", path=where
            )
        return manifest, data


class DirectoryRuns(RunStore):
    """Runs as folders: ``ROOT/RUN_ID/manifest.json`` and ``ROOT/RUN_ID/state-NNNNNN.json``.
    Every file is written atomically (temporary file, fsync, rename)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def where(self, run_id: str) -> str:
        return str(self.root / run_id)

    @contextlib.contextmanager
    def hold(self, run_id: str, *, create: bool = False) -> Iterator[None]:
        # an exclusive flock on the run's folder itself (no lock file to leave
        # behind), released when the descriptor closes, by a crash too: two
        # processes committing one run could delete the state file the other's
        # manifest is about to name
        folder = self.root / check_run_id(run_id)
        try:
            if create:
                folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder, os.O_RDONLY)
        except FileNotFoundError:
            yield  # no run to hold: reading its manifest says so
            return
        except OSError as exc:
            raise RelayStateError(
                f"cannot open ({exc.strerror or exc})", path=str(folder)
            ) from None
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RelayError(
                        "run", f"run {run_id!r} in {folder} is in use by another process"
                    ) from None
            yield
        finally:
            os.close(fd)

    def _read(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RelayStateError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None

    def _read_manifest(self, run_id: str) -> bytes | None:
        return self._read(self.root / run_id / "manifest.json")

    def _read_state(self, run_id: str, name: str) -> bytes | None:
        return self._read(self.root / run_id / name)

    def attach(self, run_id: str, name: str, data: bytes) -> None:
        folder = self.root / check_run_id(run_id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            replace_file(folder / _attachment_name(name), data)
        except OSError as exc:
            raise RelayStateError(
                f"cannot write ({exc.strerror or exc})", path=str(folder)
            ) from None

    def attachment(self, run_id: str, name: str) -> bytes | None:
        return self._read(self.root / check_run_id(run_id) / _attachment_name(name))

    def _commit(self, run_id: str, name: str, state: bytes, manifest: bytes) -> None:
        folder = self.root / run_id
        try:
            folder.mkdir(parents=True, exist_ok=True)
            replace_file(folder / name, state)
            replace_file(folder / "manifest.json", manifest)
        except OSError as exc:
            raise RelayStateError(
                f"cannot write ({exc.strerror or exc})", path=str(folder)
            ) from None
        for old in folder.glob("state-*.json"):
            if old.name != name:
                # a leftover is harmless: the manifest names the live file
                with contextlib.suppress(OSError):
                    os.unlink(old)


# (id of the store, namespace) of every run a StoreRuns of this process holds: two
# relays of one process sharing a store object meet here (and are told so), before
# the store's lock, which refuses every other holder; for a store object without
# Store.exclusive this is the whole lock
_HELD: set[tuple[int, tuple[str, ...]]] = set()
_HELD_LOCK = threading.Lock()


class StoreRuns(RunStore):
    """Runs in a :class:`~ctxwise.memory.Store`: namespace ``(*prefix, RUN_ID)`` holds
    the items ``manifest`` and ``state-NNNNNN``, written by one ``put_many``.

    :meth:`hold` refuses a second holder of a run as :class:`DirectoryRuns` does
    (two committing one run could delete the state the other's manifest names),
    with the store's lock :meth:`Store.exclusive <ctxwise.memory.Store.exclusive>`
    named ``ctxwise-relay`` and the run's namespace (a lock file beside a SQLite
    database, a session advisory lock on PostgreSQL; see the module docstring). A
    holder that dies drops its lock with it. A store that does not override
    ``exclusive`` (a third-party backend) is held against this process only, as is
    an object passed as a store that lacks the method."""

    def __init__(self, store: Store, prefix: Sequence[str] = ("relay",)) -> None:
        self.store = store
        self.prefix = tuple(prefix)

    def where(self, run_id: str) -> str:
        return "store namespace " + "/".join((*self.prefix, run_id))

    def _ns(self, run_id: str) -> tuple[str, ...]:
        return (*self.prefix, run_id)

    @contextlib.contextmanager
    def hold(self, run_id: str, *, create: bool = False) -> Iterator[None]:
        ns = self._ns(check_run_id(run_id))
        key = (id(self.store), ns)
        with _HELD_LOCK:
            if key in _HELD:
                raise RelayError(
                    "run", f"run {run_id!r} in {self.where(run_id)} is in use by another relay"
                )
            _HELD.add(key)
        try:
            with self._store_lock(run_id, ns):
                yield
        finally:
            with _HELD_LOCK:
                _HELD.discard(key)

    def _busy(self, run_id: str) -> RelayError:
        return RelayError(
            "run", f"run {run_id!r} in {self.where(run_id)} is in use by another process"
        )

    def _store_lock(
        self, run_id: str, ns: tuple[str, ...]
    ) -> contextlib.AbstractContextManager[None]:
        exclusive = getattr(self.store, "exclusive", None)
        if exclusive is None:  # not a Store (written before exclusive): _HELD only
            return contextlib.nullcontext()
        name = json.dumps(["ctxwise-relay", *ns])
        lock: contextlib.AbstractContextManager[None] = exclusive(
            name, busy=lambda: self._busy(run_id)
        )
        return lock

    def _get(self, run_id: str, item_id: str) -> bytes | None:
        found = self.store.get(self._ns(run_id), item_id)
        return None if found is None else found.text.encode("utf-8")

    def _read_manifest(self, run_id: str) -> bytes | None:
        return self._get(run_id, "manifest")

    def attach(self, run_id: str, name: str, data: bytes) -> None:
        item = _attachment_name(name)
        self.store.put(
            self._ns(check_run_id(run_id)),
            NewItem(
                data.decode("utf-8"), {"kind": "relay"}, id=item, index_text="relay attachment"
            ),
        )

    def attachment(self, run_id: str, name: str) -> bytes | None:
        return self._get(check_run_id(run_id), _attachment_name(name))

    def _read_state(self, run_id: str, name: str) -> bytes | None:
        ns = self._ns(run_id)
        head = self.store.get(ns, name.removesuffix(".json"))
        if head is None:
            return None
        parts = int(head.metadata.get("parts", 1))
        rest = [f"{head.id}.{i}" for i in range(1, parts)]
        found = {item.id: item.text for item in self.store.get_many(ns, rest)} if rest else {}
        if len(found) != len(rest):
            return None
        return "".join([head.text, *(found[r] for r in rest)]).encode("utf-8")

    def _commit(self, run_id: str, name: str, state: bytes, manifest: bytes) -> None:
        ns = self._ns(run_id)
        item = name.removesuffix(".json")
        text = state.decode("utf-8")
        # a store item holds at most MAX_TEXT_CHARS: a large state goes in parts,
        # all written by the one atomic put_many with the manifest
        parts = [text[i : i + _PART_CHARS] for i in range(0, len(text), _PART_CHARS)] or [""]
        items = [
            NewItem(
                part,
                {"kind": "relay", "parts": len(parts)} if n == 0 else {"kind": "relay"},
                id=item if n == 0 else f"{item}.{n}",
                index_text="relay state",
            )
            for n, part in enumerate(parts)
        ]
        items.append(
            NewItem(
                manifest.decode("utf-8"),
                {"kind": "relay"},
                id="manifest",
                index_text="relay manifest",
            )
        )
        self.store.put_many(ns, items)
        keep = {i.id for i in items}
        stale = [
            i.id
            for i in self.store.recent(ns, self.store.count(ns))
            if i.id.startswith("state-") and i.id not in keep
        ]
        if stale:
            self.store.delete(ns, stale)
