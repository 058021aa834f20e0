"""What a trace's load tells besides its rows (ingest.py): its keys other than ``traceEvents``, which parts the
native reader read, and what it found in them, which spares a load the queries that would ask it."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field

from .json_text import Leniencies

try:
    from . import _kineto as native_reader
except ImportError:  # built without a C compiler: DuckDB's JSON reader reads every part, which tell nothing
    native_reader = None

# What a part holds, as the native reader's scan tells it (_kineto.c, part_facts): a device event or a runtime or
# driver call that may launch one, a Python frame (a python_function event), a name that holds '%', a runtime or
# driver call of another runtime than CUDA's, a pid or tid written as a string.
DEVICE_WORK, PYTHON_FRAMES, PERCENT_NAME, OTHER_RUNTIME, TEXT_IDS = 1, 2, 4, 8, 16


@dataclass
class TraceHeader:
    """The trace's keys other than ``traceEvents`` (device properties, base time, distributed info…)."""

    path: str
    compressed: bool
    size_bytes: int
    keys: dict = field(default_factory=dict)
    native_parts: list[int] = field(default_factory=list)  # the parts read by the native reader
    duckdb_parts: list[str] = field(default_factory=list)  # why each other part was left to DuckDB's reader
    rows_checked: list[int] = field(default_factory=list)  # native parts with no row breaking validate.sql's rules 1-7
    leniencies: Leniencies = field(default_factory=Leniencies)  # text read leniently (json_text.py)
    rank: int = 0  # the rank the events were loaded with (ingest_trace's; the header's own is distributedInfo's)
    # whether the trace holds the repeats validate_repeats.sql looks for (rules 8, 9), where the native reader read
    # every part and tells (settle_repeats); None: unknown, the query is to say
    repeats: bool | None = None
    part_repeats: dict[int, bool] = field(default_factory=dict)  # each native part's own answer
    repeat_keys: list[bytes] = field(default_factory=list)  # the keys of the parts without a repeat of their own
    part_facts: dict[int, int] = field(default_factory=dict)  # each native part's facts (_kineto.c, part_facts)

    def notes(self) -> list[str]:
        """A sentence for each leniency the trace's text took (json_text.readable_text)."""
        return self.leniencies.notes(self.path)

    def start_over(self) -> None:
        """Forget what a try that failed counted and what its parts said: the trace is read again."""
        self.native_parts, self.duckdb_parts, self.rows_checked, self.repeats = [], [], [], None
        self.part_repeats, self.repeat_keys, self.part_facts = {}, [], {}
        self.leniencies.clear()

    @property
    def all_rows_checked(self) -> bool:
        """Every part was read natively and holds no row that breaks validate.sql's rules 1-7."""
        return bool(self.native_parts) and not self.duckdb_parts and len(self.rows_checked) == len(self.native_parts)

    @property
    def facts(self) -> int | None:
        """What the trace holds as the native reader tells it (DEVICE_WORK… or-ed over the parts), where it read every
        part; None where it did not (a question is then to be asked of table ``events``)."""
        if self.duckdb_parts or not self.native_parts or len(self.part_facts) < len(self.native_parts):
            return None
        return functools.reduce(operator.or_, self.part_facts.values(), 0)

    def settle_repeats(self) -> None:
        """Set ``repeats`` once every part is loaded: where the native reader read them all, a part's own repeat, else
        whether two parts share a key (repeated_across: a shared hash leaves it None, for the query to settle), so that
        a trace read in many parts, as one in a single part, does not need validate_repeats.sql (with the query
        pasted.py ran then, 0.15 CPU-s of a 317 MB trace's 1.9); the keys are then dropped."""
        keys, self.repeat_keys = self.repeat_keys, []
        if self.duckdb_parts or not self.native_parts or len(self.part_repeats) < len(self.native_parts):
            self.repeats = None
        elif any(self.part_repeats.values()):
            self.repeats = True
        else:
            self.repeats = None if len(keys) > 1 and native_reader.repeated_across(keys) else False
