"""Token-length distributions (fixed, uniform, normal, lognormal) with clamps, optionally relative to the model context."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TypeVar

import numpy as np

T = TypeVar("T")

# The parameters each distribution needs; `min`/`max` clamps are allowed with every one.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "fixed": ("value",),
    "uniform": ("low", "high"),
    "normal": ("mean", "std"),
    "lognormal": ("mean", "std"),
}
CLAMPS = ("min", "max")
PARAMETERS = ("value", "low", "high", "mean", "std", "min", "max")


def allowed_keys(dist: str) -> list[str]:
    """The TOML keys a length table of this distribution accepts (each number also as `<key>_fraction`)."""
    names = [*DISTRIBUTIONS[dist], *CLAMPS]
    return ["dist", *names, *(f"{name}_fraction" for name in names)]


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A distribution of token counts; parameters named in `relative` are fractions of the model context.

    Draws are rounded to integers and clamped to [min, max] (min defaults to 1 token). Normal and
    lognormal are unbounded, so they need a `max` clamp: it is what makes a context check exact.
    Lognormal takes the mean and std of the lengths themselves (not of their logarithm).
    Errors are ValueError("<key>: <problem>; allowed: ..."); the scenario parser adds file and table.
    """

    dist: str
    value: float | None = None
    low: float | None = None
    high: float | None = None
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    relative: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.dist not in DISTRIBUTIONS:
            raise ValueError(f"dist: unknown distribution {self.dist!r}; allowed: {', '.join(DISTRIBUTIONS)}")
        wanted = (*DISTRIBUTIONS[self.dist], *CLAMPS)
        for name in PARAMETERS:
            number = getattr(self, name)
            if name not in wanted and number is not None:
                raise ValueError(
                    f"{name}: not a parameter of {self.dist}; allowed: {', '.join(allowed_keys(self.dist))}"
                )
            if number is None:
                continue
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
                raise ValueError(f"{self._key(name)}: {number!r} is not a finite number")
            if name in self.relative and not 0 <= number <= 1:
                raise ValueError(
                    f"{name}_fraction: {number!r} is out of range; allowed: a fraction in [0, 1]"
                )
            if name not in self.relative and number < 0:
                raise ValueError(f"{name}: {number!r} is negative; allowed: a token count >= 0")
        for name in DISTRIBUTIONS[self.dist]:
            if getattr(self, name) is None:
                raise ValueError(
                    f"{name}: missing for dist={self.dist!r}; allowed: {name} or {name}_fraction"
                )
        if self.dist in ("normal", "lognormal") and self.max is None:
            raise ValueError(
                f"max: {self.dist} is unbounded and needs a max clamp; allowed: max or max_fraction"
            )
        if self.dist == "lognormal" and self.mean == 0:
            raise ValueError("mean: lognormal needs a mean > 0")
        if unknown := self.relative - set(wanted):
            raise ValueError(f"{min(unknown)}_fraction: not a parameter of {self.dist}")
        if not self.relative:
            self._check_order()

    def _key(self, name: str) -> str:
        return f"{name}_fraction" if name in self.relative else name

    def _given(self, number: T | None, name: str) -> T:
        """A parameter __post_init__ made sure is set for this distribution."""
        if number is None:
            raise ValueError(f"{name}: missing for dist={self.dist!r}; allowed: {name} or {name}_fraction")
        return number

    def _check_order(self) -> None:
        if self.dist == "uniform" and self._given(self.low, "low") > self._given(self.high, "high"):
            raise ValueError(f"low: {self.low:g} > high {self.high:g}; allowed: low <= high")
        if self.max is not None and self.max < 1:
            raise ValueError(f"max: {self.max:g} leaves no length; allowed: max >= 1 token")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min: {self.min:g} > max {self.max:g}; allowed: min <= max")

    def resolve(self, context_length: int) -> LengthDist:
        """The same distribution in absolute tokens for a model with this context (fractions floored)."""
        if not self.relative:
            return self

        def absolute(number: float | None, name: str) -> float | None:
            return math.floor(self._given(number, name) * context_length) if name in self.relative else number

        return replace(
            self,
            relative=frozenset(),
            value=absolute(self.value, "value"),
            low=absolute(self.low, "low"),
            high=absolute(self.high, "high"),
            mean=absolute(self.mean, "mean"),
            std=absolute(self.std, "std"),
            min=absolute(self.min, "min"),
            max=absolute(self.max, "max"),
        )

    def bounds(self) -> tuple[int, int]:
        """The smallest and largest length a draw can take (absolute distributions only)."""
        if self.relative:
            raise ValueError("bounds: resolve(context_length) the relative parameters first")
        lowest = max(1, math.ceil(self.min)) if self.min is not None else 1
        highest = math.floor(self.max) if self.max is not None else None
        if self.dist == "fixed":
            natural_low = natural_high = round(self._given(self.value, "value"))
        elif self.dist == "uniform":
            natural_low, natural_high = (
                math.ceil(self._given(self.low, "low")),
                math.floor(self._given(self.high, "high")),
            )
        else:  # normal and lognormal: bounded by their max clamp alone
            natural_low, natural_high = lowest, self._given(highest, "max")
        low = min(max(natural_low, lowest), highest) if highest is not None else max(natural_low, lowest)
        high = min(max(natural_high, lowest), highest) if highest is not None else max(natural_high, lowest)
        return low, high

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` integer lengths (int64), rounded and clamped."""
        lowest, highest = self.bounds()
        if self.dist == "fixed":
            draws = np.full(count, float(self._given(self.value, "value")))
        elif self.dist == "uniform":
            low, high = math.ceil(self._given(self.low, "low")), math.floor(self._given(self.high, "high"))
            draws = rng.integers(low, max(low, high), size=count, endpoint=True).astype(np.float64)
        elif self.dist == "normal":
            draws = rng.normal(self._given(self.mean, "mean"), self._given(self.std, "std"), size=count)
        else:
            # Moment matching: a lognormal whose lengths have this mean and std.
            mean, std = self._given(self.mean, "mean"), self._given(self.std, "std")
            sigma_squared = math.log1p((std / mean) ** 2)
            mu = math.log(mean) - sigma_squared / 2
            draws = rng.lognormal(mu, math.sqrt(sigma_squared), size=count)
        return np.clip(np.rint(draws), lowest, highest).astype(np.int64)

    def to_dict(self) -> dict[str, object]:
        """The TOML-shaped table: {"dist": ..., "<param>" or "<param>_fraction": number}."""
        table: dict[str, object] = {"dist": self.dist}
        for field in fields(self):
            number = getattr(self, field.name)
            if field.name in PARAMETERS and number is not None:
                table[self._key(field.name)] = number
        return table

    def describe(self) -> str:
        """One line, e.g. `normal(mean=60, std=20) clamped to [16, 128] tokens`."""

        def show(name: str) -> str:
            number = getattr(self, name)
            return f"{number:g}×context" if name in self.relative else f"{number:g}"

        body = ", ".join(f"{name}={show(name)}" for name in DISTRIBUTIONS[self.dist])
        text = f"{self.dist}({body})"
        if self.min is not None or self.max is not None:
            low = show("min") if self.min is not None else "1"
            high = show("max") if self.max is not None else "∞"
            text += f" clamped to [{low}, {high}]"
        return text + " tokens"
