"""How a setting is declared: its default, its help text and its allowed values, in one place.

A setting is a dataclass field made by :func:`setting`. The run's own settings are :class:`dfl_core.config.Config`'s
fields; an algorithm's hyperparameters are the fields of its ``params`` class, a frozen dataclass made by
:func:`params` (``DFedSAMParams``, ``FedGFParams``, …). The command line, the notation table and the checks are all
generated from these declarations, so a hyperparameter such as ρ is declared once, on the params class that
introduces it (:class:`dfl_core.algorithms.base.SAMRadius`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from .errors import ConfigError

__all__ = ["OneOf", "Integer", "Number", "Flag", "check_int", "setting", "params", "check_settings", "REQUIRED"]

#: Marks a hyperparameter an algorithm needs but has no default for (the papers give none).
REQUIRED = "<required>"


# ---------------------------------------------------------------- allowed values
@dataclass(frozen=True)
class OneOf:
    """A name from ``choices`` (a tuple, or a registry dict whose keys are the names)."""

    choices: Any

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.choices:
            raise ConfigError(f"unknown {name} {value!r}; allowed: {', '.join(map(str, self.choices))}")


@dataclass(frozen=True)
class Integer:
    """An integer ≥ ``minimum`` (and ≤ ``maximum``, if given)."""

    minimum: int
    maximum: int | None = None

    def __call__(self, name: str, value: Any) -> None:
        check_int(name, value, self.minimum)
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{name} must be <= {self.maximum}, got {value}")


@dataclass(frozen=True)
class Number:
    """A finite number in an interval; ``low_open``/``high_open`` exclude the ends."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if (value <= self.low if self.low_open else value < self.low) or (
            value >= self.high if self.high_open else value > self.high
        ):
            interval = (
                f"{'(' if self.low_open else '['}{self.low}, {self.high}"
                f"{')' if self.high_open or self.high == math.inf else ']'}"
            )
            raise ConfigError(f"{name} must be in {interval}, got {value}")


@dataclass(frozen=True)
class Flag:
    """True or false."""

    def __call__(self, name: str, value: Any) -> None:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")


def check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")


# ------------------------------------------------------------------ declaration
def setting(default: Any, help: str, allowed=None, *, step_size: bool = False) -> Any:
    """A setting's field: its default, its help text (first the symbol, then what it is), its allowed values.

    ``allowed`` is a check such as :class:`Number`, called with the name and the value; ``None`` as a value is
    allowed where it is the default. ``step_size``: a value too large can make training diverge, so a
    divergence error names it (η, ρ).
    """
    return field(default=default, metadata={"help": help, "allowed": allowed, "step_size": step_size})


def params(cls: type) -> type:
    """Make ``cls`` a frozen dataclass of hyperparameters, checked when it is built.

    A field that only changes an inherited default (``gossip_steps: int = 4``) keeps the help text and the
    allowed values of the class that declared it, so each hyperparameter is declared once.
    """
    if "__post_init__" not in cls.__dict__ and not hasattr(cls, "__post_init__"):
        cls.__post_init__ = _check_on_init  # before dataclass(), which calls it only if it exists
    cls = dataclass(frozen=True)(cls)
    for f in fields(cls):
        if "help" not in f.metadata:
            declared = [
                b.__dataclass_fields__[f.name]
                for b in cls.__mro__[1:]
                if f.name in getattr(b, "__dataclass_fields__", {})
                and "help" in b.__dataclass_fields__[f.name].metadata
            ]
            if not declared:
                raise TypeError(
                    f"{cls.__name__}.{f.name} is declared without setting(...): give its help text "
                    f"and allowed values where it is introduced"
                )
            f.metadata = MappingProxyType(dict(declared[0].metadata))
    return cls


def _check_on_init(self) -> None:
    check_settings(self)
    extra = getattr(type(self), "check", None)
    if extra is not None:
        extra(self)


def check_settings(obj: Any) -> None:
    """Every field of the dataclass ``obj`` within its allowed values; a :data:`REQUIRED` one left unset is refused."""
    missing = [f.name for f in fields(obj) if getattr(obj, f.name) == REQUIRED]
    if missing:
        raise ConfigError(
            f"{type(obj).__name__} needs {', '.join(missing)}, which has no default (the papers "
            f"give none); set it explicitly"
        )
    for f in fields(obj):
        value, allowed = getattr(obj, f.name), f.metadata.get("allowed")
        if allowed is not None and not (value is None and (f.default is None or "None" in str(f.type))):
            allowed(f.name, value)  # None passes where it is the default or its type allows it
