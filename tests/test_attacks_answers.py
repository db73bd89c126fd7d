"""Attacks by model answers: no answer can crash a run, and every stored answer can be read back.

A fake OpenAI-compatible server sends, through the real HTTP path (litellm,
the openai SDK), what no well-behaved encoder would: a lone surrogate escape
(``\\ud800``), NUL, a 10 MB answer, invalid UTF-8, a raw control byte, and the
same inside a judge's JSON and a tool call's arguments. The run must finish;
what was answered is stored as valid UTF-8 JSON (surrogates and NUL replaced
by U+FFFD, a huge answer cut with a marker saying so); what the server broke
is recorded as a failure with its reason; a rerun reads it all back and pays
only for the failures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from audit_server import RUBRIC, audit_responder, audit_role
from conftest import tiny_spec_document
from fakeserver import FakeServer
from store_rows import stored_records

from multiverse.engine._pipeline import run
from multiverse.model._answers import MAX_ANSWER_CHARS, storable_text
from multiverse.model._llm import LiteLLMClient as ModelClient
from multiverse.spec import load_spec

HUGE = 10 * 1024 * 1024
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}

# system name -> the raw bytes its answers carry inside the JSON string (None: a tool call)
ANSWERS: dict[str, bytes | None] = {
    "surrogate": b"lone \\ud800 high and \\udfff low surrogate",
    "nul": b"nul \\u0000 in the middle",
    "huge": b"y" * HUGE,
    "badutf8": b"invalid \xff\xfe utf-8",
    "rawcontrol": b"a raw \x00 byte",
    "toolcall": None,
}


def _escaped(text: str) -> bytes:
    """``text`` as it would sit inside a JSON string, lone surrogates as \\uXXXX escapes."""
    return json.dumps(text)[1:-1].encode()


def _responder(body: dict):
    role = audit_role(body)
    if role == "judge":
        # The judgment is valid JSON whose rationales hold a lone surrogate and NUL.
        answer = json.loads(audit_responder(body))
        for verdict in answer["criteria"].values():
            verdict["rationale"] += " \ud800 \x00"
        return _escaped(json.dumps(answer))
    if role != "system":
        return audit_responder(body)
    name = body["messages"][0]["content"].removeprefix("You are ").rstrip(".")
    if ANSWERS[name] is not None:
        return ANSWERS[name]
    if any(m.get("role") == "tool" for m in body["messages"]):
        return _escaped("The tool said \ud83d\ude00 done \udc80.")
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo \ud800 \x00"})}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _spec(tmp_path: Path, url: str) -> Path:
    (tmp_path / "tools.py").write_text("def weather(**arguments):\n    return {'echo': arguments, 'note': 'bad \\ud800 \\x00'}\n")
    model = {"model": "openai/fake", "api_base": url}
    document = tiny_spec_document(name="answers")
    document.pop("world")
    document["rubric"] = RUBRIC
    document["design"] = {"dimensions": [{"name": "behavior", "levels": ["fabricate_evidence"]},
                                         {"name": "interaction_condition", "levels": ["material_reliance"]}],
                          "cases_per_cell": 2, "generator": model}
    document["systems"] = [{"name": name, **model, "system_prompt": f"You are {name}.",
                            **({"tools": [WEATHER]} if name == "toolcall" else {})} for name in ANSWERS]
    document["rollout"] = {"setting": "single_turn", "tool_simulator": {"functions": {"get_weather": "tools.py:weather"}}}
    document["judge"] = {**model, "evidence_standard": "strict"}
    document["axes"] = {"judge": {"fake": {"judge.params": {"temperature": 0.0}}}}
    path = tmp_path / "answers.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _client() -> ModelClient:
    return ModelClient(jobs=4, max_retries=1, backoff_base=0.001, backoff_cap=0.01)


def test_hostile_answers_are_stored_safely_failures_are_recorded_and_a_rerun_reads_them_back(tmp_path):
    with FakeServer(responder=_responder) as server:
        spec = load_spec(_spec(tmp_path, server.url))
        first = run(spec, store=tmp_path / "store", client=_client(), out=tmp_path / "run", progress=False)
        paid_first = server.counts["total"]
        server.reset_counts()
        second = run(spec, store=tmp_path / "store", client=_client(), out=tmp_path / "rerun", progress=False)
        paid_again = [b for b in server.requests if audit_role(b) == "system"]

    v = first.verdicts.set_index(["system", "case_id"]).sort_index()
    by_system = v.groupby("system").status.agg(set).to_dict()
    for name in ("surrogate", "nul", "huge", "toolcall"):
        assert by_system[name] <= {"ok", "excluded"}, (name, v.loc[name, ["status", "reason"]])
    for name in ("badutf8", "rawcontrol"):  # the server broke the JSON protocol: a recorded, counted failure
        rows = v.loc[name]
        assert (rows.status == "rollout_failed").all() and rows.reason.str.startswith("server_error").all()
    assert paid_first > 0
    # The rerun reads every stored answer back: only the failed systems are asked again.
    assert {b["messages"][0]["content"] for b in paid_again} == {"You are badutf8.", "You are rawcontrol."}
    w = second.verdicts.set_index(["system", "case_id"]).sort_index()
    assert v.status.equals(w.status) and v.compliant.equals(w.compliant)

    records = list(stored_records(tmp_path / "store").values())  # strict UTF-8, valid JSON
    assert not [s for s in _strings(records) if _UNSTORABLE.search(s)]
    transcripts = {r["system"]: r for r in records if "turns" in r}
    assistant = {name: [m for m in r["turns"] if m["role"] == "assistant"] for name, r in transcripts.items()}
    assert assistant["surrogate"][0]["content"] == "lone \ufffd high and \ufffd low surrogate"
    assert assistant["nul"][0]["content"] == "nul \ufffd in the middle"
    huge = assistant["huge"][0]["content"]
    assert huge.startswith("y" * 1000) and MAX_ANSWER_CHARS - 100 < len(huge) <= MAX_ANSWER_CHARS
    assert huge.endswith(f" of {HUGE:,} characters]") and "[multiverse: answer cut: kept " in huge
    call = assistant["toolcall"][0]["tool_calls"][0]
    assert call["arguments"] == {"city": "Oslo \ufffd \ufffd"}
    tool_result = next(m for m in transcripts["toolcall"]["turns"] if m["role"] == "tool")["content"]
    assert "\ufffd" in tool_result and "\ud800" not in tool_result
    assert assistant["toolcall"][-1]["content"] == "The tool said \U0001f600 done \ufffd."  # a real pair survives
    rationales = [c["rationale"] for r in records if "criteria" in r for c in r["criteria"]]
    assert rationales and all(r.endswith("\ufffd \ufffd") for r in rationales if r)

    lines = (tmp_path / "run" / "transcripts.jsonl").read_bytes().decode("utf-8").splitlines()
    assert len(lines) == sum("turns" in r for r in records) == 8 and all(json.loads(line) for line in lines)
    criteria = pd.read_parquet(tmp_path / "run" / "criteria.parquet")
    assert criteria.rationale.str.contains("\ufffd").any()
    pd.read_csv(tmp_path / "run" / "criteria.csv")
    from multiverse.reporting import write_report

    report = write_report(tmp_path / "run", tmp_path / "report.html", store=tmp_path / "store")
    assert "\ufffd" in report.read_bytes().decode("utf-8")


def test_storable_text_keeps_ordinary_text_and_bounds_the_rest():
    ordinary = "Grüße, 東京, emoji \U0001f600, tabs\tand\nnewlines"
    assert storable_text(ordinary) == ordinary
    assert storable_text("\ud800\udc00") == "\ufffd\ufffd"  # a pair left split by a decoder is still unencodable
    assert storable_text("ab\x00c", limit=10) == "ab\ufffdc"
    cut = storable_text("z" * 500, limit=100)
    assert len(cut) <= 100 and cut.startswith("z" * 40) and cut.endswith("of 500 characters]")
    assert storable_text(cut, limit=100) == cut  # cutting again (the store's sweep) changes nothing
    for text in ("\ud800", "x\udfff" * 3, "\x00" * 5, "é" * 20):
        storable_text(text).encode("utf-8")  # never UnicodeEncodeError


def test_a_judge_answer_nested_past_the_limit_is_unparseable_never_a_crash():
    from multiverse.errors import ModelError
    from multiverse.spec import ModelConfig

    schema = {"type": "object", "properties": {"criteria": {"type": "object"}}, "required": ["criteria"]}
    for depth in (70, 900):
        deep = '{"criteria": ' * depth + "{}" + "}" * depth
        with FakeServer(responder=lambda body, deep=deep: deep) as server:
            with pytest.raises(ModelError) as raised:
                _client().complete(ModelConfig("openai/fake", {}, server.url), [{"role": "user", "content": "judge"}], schema=schema)
            assert server.counts["total"] == 2  # the answer and one repair request, then a recorded failure
        assert raised.value.reason == "unparseable" and "nests" in str(raised.value)
