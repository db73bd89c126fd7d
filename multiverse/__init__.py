"""multiverse: run generative-AI audits as a multiverse of measurement choices.

The public API, in the order data flows::

    import multiverse as mv

    spec = mv.load_spec("specs/demo.yaml")    # a checked, immutable spec
    mv.expand(spec)                          # its universes
    mv.plan(spec)                            # calls and cost, before anything runs
    results = mv.run(spec)                   # run every universe -> Results
    results = mv.load_run("runs/demo")       # or read a run, an import or a verdicts table
    results.curve().frame                    # analyses: curve, agreement, ranking, variance, power
    mv.report(results, "report.html")     # the explorer and every analysis, one page
    mv.label("runs/demo", 20, "SHEET.csv")  # a sheet for people to label a sample
    mv.check(results, "claims.yaml")         # pre-registered claims: held, failed, undecided or not refuted
    mv.diff("runs/last", "runs/demo")        # one run against another of the same design

``mv.import_table``, ``mv.import_assert``, ``mv.import_inspect``, ``mv.import_promptfoo`` and ``mv.import_lm_eval`` turn results produced elsewhere
into an import directory and return its :class:`Results` too. Errors are
the classes of :mod:`multiverse.errors`. The analyses and figures are in
:mod:`multiverse.analysis` and :mod:`multiverse.plots`.

Names are imported on first use, so ``import multiverse`` stays light: only
the functions that call models import litellm.
"""

from typing import TYPE_CHECKING

from .core import __version__
from .core import lazy_names as _lazy_names
from .core import model_names as _model_names
from .errors import (
    BudgetExceeded,
    InputError,
    ModelError,
    ModelUnusable,
    MultiverseError,
    SpecError,
    StoreError,
)

if TYPE_CHECKING:  # the names' real types for type checkers; at run time they are imported on first use
    from ._api import count_universes, label, power, report, store_gc, store_migrate, store_stats, validate
    from .engine import draft, plan, run
    from .gate import check, diff
    from .importers import import_assert, import_inspect, import_lm_eval, import_promptfoo, import_table
    from .results import Analysis, Results, load_run
    from .spec import expand, load_spec

# litellm fetches a remote price map at import unless told not to: the one place multiverse imports it
# (multiverse.model.load_litellm) says so first. Importing multiverse, or a command that calls no model,
# leaves the environment (which every subprocess inherits) as it found it.


def _load_sim() -> None:
    import multiverse.sim  # noqa: F401  (registers the sim provider's name and world checkers)


# The ground floor's registry of offline-checkable model names knows no provider: the package root, above
# every room, tells it how to load the simulator's checkers when a spec first names a sim/ model or a world.
_model_names.register_loader("sim", _load_sim)


# public name -> the module that defines it
_LAZY = {
    "load_spec": "multiverse.spec",
    "expand": "multiverse.spec",
    "plan": "multiverse.engine",
    "run": "multiverse.engine",
    "draft": "multiverse.engine",
    "load_run": "multiverse.results",
    "report": "multiverse._api",
    "label": "multiverse._api",
    "power": "multiverse._api",
    "validate": "multiverse._api",
    "count_universes": "multiverse._api",
    "store_stats": "multiverse._api",
    "store_gc": "multiverse._api",
    "store_migrate": "multiverse._api",
    "import_table": "multiverse.importers",
    "import_assert": "multiverse.importers",
    "check": "multiverse.gate",
    "diff": "multiverse.gate",
    "import_inspect": "multiverse.importers",
    "import_promptfoo": "multiverse.importers",
    "import_lm_eval": "multiverse.importers",
    "Results": "multiverse.results",
    "Analysis": "multiverse.results",
}

__all__ = [
    "Analysis",
    "BudgetExceeded",
    "InputError",
    "ModelError",
    "ModelUnusable",
    "MultiverseError",
    "Results",
    "SpecError",
    "StoreError",
    "__version__",
    "check",
    "count_universes",
    "diff",
    "draft",
    "expand",
    "import_assert",
    "import_inspect",
    "import_lm_eval",
    "import_promptfoo",
    "import_table",
    "label",
    "load_run",
    "load_spec",
    "plan",
    "power",
    "report",
    "run",
    "store_gc",
    "store_migrate",
    "store_stats",
    "validate",
]


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
