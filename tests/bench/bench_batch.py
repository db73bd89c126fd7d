"""Benchmark of batch mode (issue 47): a grid run through the batch API costs half of a direct run, each request sent once.

The same grid (2 systems x 2 judges as an axis, generated cases, two-turn
conversations with a simulated user; every model ``openai/gpt-4o-mini``, which
litellm prices) is run twice on fresh stores against a loopback server of
OpenAI's chat, files and batches endpoints (tests/batch_server.py): once
directly, once with every role batched. Both runs' costs are litellm's for the
same token counts (direct: the answer's ``response_cost``; batched:
``batch_cost_calculator``, gpt-4o-mini's batch price). The server counts every
request: the batched run sends none directly and each request once in a batch,
and a direct run on its store sends nothing.

Reproduce:  python tests/bench/bench_batch.py [--cases 2]
Target:     batched cost / direct cost = 0.50; every request once; no request of the batched run sent directly.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from audit_server import audit_responder, fake_spec_document  # noqa: E402
from batch_server import BatchServer  # noqa: E402

from multiverse.engine import run  # noqa: E402
from multiverse.model import LiteLLMClient  # noqa: E402
from multiverse.spec import load_spec  # noqa: E402

MODEL = "openai/gpt-4o-mini"
ROLES = ["generator", "systems", "user", "judge"]


def _spec(folder: Path, url: str, roles: list[str], cases: int) -> Path:
    document = fake_spec_document(url, judges=("a", "b"), cases_per_cell=cases, max_turns=2)
    for section in (document["design"]["generator"], *document["systems"], document["rollout"]["user"],
                    document["judge"]):
        section["model"] = MODEL
    document["batch"] = {"roles": roles, "poll": 0.05}
    path = folder / f"{'batched' if roles else 'direct'}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _one(spec: Path, store: Path, out: Path) -> tuple[float, float, dict]:
    client = LiteLLMClient(jobs=8, timeout=30, max_retries=1)
    started = time.perf_counter()
    result = run(load_spec(spec), out=out, store=store, client=client, jobs=8, progress=False)
    wall = time.perf_counter() - started
    stages = result.manifest.stages
    return client.stats["cost"], wall, {s: stages[s].calls for s in ("draft", "rollout", "judge")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2, help="cases per cell (4 cells)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, BatchServer(audit_responder) as server:
        folder = Path(tmp)
        direct_spec = _spec(folder, server.url, [], args.cases)
        batched_spec = _spec(folder, server.url, ROLES, args.cases)
        direct_cost, direct_wall, direct_calls = _one(direct_spec, folder / "direct-store", folder / "direct-run")
        direct_requests = server.counts["chat"]
        server.counts.clear()
        batch_cost, batch_wall, batch_calls = _one(batched_spec, folder / "batch-store", folder / "batch-run")
        batched = dict(server.counts)
        lines = dict(server.lines)
        before = dict(server.counts)
        _one(direct_spec, folder / "batch-store", folder / "again-run")
        after_direct = {k: v - before.get(k, 0) for k, v in server.counts.items() if v != before.get(k, 0)}
    print(f"grid: {MODEL}, roles batched: {', '.join(ROLES)}, {args.cases} cases per cell")
    print(f"direct run : {direct_requests} requests, cost ${direct_cost:.6f} (litellm), wall {direct_wall:.1f} s, "
          f"calls per stage {direct_calls}")
    print(f"batched run: {sum(lines.values())} lines in {batched.get('batches', 0)} batches (waves), "
          f"{batched.get('chat', 0)} direct requests, cost ${batch_cost:.6f} (litellm batch price), "
          f"wall {batch_wall:.1f} s, calls per stage {batch_calls}")
    print(f"batched / direct cost: {batch_cost / direct_cost:.4f} (target 0.50)")
    print(f"each request once: {set(lines.values()) == {1}} ({len(lines)} distinct requests, "
          f"the direct run sent {direct_requests})")
    print(f"a direct run on the batched run's store sent: {after_direct or 'nothing'}")


if __name__ == "__main__":
    main()
