"""The native Kineto reader (analyzer/_kineto.c), a C extension; everything else is in pyproject.toml.

Here rather than in pyproject.toml, whose table for extensions setuptools still calls experimental (and
warns at every install). Optional: a machine without a C compiler still installs, and ingest.py then reads
every part with DuckDB's JSON reader, which gives the same rows, slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kernelscope.analyzer._kineto", ["analyzer/_kineto.c"], optional=True)])
