"""The traces of other projects in tests/data/wild/ (see its README): each loads as the reference attributes it, with
what makes it a writer of its own."""

import pytest
from conftest import TESTS
from kernelscope.analyzer import load_run
from kernelscope.analyzer.errors import BadInputError
from reference import assert_matches_reference

WILD = TESTS / "data" / "wild"


@pytest.mark.parametrize("path", sorted(WILD.glob("*.json")), ids=lambda p: p.name)
def test_every_wild_trace_matches_the_reference_attribution(path):
    with load_run(path) as run:
        assert_matches_reference(run, path)


def test_a_windows_cpu_trace_is_its_operators_by_self_time():
    """torch 2.1 on Windows, CPU only: integer epoch µs, no baseTimeNanoseconds, no process metadata, "__int64"
    inputs, and profile_memory's "[memory]" instants (cpu_instant_event), which are no operator."""
    with load_run(WILD / "windows_cpu_resnet18.json") as run:
        frame = run.profiling_df()
    assert len(frame) == 25 and set(frame["kind"]) == {"cpu"}
    # self times add up to the five outermost operators' spans: conv2d, add_, batch_norm, relu_, max_pool2d
    assert frame["kernel_us"].sum() == 12_257 + 61 + 6_461 + 1_618 + 36_621
    assert set(frame["function_name"]) == {"aten::conv2d", "aten::add_", "aten::batch_norm", "aten::relu_",
                                           "aten::max_pool2d"}  # fmt: skip


def test_an_a100_trace_with_flow_finishes_on_the_host_links_each_kernel_to_its_launch():
    """Kineto writes each cudaFuncGetAttributes an ac2g finish on the CPU thread (no start), and the
    cudaDeviceSynchronize a start (no finish): neither is a device event's link, and each cuBLAS kernel is its
    cudaLaunchKernelExC's, inside aten::mm inside aten::matmul."""
    with load_run(WILD / "gpumodel_a100_mm.json") as run:
        frame = run.profiling_df()
        check = run.launch_check()
    assert list(frame["op"]) == ["aten::mm"] * 5 and set(frame["function_name"]) == {"aten::matmul"}
    assert list(frame["correlation"]) == [12, 27, 42, 57, 72]
    assert round(frame["kernel_us"].sum(), 3) == 85.247
    assert (check.launches, check.launches_without_device_event, check.device_events_without_launch) == (5, 0, 0)


def test_a_trace_of_uncategorized_cuda_driver_calls_is_refused_naming_what_it_lacks():
    """An eBPF tracer's Chrome trace (floritange/ebpf_cuda_monitoring): CUDA driver calls (cuMemAlloc_v2,
    cuLaunchKernel…) with no category, no kernel and no operator, displayTimeUnit "ns". Refused in one sentence that
    says its events have no category, as every event torch.profiler writes has."""
    path = WILD / "refused" / "ebpf_cuda_driver_calls.json"
    with pytest.raises(BadInputError) as raised:
        load_run(path)
    assert str(raised.value) == (
        f"{path}: holds no device events (kernel, memcpy, memset) and no CPU operators: none of its 36 events has a "
        "category (cat), which every event of torch.profiler has (the first: 'cuMemAlloc_v2'), not a torch.profiler "
        "trace"
    )
