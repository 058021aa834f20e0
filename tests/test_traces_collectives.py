"""Kineto's collective_comm events (docs/analysis.md, Communication events): as its XPU plugin writes them, host-side
spans on the process's pid and the calling thread's tid, they are CPU-side and change nothing; filed under a device's
pid and a stream's tid, they are device time kernelscope does not attribute, and the note says so."""

import gzip
import json
from pathlib import Path

from kernelscope.analyzer import load_run

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"


def _with_collectives(tmp_path: Path, on_device: bool) -> Path:
    """The H100 BERT trace with an xccl::allreduce around each of its first three launches: on the launching thread
    (Kineto's XPU plugin: Communicator_id, no correlation), or on the device's pid and a stream of its own."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    launches = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaLaunchKernel"]
    device = next(e["pid"] for e in doc["traceEvents"] if e.get("cat") == "kernel")
    for n, launch in enumerate(launches[:3]):
        where = {"pid": device, "tid": 99} if on_device else {"pid": launch["pid"], "tid": launch["tid"]}
        span = {"ts": launch["ts"], "dur": launch["dur"], "args": {"Communicator_id": n}}
        doc["traceEvents"].append({"ph": "X", "cat": "collective_comm", "name": "xccl::allreduce", **where, **span})
    path = tmp_path / f"collectives_{'device' if on_device else 'host'}.json"
    path.write_text(json.dumps(doc))
    return path


def test_host_side_collectives_change_no_row_and_get_no_note(tmp_path):
    path = _with_collectives(tmp_path, on_device=False)
    with load_run(BERT) as run:
        expected = run.profiling_df().drop(columns=["event_id", "call_event_id"])
    with load_run(path) as run:
        assert run.notes() == []
        got = run.profiling_df().drop(columns=["event_id", "call_event_id"])
    assert got.equals(expected)


def test_collectives_on_a_device_are_noted_as_device_time_not_attributed(tmp_path):
    path = _with_collectives(tmp_path, on_device=True)
    with load_run(path) as run:
        (note,) = run.notes()
        rows = len(run.profiling_df())
    assert note.startswith(f"{path}: holds device events that kernelscope does not attribute: 3 collective_comm (")
    assert rows == 61
