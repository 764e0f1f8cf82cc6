"""Manifests and state files: damage is refused and leaves the run as it was."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxwise.errors import RelayError, RelayStateError
from ctxwise.memory import InMemoryStore, NewItem
from ctxwise.relay import (
    DirectoryRuns,
    ExampleScorer,
    HandoverParser,
    Manifest,
    Relay,
    RunStore,
    StoreRuns,
    Workload,
)
from ctxwise.relay.manifest import check_run_id
from tests.relay.conftest import assert_same_result, small_counting

CHUNKS = 6


def _workload() -> Workload:
    return small_counting(11, chunks=CHUNKS)


def _relay(runs: RunStore | Path) -> Relay:
    return Relay(_workload(), HandoverParser(), runs=runs)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _started(tmp_path: Path, steps: int = 3) -> tuple[DirectoryRuns, Path]:
    runs = DirectoryRuns(tmp_path / "runs")
    _relay(runs).run("job", stop_after=steps)
    return runs, tmp_path / "runs" / "job"


def _state_path(folder: Path) -> Path:
    (state,) = folder.glob("state-*.json")
    return state


def _refused(runs: RunStore, folder: Path, says: str) -> None:
    """Resume is refused with a RelayStateError and the folder is left byte for byte."""
    before = _snapshot(folder)
    with pytest.raises(RelayStateError) as err:
        _relay(runs).resume("job")
    assert says in str(err.value)
    assert err.value.path is not None and "job" in err.value.path
    assert _snapshot(folder) == before


def test_only_one_state_file_stays_in_a_run_folder(tmp_path: Path) -> None:
    runs = DirectoryRuns(tmp_path)
    relay = _relay(runs)
    relay.run("job", stop_after=1)
    names = []
    for _ in range(CHUNKS):
        names.append(sorted(p.name for p in (tmp_path / "job").glob("state-*.json")))
        relay.resume("job", stop_after=1)
    assert all(len(n) == 1 for n in names)
    assert len({n[0] for n in names}) == CHUNKS  # a new name at every step
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == [
        "manifest.json",
        f"state-{CHUNKS:06d}.json",
    ]


def test_only_one_state_item_stays_in_a_store_namespace() -> None:
    store = InMemoryStore()
    relay = _relay(StoreRuns(store, prefix=("relay", "test")))
    relay.run("job", stop_after=4)
    ns = ("relay", "test", "job")
    ids = sorted(i.id for i in store.recent(ns, 100))
    assert ids == ["manifest", "state-000004"]


def test_a_tampered_state_file_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    state = _state_path(folder)
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x01
    state.write_bytes(bytes(data))
    _refused(runs, folder, "does not match the hash")


def test_a_state_file_cut_short_is_refused(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    state = _state_path(folder)
    state.write_bytes(state.read_bytes()[:-10])
    _refused(runs, folder, "does not match the hash")


def test_a_manifest_that_is_not_json_is_refused(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    (folder / "manifest.json").write_text("{ half a manif")
    _refused(runs, folder, "the manifest is damaged")


def test_a_manifest_with_a_bad_field_is_refused(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    raw = json.loads((folder / "manifest.json").read_text())
    raw["state"]["sha256"] = "not-a-hash"
    (folder / "manifest.json").write_text(json.dumps(raw))
    _refused(runs, folder, "the manifest is damaged")


def test_a_manifest_naming_a_missing_state_file_is_refused(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    _state_path(folder).unlink()
    _refused(runs, folder, "missing")


def test_a_manifest_of_another_run_is_refused(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    raw = json.loads((folder / "manifest.json").read_text())
    raw["run_id"] = "other"
    (folder / "manifest.json").write_text(json.dumps(raw, indent=2))
    _refused(runs, folder, "for run 'other'")


def _rehash(folder: Path, state: bytes) -> None:
    """Write ``state`` as the live state file and make the manifest's hash match."""
    raw = json.loads((folder / "manifest.json").read_text())
    (folder / raw["state"]["name"]).write_bytes(state)
    raw["state"]["sha256"] = hashlib.sha256(state).hexdigest()
    raw["state"]["bytes"] = len(state)
    (folder / "manifest.json").write_text(json.dumps(raw, indent=2))


def test_a_state_of_another_step_is_refused_even_with_a_matching_hash(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path, steps=2)
    older = _state_path(folder).read_bytes()
    _relay(runs).resume("job", stop_after=1)
    _rehash(folder, older)
    _refused(runs, folder, "the state is of step 1, the manifest of step 2")


def test_a_state_that_does_not_parse_is_refused_even_with_a_matching_hash(
    tmp_path: Path,
) -> None:
    runs, folder = _started(tmp_path)
    state = json.loads(_state_path(folder).read_bytes())
    del state["lines"]
    _rehash(folder, json.dumps(state).encode())
    _refused(runs, folder, "does not parse")


