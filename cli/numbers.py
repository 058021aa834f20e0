"""The numbers commands take: click's FloatRange, which reads ``nan`` and ``inf`` as numbers, refuses them here,
because a NaN threshold compares false with everything (``--fail-above nan`` would never fail) and no share or
tolerance is infinite."""

from __future__ import annotations

import math

import click


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange of finite numbers only."""

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):  # before the range, whose message would call inf out of range, nan in it
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


NON_NEGATIVE = FiniteFloatRange(min=0)
PERCENT = FiniteFloatRange(min=0, max=100)  # a share of a whole: --min-pct 200 folded every line
