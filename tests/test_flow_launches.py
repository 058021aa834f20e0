"""Device events whose launch the trace lacks but whose flow arrow it keeps are launched where the flow starts."""

import gzip
import json
from pathlib import Path

from conftest import assert_rows_as_original
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"


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
        assert_rows_as_original(run, original)
        check = run.launch_check()
        counted = (check.launches, check.launches_without_device_event, check.device_events_without_launch)
        assert counted == (original.launch_check().launches - len(lost), 0, 0) and len(lost) == 34
