from __future__ import annotations

import json
from pathlib import Path

from ctxwise import SQLiteStore
from ctxwise._northwind import COMPACTION_STEP, RULE, SUPERVISOR_STEP, run_northwind
from ctxwise.formats import anthropic
from ctxwise.policy import RequireFact


def test_rule_survives_compaction_and_is_enforced() -> None:
    run = run_northwind()
    by_step = {s.step: s for s in run.steps}
    # step 12: the supervisor's sentence became a standing rule and a gate rule
    assert RULE in by_step[SUPERVISOR_STEP].event
    assert [r.text for r in run.rules] == [RULE]
    (rule,) = list(run.gate)
    assert isinstance(rule, RequireFact) and rule.text == RULE
    # step 24: compaction happened, archived first, and the window shrank
    assert by_step[COMPACTION_STEP].actor == "ctxwise"
    assert run.compaction.compacted and run.compaction.archive_id
    assert run.compaction.tokens_after < run.compaction.tokens_before / 2
    assert run.store.count(("ctxwise", "compaction-archive")) > 0
    # the rule is in the system part, verbatim; the summary does not restate it,
    # except inside the supervisor's own message, which it keeps verbatim
    request = anthropic.encode_request(run.compaction.transcript)
    assert RULE in json.dumps(request["system"])
    summarized = [ln for ln in run.compaction.summary.splitlines() if " user] " not in ln]
    assert RULE not in "\n".join(summarized)
    assert all(run.rule_in_window)
    # step 25: blocked, the rule as the reason
    assert by_step[25].allowed is False
    assert RULE in run.blocked_reason
    # step 26: the address check ran and passed; step 27: the refund ran
    assert by_step[26].allowed is True and "address_check" in by_step[26].event
    assert by_step[27].allowed is True and "issue_refund" in by_step[27].event
    assert run.facts.get("address_check:4417") is not None
    assert run.transcript.problems("anthropic") == []
    # the blocked call is answered by an error result, so the pair stays valid
    results = [b for m in run.transcript.messages for b in m.tool_results]
    assert any(b.is_error and RULE in str(b.content) for b in results)


def test_archive_goes_to_a_real_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "northwind.db"
    with SQLiteStore(path) as store:
        run = run_northwind(store=store)
        # every message of the transcript that was compacted, one item each
        archived = store.count(("ctxwise", "compaction-archive"))
        assert archived == run.messages_before_compaction


def test_run_is_deterministic() -> None:
    assert run_northwind().to_dict() == run_northwind().to_dict()
