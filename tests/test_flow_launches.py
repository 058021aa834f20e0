"""Device events whose launch the trace lacks but whose flow arrow it keeps are launched where the flow starts."""

import gzip
import json
from pathlib import Path

from conftest import assert_rows_as_original
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"


def _rewritten_reads_as_original(doc: dict, path: Path, original: Path):
    """``doc`` written to ``path`` gives the reference's rows and ``original``'s; returns its frame and launch check."""
    path.write_text(json.dumps(doc))
    with load_run(original) as before, load_run(path) as run:
        assert_matches_reference(run, path)
        assert_rows_as_original(run, before)
        return run.profiling_df(), run.launch_check(), before.launch_check()


def test_kernels_whose_launches_were_lost_are_placed_by_their_flows(tmp_path):
    """TraceLens's H100 BERT trace without its cudaLaunchKernel calls (a profiler that lost them), its ac2g flows
    kept: each kernel is held where its flow starts, as the launch there held it, and the launch check counts no
    kernel without a launch (it counted the 34); the memcpy keeps its launch."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    lost = [e for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel"]
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "cudaLaunchKernel"]
    _frame, check, before = _rewritten_reads_as_original(doc, tmp_path / "lost_launches.json", BERT)
    counted = (check.launches, check.launches_without_device_event, check.device_events_without_launch)
    assert counted == (before.launches - len(lost), 0, 0) and len(lost) == 34


GRAPH = Path(__file__).resolve().parent.parent / "sample_traces" / "cuda_graph" / "trace.json.gz"


def test_a_graph_launch_whose_flow_finishes_on_every_kernel_of_its_replay_places_them_all(tmp_path):
    """The CUDA graph sample without correlations or the device events' and launches' External ids (a writer that
    links them by flows alone): the replay's three kernels finish the one flow of its cudaGraphLaunch, a flow of
    several finishes, which stream order allows (nothing launched later ran before them), so every kernel is the
    replay's, as with its correlations."""
    doc = json.loads(gzip.decompress(GRAPH.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and isinstance(e.get("args"), dict):
            e["args"].pop("correlation", None)
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"):
                e["args"].pop("External id", None)
    frame, check, _before = _rewritten_reads_as_original(doc, tmp_path / "graph_by_flows.json", GRAPH)
    assert list(frame["function_name"]).count("torch.cuda.CUDAGraph.replay") == 3
    assert frame["thread"].notna().all() and check.device_events_without_launch == 0
