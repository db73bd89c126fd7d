"""The release gate: pre-registered claims decided on a run, and one run compared with another.

- :func:`check` decides a claims file on a run's results (held, failed or
  undecided, each with its p-value, estimate range and worst universe);
  :func:`read_claims` reads and checks a claims file by itself (:func:`parse_claims` its mapping),
  reporting every problem at once;
  :func:`junit_xml` and :func:`write_junit` give the outcome as JUnit XML for any CI;
- :func:`diff` compares two runs of the same design, universe by universe and
  system by system, paired on the cases both have (:class:`Diff`).
"""

from multiverse.gate._claims_file import RULES, Claim, ClaimsFile, parse_claims, read_claims
from multiverse.gate._decide import CheckResult, ClaimOutcome, Detectable, check
from multiverse.gate._diff import Diff, NotWorseTest, diff
from multiverse.gate._junit import junit_xml, write_junit

__all__ = ["RULES", "CheckResult", "Claim", "ClaimOutcome", "ClaimsFile", "Detectable", "Diff", "NotWorseTest", "check",
           "diff", "junit_xml", "parse_claims", "read_claims", "write_junit"]
