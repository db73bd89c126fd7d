"""The human-anchoring example: a cut-down grid of its spec, then the script as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from multiverse.engine._pipeline import run
from multiverse.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "human-anchor-sim.yaml"
SCRIPT = REPO / "analyses" / "human_anchor.py"


@pytest.mark.slow
def test_reduced_example_runs_end_to_end(tmp_path):
    document = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    document["rubric"] = str(SPEC.parent / document["rubric"])
    document["design"]["cases_per_cell"] = 1  # 6 behaviours x 2 conditions = 12 cases per system
    for dimension in document["design"]["dimensions"]:
        if dimension["name"] == "interaction_condition":
            dimension["levels"] = ["material_reliance", "overclaim_pressure"]
    document["systems"] = document["systems"][:2]
    document["axes"]["judge"] = {k: v for k, v in document["axes"]["judge"].items() if k in ("judge_c", "oracle")}
    document["primary"]["judge"] = "judge_c"
    spec_path = tmp_path / "small.yaml"
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", jobs=4, progress=False)

    figure = tmp_path / "anchor.png"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run"), "--labels", "10", "--repeats", "2",
                           "--figure", str(figure)], check=False, capture_output=True, text=True, cwd=tmp_path,
                          timeout=180, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("SIMULATED.")
    for kind in ("judge (raw)", "humans only", "anchored"):
        assert f"{kind:12s} covers the true rate in" in out
    assert "over 2 fresh draws of 10 labels" in out and "Judges against the oracle's labels" in out
    judges = out.split("Judges against")[1].split("\n\n")[0].split("\n", 2)[2]
    assert "judge_c" in judges and "oracle" not in judges  # the oracle is the person, not a judge
    with Image.open(figure) as image:
        assert image.format == "PNG" and image.size[0] > 800
