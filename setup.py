"""The native Kineto reader (analyzer/_kineto.c) and held.py's sweep (analyzer/_held.c), C extensions; everything
else is in pyproject.toml.

Here rather than in pyproject.toml, whose table for extensions setuptools still calls experimental (and
warns at every install). Optional: a machine without a C compiler still installs, and ingest.py then reads
every part with DuckDB's JSON reader, and held.py runs held_by_sql.sql, which give the same rows, slower.
"""

from setuptools import Extension, setup

ARROW = "analyzer/arrow_c.h"  # the Arrow C structs both share (depends: so the sdist holds it)
# the native reader's parts, each named for what it holds, included by _kineto.c into one translation unit
KINETO_PARTS = [
    f"analyzer/kineto_{part}.h" for part in ("buffers", "strings", "values", "events", "arrow", "part_facts", "repeats")
]
PAGES = "analyzer/pages.h"  # large arrays in maps of their own
HELD = [ARROW, PAGES, "analyzer/held_rows.h"]

setup(
    ext_modules=[
        Extension(
            "kernelscope.analyzer._kineto", ["analyzer/_kineto.c"], depends=[ARROW, PAGES, *KINETO_PARTS], optional=True
        ),
        Extension("kernelscope.analyzer._held", ["analyzer/_held.c"], depends=HELD, optional=True),  # held.py
    ]
)
