"""DuckDB's native module, imported by connection.py before anything else of the analyzer imports it: where the
``kernelscope`` command handles signals (kernelscope.interrupts, found in sys.modules: the analyzer never imports
the CLI), the raise of one that comes while the module initializes is held back until it has, as a
KeyboardInterrupt raised inside its initialization made nanobind abort the process."""

import contextlib
import sys

with getattr(sys.modules.get("kernelscope.interrupts"), "signals_deferred", contextlib.nullcontext)():
    import duckdb

__all__ = ["duckdb"]
