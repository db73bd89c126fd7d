"""A scored run against a real OpenAI-compatible server, through litellm as every run goes (issue 27).

The fake server's judge answers a score per transcript, some of them off the
1-5 scale: those are counted judge failures, never scores, and every other
score reaches the verdicts exactly as the judge gave it.
"""

from __future__ import annotations

import hashlib
import json
import threading

import pandas as pd
import pytest
from audit_server import _judge_transcript, audit_responder, fake_spec_document, task_of
from fakeserver import FakeServer

from multiverse.engine import run
from multiverse.model import LiteLLMClient
from multiverse.spec import load_spec
from multiverse.work import render_transcript


class ScoringJudge:
    """The audit's fake roles, with a judge that scores 0-6 on a 1-5 scale (0 and 6 are off it)."""

    def __init__(self) -> None:
        self.given: dict[str, int] = {}  # rendered transcript -> the score the judge answered
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        task = task_of(body) or {}
        if task.get("kind") != "judge" or not task.get("scale"):
            return audit_responder(body)
        transcript = _judge_transcript(body)
        score = int(hashlib.sha256(transcript.encode("utf-8")).hexdigest(), 16) % 7
        with self.lock:
            self.given[transcript] = score
        return json.dumps({"score": score, "rationale": f"scored {score}"})


@pytest.mark.slow
def test_a_scored_judge_on_a_real_server_counts_off_scale_replies_as_failures(tmp_path, write_spec):
    judge = ScoringJudge()
    with FakeServer(responder=judge) as server:
        document = fake_spec_document(server.url, judges=("a",), cases_per_cell=3)
        document["judge"]["scale"] = {"type": "ordinal", "min": 1, "max": 5}
        document["scoring"] = {"estimator": "mean"}
        document["axes"] = {"estimator": {"mean": {"scoring.estimator": "mean"},
                                          "at_least": {"scoring.estimator": "at_least", "scoring.cut": 4}}}
        spec = load_spec(write_spec(document))
        client = LiteLLMClient(jobs=4, backoff_base=0.005, backoff_cap=0.02, timeout=10, max_retries=1, seed=0)
        result = run(spec, out=tmp_path / "run", store=tmp_path / "store", client=client, jobs=4, progress=False)
        judge_requests = server.counts["total"]
    assert judge_requests > 0
    rendered = {}
    for line in (tmp_path / "run" / "transcripts.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        rendered[record["key"]] = render_transcript(record["turns"])
    verdicts = result.verdicts
    judged = verdicts[verdicts["status"].isin(["ok", "judge_failed"])]
    assert len(judged) == len(verdicts), "every rollout on the fake server succeeds"
    answered = [judge.given[rendered[k]] for k in judged["transcript_key"]]
    off = [not 1 <= score <= 5 for score in answered]
    assert any(off) and not all(off), "the hash should put some scores off the scale"
    for (_, row), score, is_off in zip(judged.iterrows(), answered, off):
        if is_off:
            assert row["status"] == "judge_failed" and "off the scale" in row["reason"]
            assert row["score"] != row["score"]  # NaN: a failure has no score
        else:
            assert row["status"] == "ok" and row["score"] == score and pd.isna(row["compliant"])
    stage = result.manifest.stages["judge"]
    assert stage.failed == judged.loc[judged["status"] == "judge_failed", "judgment_key"].nunique()
    # The estimator axis asked the judge nothing more: one judgment per transcript.
    assert stage.units == len(rendered) == judged["judgment_key"].nunique()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
