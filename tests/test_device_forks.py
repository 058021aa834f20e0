"""Traces of Kineto's forks for other devices, which name their categories after the device: Moore Threads'
(MooreThreads/kineto: musa_runtime, musa_driver), Cambricon's (mlu_runtime, mlu_memcpy, mlu_memset), a PrivateUse1
backend's (privateuse1_kernel, privateuse1_memcpy, privateuse1_runtime), and Kineto's own device-agnostic runtime and
driver (libkineto/include/ActivityType.h, RUNTIME and DRIVER). Each is a real trace (TraceLens's H100 BERT) with its
categories renamed as the fork's ActivityType table names them, and its ac2g flows left out, so that only the
categories link each device event to its launch."""

import gzip
import json
from pathlib import Path

import pytest
from conftest import assert_rows_as_original
from kernelscope.analyzer import load_run
from reference import assert_matches_reference

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "external" / "tl_h100_bert_small.json.gz"
FORKS = {
    "musa": {"cuda_runtime": "musa_runtime", "cuda_driver": "musa_driver"},
    "mlu": {"cuda_runtime": "mlu_runtime", "gpu_memcpy": "mlu_memcpy", "gpu_memset": "mlu_memset"},
    "privateuse1": {
        "kernel": "privateuse1_kernel",
        "gpu_memcpy": "privateuse1_memcpy",
        "cuda_runtime": "privateuse1_runtime",
    },
    "agnostic": {"cuda_runtime": "runtime", "cuda_driver": "driver", "gpu_memcpy": "memcpy"},
}


@pytest.mark.parametrize("fork", FORKS)
def test_a_fork_s_device_events_and_launches_are_read_as_kineto_s(tmp_path, fork):
    """Its device events were CPU rows or left out, its launches unknown (every device event 'without launch', or
    named only by its operator's External id): each row now is the original trace's, launch check included."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    renamed = FORKS[fork]
    doc["traceEvents"] = [
        {**e, "cat": renamed.get(e.get("cat"), e.get("cat"))} for e in doc["traceEvents"] if e.get("cat") != "ac2g"
    ]
    path = tmp_path / f"{fork}.json"
    path.write_text(json.dumps(doc))
    with load_run(BERT) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        assert_rows_as_original(run, original)
        assert run.launch_check() == original.launch_check()
        assert run.launch_check().launches == 60
