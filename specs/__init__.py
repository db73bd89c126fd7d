"""Example specs, shipped inside the package as ``multiverse.examples``."""