def test_a_repaired_run_resumes(tmp_path: Path) -> None:
    runs, folder = _started(tmp_path)
    state = _state_path(folder)
    good = state.read_bytes()
    state.write_bytes(good + b" ")
    with pytest.raises(RelayStateError):
        _relay(runs).resume("job")
    state.write_bytes(good)
    resumed = _relay(runs).resume("job")
    assert_same_result(resumed, _relay(tmp_path / "fresh").run("job"))


def test_a_tampered_state_item_in_a_store_is_refused_and_nothing_changes() -> None:
    store = InMemoryStore()
    runs = StoreRuns(store)
    _relay(runs).run("job", stop_after=3)
    ns = ("relay", "job")
    item = store.get(ns, "state-000003")
    assert item is not None
    tampered = item.text.replace('"step": 2', '"step": 1')
    assert tampered != item.text
    store.put(ns, NewItem(tampered, {}, id=item.id))
    before = {i.id: i.text for i in store.recent(ns, 100)}
    with pytest.raises(RelayStateError) as err:
        _relay(runs).resume("job")
    assert "does not match the hash" in str(err.value)
    assert err.value.path is not None and "relay/job" in err.value.path
    assert {i.id: i.text for i in store.recent(ns, 100)} == before


def test_a_store_manifest_that_is_not_json_is_refused() -> None:
    store = InMemoryStore()
    runs = StoreRuns(store)
    _relay(runs).run("job", stop_after=1)
    store.put(("relay", "job"), NewItem("garbage", {}, id="manifest"))
    with pytest.raises(RelayStateError):
        _relay(runs).resume("job")


@pytest.mark.parametrize("bad", ["a/b", "/abs", "..", "../x", "x/../y", "a..b", ""])
def test_unsafe_run_ids_are_refused_by_every_entry_point(tmp_path: Path, bad: str) -> None:
    with pytest.raises(RelayError) as err:
        check_run_id(bad)
    assert err.value.reason == "run"
    stores: list[RunStore] = [DirectoryRuns(tmp_path / "runs"), StoreRuns(InMemoryStore())]
    for runs in stores:
        with pytest.raises(RelayError):
            runs.exists(bad)
        with pytest.raises(RelayError):
            runs.manifest(bad)
        with pytest.raises(RelayError):
            runs.load(bad)
        with pytest.raises(RelayError):
            runs.attach(bad, "spec.json", b"{}")
        with pytest.raises(RelayError):
            runs.attachment(bad, "spec.json")
    assert not (tmp_path / "runs").exists()


def test_safe_run_ids_pass() -> None:
    for good in ("a", "run-1", "log_2.v3", "A" * 128):
        assert check_run_id(good) == good


@pytest.mark.parametrize("make", [lambda p: DirectoryRuns(p), lambda p: StoreRuns(InMemoryStore())])
def test_attachments_round_trip_and_bad_names_are_refused(
    tmp_path: Path, make: Callable[[Path], RunStore]
) -> None:
    runs = make(tmp_path)
    assert runs.attachment("job", "spec.json") is None
    runs.attach("job", "spec.json", b'{"workload": "log"}')
    assert runs.attachment("job", "spec.json") == b'{"workload": "log"}'
    assert not runs.exists("job")  # an attachment is not a run
    for name in ("manifest.json", "../x.json", "Spec.json", "spec.txt", "state/1.json"):
        with pytest.raises(RelayError):
            runs.attach("job", name, b"{}")


def test_manifest_model_refuses_unknown_keys() -> None:
    m = Manifest(run_id="r", job="0" * 64, phase="running", step=-1, steps=1, agents={})
    data = json.loads(m.model_dump_json())
    data["extra"] = 1
    with pytest.raises(ValueError):
        Manifest.model_validate(data)


def test_resume_with_other_scorer_or_counter_settings_is_refused(tmp_path: Path) -> None:
    from ctxwise.tokens import CharCounter

    w = _workload()

    def scorer(ngram: int) -> ExampleScorer:
        return ExampleScorer(
            w.examples.keep, w.examples.skip, instruction=w.instruction, ngram=ngram
        )

    base = Relay(w, HandoverParser(), runs=tmp_path, scorer=scorer(2)).fingerprint()
    other_ngram = Relay(w, HandoverParser(), runs=tmp_path, scorer=scorer(3)).fingerprint()
    other_margin = Relay(
        w, HandoverParser(), runs=tmp_path, counter=CharCounter(safety_margin=0.5)
    ).fingerprint()
    assert base != other_ngram
    assert base != other_margin
