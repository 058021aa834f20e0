"""kernelscope.analyzer: run directories and Kineto traces in DuckDB. Never imports torch."""

from .errors import BadInputError, KernelscopeError, RecordingBusyError, RunExistsError
from .run import LaunchCheck, Run, load_run
from .samples import ObjectRepr, TensorMeta
from .summary import describe_results

__all__ = [
    "BadInputError",
    "KernelscopeError",
    "LaunchCheck",
    "ObjectRepr",
    "RecordingBusyError",
    "Run",
    "RunExistsError",
    "TensorMeta",
    "describe_results",
    "load_run",
]
