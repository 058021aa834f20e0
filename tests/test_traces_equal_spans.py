"""A Python call frame and the operator it dispatches can have the same span: in a trace of integer microseconds
(ROCm's libkineto through roctracer) six of ten `torch.mm` calls have the same start and end as their `aten::mm`. The
frame (`<built-in method mm>`, the binding that calls the dispatcher) holds the operator, whatever their order in the
file, so the call's operator is `aten::mm` for every call."""

import json
import random
from pathlib import Path

import pytest
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

ROCTRACER = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_mi300_roctracer_gemm.json"


@pytest.mark.parametrize("order", ["as written", "frames first", "shuffled"])
def test_a_call_frame_holds_the_operator_of_its_own_span_in_any_order(tmp_path, order):
    doc = json.loads(ROCTRACER.read_text())
    events = doc["traceEvents"]
    if order == "frames first":
        events.sort(key=lambda e: e.get("cat") != "python_function")
    elif order == "shuffled":
        random.Random(7).shuffle(events)
    path = tmp_path / "roctracer.json"
    path.write_text(json.dumps(doc))
    with load_run(path) as run:
        assert_matches_reference(run, path)
        frame = run.profiling_df()
    rows = set(frame[["function_name", "op", "call_op"]].itertuples(index=False, name=None))
    assert rows == {("torch.mm", "aten::mm", "aten::mm")}
