"""benchmarks/profile_stages.py: a profile() timed stage by stage still profiles, times each recorder step and the
analyzer's inside load_run, and leaves the recorder as it found it."""

import os
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # benchmarks/workload.py picks its device at import
import profile_stages  # noqa: E402
import workloads_small  # noqa: E402
from kernelscope.recorder import profiler, samples  # noqa: E402


def test_each_stage_of_a_profile_is_timed_and_the_timers_go():
    originals = (
        profiler.load_run,
        profiler.write_run,
        profiler.ModuleFunctionKernelProfiler._in_process_frame,
        samples.SampleBook.function_data,
    )
    runs = profile_stages.timed_profiles(workloads_small.tiny(), warmup=3, repeat=1)
    assert (
        profiler.load_run,
        profiler.write_run,
        profiler.ModuleFunctionKernelProfiler._in_process_frame,
        samples.SampleBook.function_data,
    ) == originals
    assert all(len(values) == 1 for values in runs.values()), "the two untimed calls are left out"
    whole = runs["profile()"][0]
    recorder = [
        runs[stage][0]
        for stage in (
            "patched passes (recorded pass in)",
            "write the run directory",
            "load_run",
            "in-process frame",
            "release",
        )
    ]
    assert all(value > 0 for value in recorder) and sum(recorder) < whole
    assert runs["  load_run/attribution_rows.sql/kernels"][0] > 0 and runs["  load_run/ingest"][0] > 0
    assert abs(sum(recorder) + runs["function_data"][0] + runs["other"][0] - whole) < 1e-6
