"""The engine room: plan, run and draft a spec's universes, and write a run folder.

:func:`plan` says what a run would call and cost (a :class:`Plan`) without
calling anything; :func:`run` computes what the store lacks on a backend
(threads here, worker processes, or a Dask cluster) and writes the run
folder, which it checks first (:func:`check_run_places`, in
:func:`default_run_dir` unless told); :func:`draft` writes a rubric or the
test cases as editable YAML. The run folder itself is written by the tables
room (``multiverse.tables.write_run_folder``), for importers too.

Names are imported on first use: the worker processes of a run import
engine modules, and need none of the pipeline's tables and results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from multiverse.core import lazy_names

if TYPE_CHECKING:
    from multiverse.engine._pipeline import check_run_places, default_run_dir, draft, plan, run
    from multiverse.engine._plan import LaneTime, Plan, StagePlan, WallTime

# public name -> the module that defines it
_LAZY = {
    "check_run_places": "multiverse.engine._pipeline",
    "default_run_dir": "multiverse.engine._pipeline",
    "draft": "multiverse.engine._pipeline",
    "plan": "multiverse.engine._pipeline",
    "run": "multiverse.engine._pipeline",
    "LaneTime": "multiverse.engine._plan",
    "Plan": "multiverse.engine._plan",
    "StagePlan": "multiverse.engine._plan",
    "WallTime": "multiverse.engine._plan",
}

__all__ = ["LaneTime", "Plan", "StagePlan", "WallTime", "check_run_places", "default_run_dir", "draft", "plan", "run"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
