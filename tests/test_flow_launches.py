"""Device events whose launch the trace lacks but whose flow arrow it keeps are launched where the flow starts."""

import gzip
import json
from pathlib import Path

from kernelscope.analyzer import load_run
from reference import assert_matches_reference

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"
COLUMNS = ["kernel", "kind", "op", "call_op", "function_name", "module_name", "kernel_us"]


def test_kernels_whose_launches_were_lost_are_placed_by_their_flows(tmp_path):
    """TraceLens's H100 BERT trace without its cudaLaunchKernel calls (a profiler that lost them), its ac2g flows
    kept: each kernel is held where its flow starts, as the launch there held it, and the launch check counts no
    kernel without a launch (it counted the 34); the memcpy keeps its launch."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    lost = [e for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel"]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "cudaLaunchKernel"]
    path = tmp_path / "lost_launches.json"
    path.write_text(json.dumps(doc))
    with load_run(BERT) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        ours, theirs = (
            r.profiling_df().sort_values("event_id")[COLUMNS].reset_index(drop=True) for r in (run, original)
        )
        assert ours.equals(theirs)
        check = run.launch_check()
        counted = (check.launches, check.launches_without_device_event, check.device_events_without_launch)
        assert counted == (original.launch_check().launches - len(lost), 0, 0) and len(lost) == 34
