"""The errors a run can stop with. Each message names the value and what is allowed."""

from __future__ import annotations

__all__ = ["ConfigError", "DivergenceError"]


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names both."""


class DivergenceError(RuntimeError):
    """The loss or the parameters became NaN or infinite."""
