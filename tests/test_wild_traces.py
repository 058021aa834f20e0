"""Real traces of writers other than torch.profiler on CUDA (sample_traces/external/), each one of a kind the others are
not: every one loads, and its rows are the reference's (tests/reference.py)."""

import json
from pathlib import Path

import pytest
from kernelscope.analyzer import load_run
from kernelscope.analyzer.errors import BadInputError
from reference import assert_matches_reference

REPO = Path(__file__).resolve().parent.parent
EXTERNAL = REPO / "sample_traces" / "external"
ROCTRACER = EXTERNAL / "tl_mi300_roctracer_gemm.json"  # launches and kernels linked by "External id" alone


def test_a_roctracer_trace_links_its_kernels_to_their_launches_by_external_id():
    """A ROCm build of libkineto that traces through roctracer writes no correlation: a launch and its kernel carry
    the roctracer correlation id as "External id" (the ac2g flows between them too), and the operators External ids
    of another counter. Every kernel reaches its launch, and its operator by the launch's place in time."""
    with load_run(ROCTRACER) as run:
        assert_matches_reference(run, ROCTRACER)
        frame = run.profiling_df()
        assert len(frame) == 20 and set(frame["op"]) == {"aten::mm"} and set(frame["function_name"]) == {"torch.mm"}
        assert round(frame["kernel_us"].sum()) == 10_890
        check = run.launch_check()
        assert (check.launches, check.launches_without_device_event, check.device_events_without_launch) == (20, 0, 0)
        # the External ids are correlations, not operators': none of them names an operator of the trace
        linked = "SELECT count(*), count(external_id) FROM events WHERE cat IN ('kernel', 'cuda_runtime')"
        assert run.con.execute(linked).fetchone() == (52, 0)


def test_an_event_without_correlation_in_a_trace_that_writes_them_is_still_refused(tmp_path):
    """External ids stand for correlations only where no device event and no launch has one: in a trace that
    writes correlations, a kernel without one is a fault, and its External id (its operator's) would link it to
    whichever launch has that number for correlation."""
    doc = json.loads(ROCTRACER.read_text())
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cuda_runtime") and e.get("ph") == "X":
            e["args"]["correlation"] = e["args"].pop("External id")
    kernel = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    doc["traceEvents"][kernel]["args"]["External id"] = doc["traceEvents"][kernel]["args"].pop("correlation")
    path = tmp_path / "one_kernel_unlinked.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInputError, match=rf"traceEvents\[{kernel}\] \(kernel 'Cijk_.*has no args.correlation$"):
        load_run(path)
