"""Variance decomposition: how much of the rates' spread each axis (and interaction) explains."""

from ._variance import aliasing, variance, variance_by_axis, variance_decomposition, variance_summary

__all__ = [
    "aliasing",
    "variance",
    "variance_by_axis",
    "variance_decomposition",
    "variance_summary",
]
