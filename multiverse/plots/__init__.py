"""The figures: each takes the tidy table an analysis returns and gives back a matplotlib object.

- :func:`plot_curve`, :func:`plot_curves`, :func:`plot_difference_curve`: specification curves;
- :func:`agreement_figure`, :func:`plot_agreement`, :func:`score_agreement_figure`: agreement heatmaps between an axis's options (on labels; on scores);
- :func:`ranking_figure`, :func:`plot_rank_bump`, :func:`plot_rank_distribution`: ranks across universes;
- :func:`plot_variance`: the variance decomposition;
- :func:`plot_factor_rates`: rates by design factor;
- :func:`plot_calibration`: judge, human-anchored and humans-only rates per universe;
- :func:`plot_diff`: one run against another, per system and universe.
- :func:`cut_figure`: each system's estimate and rank as the cut on a score moves;
- :func:`stamp_simulated`: the SIMULATED stamp on a figure drawn from a run on the simulated world.

Only this package imports matplotlib; names are imported on first use.
"""

from multiverse.core import lazy_names as _lazy_names

_MODULES = {
    "curve": ("plot_curve", "plot_curves", "plot_difference_curve"),
    "agreement": ("agreement_figure", "plot_agreement", "score_agreement_figure"),
    "ranking": ("ranking_figure", "plot_rank_bump", "plot_rank_distribution"),
    "variance": ("plot_variance",),
    "factors": ("plot_factor_rates",),
    "anchoring": ("plot_calibration",),
    "diff": ("plot_diff",),
    "cuts": ("cut_figure",),
    "stamp": ("stamp_simulated",),
}
_HOME = {name: f"multiverse.plots._{module}" for module, names in _MODULES.items() for name in names}

__all__ = [name for names in _MODULES.values() for name in names]


__getattr__, __dir__ = _lazy_names(__name__, _HOME)
