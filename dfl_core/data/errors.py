"""The error every bad dataset input raises (its own module, so that every data module can import it)."""

from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """A bad dataset name, size, file or partition argument."""
