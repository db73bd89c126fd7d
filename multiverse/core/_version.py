"""The package version, in a room of its own so that any module can record it without importing the facade."""

__all__ = ["__version__"]

__version__ = "0.1.0"
