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

# The counts commands take, each with a bound: past it, one line and exit 2 before anything is read or run, where
# --repeat 10**9 timed its calls for days and --kernels --top-k 10**23 reached DuckDB's LIMIT (64 bits) as a traceback.
MOST = 2**31 - 1  # a count of rows, levels or ranks past which there is nothing more to show (a rank's own bound)
ROWS = click.IntRange(min=0, max=MOST)  # --top-k (0 = all), --depth
RANK = click.IntRange(min=0, max=MOST)  # --rank: as a trace's distributedInfo.rank
REPEATS = click.IntRange(min=1, max=10_000)  # bench --repeat: timed calls per sample
WARMUP_CALLS = click.IntRange(min=0, max=10_000)  # bench --warmup: untimed calls per sample
WARMUP_PASSES = click.IntRange(min=0, max=1_000)  # record --warmup: passes of the whole model over its samples
