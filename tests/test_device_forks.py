"""Traces of Kineto's forks for other devices, which name their categories after the device: Moore Threads'
(MooreThreads/kineto: musa_runtime, musa_driver), Cambricon's (mlu_runtime, mlu_memcpy, mlu_memset), a PrivateUse1
backend's (privateuse1_kernel, privateuse1_memcpy, privateuse1_runtime), MTIA's (mtia_ccp_events, mtia_runtime), and
Kineto's own device-agnostic runtime and driver (libkineto/include/ActivityType.h, RUNTIME and DRIVER). Each is a
real trace (TraceLens's H100 BERT) with its categories renamed as the fork's ActivityType table names them, and its
ac2g flows left out, so that only the categories link each device event to its launch."""

import gzip
import json
from pathlib import Path

import pytest
from conftest import assert_reads_as_original
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
    # MTIA's on-device events, which libkineto's ActivityType.h now aliases to its kernels (MTIA_CCP_EVENTS =
    # CONCURRENT_KERNEL) and torch's deviceTypeFromActivity counts as device activity, and its runtime's calls
    "mtia": {"cuda_runtime": "mtia_runtime", "cuda_driver": "mtia_runtime", "kernel": "mtia_ccp_events"},
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
    assert_reads_as_original(doc, tmp_path / f"{fork}.json", BERT)


# The kernel launches of each runtime by their own names (the rest keep CUDA's): Moore Threads' MUSA mirrors CUDA's
# API (musaLaunchKernel, muLaunchKernel); Intel's Unified Runtime and Level Zero (urEnqueueKernelLaunch,
# zeCommandListAppendLaunchKernel; Kineto's XPU plugin, XPUActivity.h, draws its flows from these calls); Cambricon's
# CNDrv (cnInvokeKernel, cnInvokeKernelEx: torch_mlu's kineto_mlu, cnpapi_activity_api.cpp, traces them).
LAUNCH_NAMES = {
    "musa": ("musa_runtime", "musa_driver", {"cudaLaunchKernel": "musaLaunchKernel",
                                             "cudaLaunchKernelExC": "musaLaunchKernelExC",
                                             "cuLaunchKernel": "muLaunchKernel"}),
    "xpu": ("xpu_runtime", "xpu_driver", {"cudaLaunchKernel": "urEnqueueKernelLaunch",
                                          "cudaLaunchKernelExC": "urEnqueueKernelLaunchCustomExp",
                                          "cuLaunchKernel": "zeCommandListAppendLaunchKernel"}),
    "mlu": ("mlu_runtime", "mlu_driver", {"cudaLaunchKernel": "cnInvokeKernel",
                                          "cudaLaunchKernelExC": "cnInvokeKernelEx",
                                          "cuLaunchKernel": "cnInvokeKernel"}),
}  # fmt: skip


@pytest.mark.parametrize("fork", LAUNCH_NAMES)
def test_a_kernel_launch_of_another_runtime_without_its_kernel_is_counted_lost(tmp_path, fork):
    """The launch check counts every runtime's kernel launches, by the names its runtime gives them, not only CUDA's
    and ROCm's (cu…, hip…): with one kernel left out, its launch is the one launch without a device event."""
    doc = json.loads(gzip.decompress(BERT.read_bytes()))
    runtime, driver, names = LAUNCH_NAMES[fork]
    cats = {"cuda_runtime": runtime, "cuda_driver": driver}
    dropped = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    doc["traceEvents"] = [
        {**e, "cat": cats.get(e.get("cat"), e.get("cat")), "name": names.get(e.get("name"), e.get("name"))}
        if e.get("cat") in cats else e
        for e in doc["traceEvents"]
        if e is not dropped
    ]  # fmt: skip
    path = tmp_path / f"{fork}.json"
    path.write_text(json.dumps(doc))
    with load_run(BERT) as original, load_run(path) as run:
        assert_matches_reference(run, path)
        check = run.launch_check()
        assert (check.launches, check.launches_without_device_event) == (original.launch_check().launches, 1)
        assert check.device_events == original.launch_check().device_events - 1
