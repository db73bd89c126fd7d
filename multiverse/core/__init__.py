"""Ground every room stands on: the vocabulary, content keys, files written whole, bounds, names, progress.

Nothing here imports another room (only :mod:`multiverse.errors`), so any
module may import it. Names are imported on first use: the configuration
types need pydantic, which commands that only print help should not pay for.

- the audit's vocabulary: statuses, rules, estimators, stages, table columns
  (``STATUSES``, ``SCORING_RULES``, ``VERDICT_COLUMNS``, ..., and
  ``counted_rows``, the one rule of which verdicts count);
- content keys: ``digest`` and ``canonical_json``; a universe's name:
  ``universe_id`` and ``universe_label``, one rule each;
- files: ``atomic_write``/``atomic_write_text`` (never half a file; ``synced_once``: one flush a folder),
  ``read_regular_file`` and the caps (``CAPS``, ``MAX_UNIVERSES``, ...),
  ``check_writable``; spreadsheet-safe cells (``safe_cell``);
- which way a rate reads (``report.rate``): ``orient`` and the helpers built on it;
- text for people: ``terminal_safe`` (no escape sequences reach a terminal), ``shared_path`` (no
  absolute local path in a page that travels),
  ``nfc`` and look-alike names, ``Progress``, ``short_reason`` and outcome tallies;
- ``ModelConfig`` and ``RateLimit``; the run's ``interrupt`` handling,
  ``credentials`` (never written) and the ``model_names`` registry, as modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names

if TYPE_CHECKING:
    from . import _credentials as credentials
    from . import _interrupt as interrupt
    from . import _model_names as model_names
    from ._atomicfile import atomic_write, atomic_write_text, synced_once
    from ._bounds import (
        CAPS,
        MAX_FILE_BYTES,
        MAX_IMPORT_BYTES,
        MAX_IMPORT_ROWS,
        MAX_OPTIONS,
        MAX_SEED,
        MAX_TRANSCRIPT_BYTES,
        MAX_UNITS,
        MAX_UNIVERSES,
        MAX_VERDICT_ROWS,
        ImportBudget,
        name_problem,
        read_regular_file,
        regular_file_problem,
        universes_problem,
        whole_number_problem,
    )
    from ._config import Frozen, FrozenMap, ModelConfig, RateLimit, expand_env, seconds_setting
    from ._credentials import check_spec_sections
    from ._csvsafe import FORMULA_START, LINE_END, QUOTE, restore_cell, safe_cell
    from ._interrupt import RunInterrupted
    from ._keys import canonical_json, digest
    from ._model_names import SIM_PREFIX, is_simulated
    from ._names import (
        both_spellings,
        confusable,
        escaped,
        json_escaped,
        look_alike,
        merged_spellings,
        nfc,
        nfc_document,
        skeleton,
        unshowable,
        unshowable_pattern,
        unshowable_problem,
    )
    from ._outcomes import (
        DEFINITIONS,
        check_tally,
        failure_examples,
        reason_class,
        row_outcomes,
        short_reason,
        tally,
        unit_outcomes,
    )
    from ._progress import Progress
    from ._rate_direction import (
        RATE_DIRECTIONS,
        RateDirection,
        check_rate_direction,
        counted_word,
        orient,
        orient_interval,
        orient_rates,
        orient_side,
        rank_one,
        rate_name,
    )
    from ._scale import BaseScale
    from ._shared_path import shared_path, shared_text
    from ._terminal import TerminalStream, progress_stream, terminal_safe
    from ._universe import universe_id, universe_label
    from ._version import __version__
    from ._vocabulary import (
        BEHAVIOR,
        CI_METHODS,
        CORE_COLUMNS,
        COUNTED_STATUS,
        CRITERIA_COLUMNS,
        ESTIMATORS,
        EXCLUDED,
        FAILED_STATUSES,
        JUDGE_FAILED,
        NOT_RUN,
        OK,
        RATE_COLUMNS,
        RATE_VALUE_COLUMNS,
        RESERVED_NAMES,
        ROLLOUT_FAILED,
        SAMPLE_STATUSES,
        SCALE_TYPES,
        SCHEMA_VERSION,
        SCORE,
        SCORE_CRITERIA,
        SCORE_ESTIMATORS,
        SCORE_RATE_COLUMNS,
        SCORING_RULES,
        STAGE_OF_RECORD,
        STAGES,
        STATUSES,
        UNPARSED_POLICIES,
        UNPARSED_REASONS,
        VERDICT_COLUMNS,
        CIMethod,
        Estimator,
        ScaleType,
        ScoringRule,
        UnparsedPolicy,
        counted_rows,
        unparsed_rows,
    )
    from ._writable import PlaceError, check_writable, resolved

# public name -> the private module that defines it (a module name maps to the module itself)
_HOMES = {
    "credentials": "_credentials", "interrupt": "_interrupt", "model_names": "_model_names",
    **dict.fromkeys(("atomic_write", "atomic_write_text", "synced_once"), "_atomicfile"),
    **dict.fromkeys(("CAPS", "MAX_SEED", "MAX_FILE_BYTES", "MAX_IMPORT_BYTES", "MAX_IMPORT_ROWS", "MAX_OPTIONS",
                     "MAX_TRANSCRIPT_BYTES", "MAX_UNITS", "MAX_UNIVERSES", "MAX_VERDICT_ROWS", "ImportBudget",
                     "name_problem", "read_regular_file", "regular_file_problem", "universes_problem",
                     "whole_number_problem"), "_bounds"),
    **dict.fromkeys(("Frozen", "FrozenMap", "ModelConfig", "RateLimit", "expand_env", "seconds_setting"), "_config"),
    **dict.fromkeys(("FORMULA_START", "LINE_END", "QUOTE", "restore_cell", "safe_cell"), "_csvsafe"),
    "check_spec_sections": "_credentials",
    "RunInterrupted": "_interrupt",
    **dict.fromkeys(("canonical_json", "digest", "json_ready"), "_keys"),
    **dict.fromkeys(("universe_id", "universe_label", "universe_label"), "_universe"),
    **dict.fromkeys(("both_spellings", "confusable", "escaped", "json_escaped", "look_alike", "merged_spellings", "nfc",
                     "nfc_document", "skeleton", "unshowable", "unshowable_pattern", "unshowable_problem"), "_names"),
    **dict.fromkeys(("DEFINITIONS", "check_tally", "failure_examples", "reason_class", "row_outcomes", "short_reason",
                     "tally", "unit_outcomes"), "_outcomes"),
    "Progress": "_progress",
    **dict.fromkeys(("TerminalStream", "progress_stream", "terminal_safe"), "_terminal"),
    "__version__": "_version",
    **dict.fromkeys(("SIM_PREFIX", "is_simulated"), "_model_names"),
    **dict.fromkeys(("CI_METHODS", "CORE_COLUMNS", "COUNTED_STATUS", "CRITERIA_COLUMNS", "ESTIMATORS", "RATE_COLUMNS",
                     "RATE_VALUE_COLUMNS", "RESERVED_NAMES", "SCHEMA_VERSION", "SCORING_RULES", "STAGES", "STATUSES",
                     "VERDICT_COLUMNS", "counted_rows", "BEHAVIOR", "OK", "EXCLUDED", "ROLLOUT_FAILED",
                     "JUDGE_FAILED", "NOT_RUN", "FAILED_STATUSES", "SAMPLE_STATUSES", "STAGE_OF_RECORD", "CIMethod",
                     "Estimator", "ScoringRule", "SCALE_TYPES", "ScaleType", "SCORE", "SCORE_ESTIMATORS",
                     "SCORE_RATE_COLUMNS", "SCORE_CRITERIA", "UNPARSED_POLICIES", "UNPARSED_REASONS",
                     "UnparsedPolicy", "unparsed_rows"), "_vocabulary"),
    **dict.fromkeys(("PlaceError", "check_writable", "resolved"), "_writable"),
    **dict.fromkeys(("shared_path", "shared_text"), "_shared_path"),
    "BaseScale": "_scale",
    **dict.fromkeys(("RATE_DIRECTIONS", "RateDirection", "check_rate_direction", "counted_word", "orient",
                     "orient_interval", "orient_rates", "orient_side", "rank_one", "rate_name"), "_rate_direction"),
}
_MODULES = {"credentials", "interrupt", "model_names"}

__all__ = [
    "BEHAVIOR",
    "CAPS",
    "CI_METHODS",
    "CORE_COLUMNS",
    "COUNTED_STATUS",
    "CRITERIA_COLUMNS",
    "DEFINITIONS",
    "ESTIMATORS",
    "EXCLUDED",
    "FAILED_STATUSES",
    "FORMULA_START",
    "JUDGE_FAILED",
    "LINE_END",
    "MAX_FILE_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_ROWS",
    "MAX_OPTIONS",
    "MAX_SEED",
    "MAX_TRANSCRIPT_BYTES",
    "MAX_UNITS",
    "MAX_UNIVERSES",
    "MAX_VERDICT_ROWS",
    "NOT_RUN",
    "OK",
    "QUOTE",
    "RATE_COLUMNS",
    "RATE_DIRECTIONS",
    "RATE_VALUE_COLUMNS",
    "RESERVED_NAMES",
    "ROLLOUT_FAILED",
    "SAMPLE_STATUSES",
    "SCALE_TYPES",
    "SCHEMA_VERSION",
    "SCORE",
    "SCORE_CRITERIA",
    "SCORE_ESTIMATORS",
    "SCORE_RATE_COLUMNS",
    "SCORING_RULES",
    "SIM_PREFIX",
    "STAGES",
    "STAGE_OF_RECORD",
    "STATUSES",
    "UNPARSED_POLICIES",
    "UNPARSED_REASONS",
    "VERDICT_COLUMNS",
    "BaseScale",
    "CIMethod",
    "Estimator",
    "Frozen",
    "FrozenMap",
    "ImportBudget",
    "ModelConfig",
    "PlaceError",
    "Progress",
    "RateDirection",
    "RateLimit",
    "RunInterrupted",
    "ScaleType",
    "ScoringRule",
    "TerminalStream",
    "UnparsedPolicy",
    "__version__",
    "atomic_write",
    "atomic_write_text",
    "both_spellings",
    "canonical_json",
    "check_rate_direction",
    "check_spec_sections",
    "check_tally",
    "check_writable",
    "confusable",
    "counted_rows",
    "counted_word",
    "credentials",
    "digest",
    "escaped",
    "expand_env",
    "failure_examples",
    "interrupt",
    "is_simulated",
    "json_escaped",
    "json_ready",
    "lazy_names",
    "look_alike",
    "merged_spellings",
    "model_names",
    "name_problem",
    "nfc",
    "nfc_document",
    "orient",
    "orient_interval",
    "orient_rates",
    "orient_side",
    "progress_stream",
    "rank_one",
    "rate_name",
    "read_regular_file",
    "reason_class",
    "regular_file_problem",
    "resolved",
    "restore_cell",
    "row_outcomes",
    "safe_cell",
    "seconds_setting",
    "shared_path",
    "shared_text",
    "short_reason",
    "skeleton",
    "synced_once",
    "tally",
    "terminal_safe",
    "unit_outcomes",
    "universe_id",
    "universe_label",
    "universes_problem",
    "unparsed_rows",
    "unshowable",
    "unshowable_pattern",
    "unshowable_problem",
    "whole_number_problem",
]


__getattr__, __dir__ = lazy_names(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()}, _MODULES)
