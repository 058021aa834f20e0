"""kernelscope.analyzer: run directories and Kineto traces in DuckDB. Never imports torch."""

# first: importing it starts making the process's DuckDB instance on a thread while the rest imports (connection.py)
from . import connection  # noqa: F401
from .archive import Archive, archive_runs, open_archive
from .diff import diff
from .errors import (
    BadInputError,
    BadSamplesError,
    KernelscopeError,
    OutputExistsError,
    RecordingBusyError,
    RunExistsError,
)
from .rank_parts import LaunchCheck, RankPart
from .run import Run, load_run
from .samples import ObjectRepr, TensorMeta
from .summary import describe_results

__all__ = [
    "Archive",
    "BadInputError",
    "BadSamplesError",
    "KernelscopeError",
    "LaunchCheck",
    "ObjectRepr",
    "OutputExistsError",
    "RecordingBusyError",
    "Run",
    "RunExistsError",
    "RankPart",
    "TensorMeta",
    "archive_runs",
    "describe_results",
    "diff",
    "load_run",
    "open_archive",
]
