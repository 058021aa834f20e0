"""Short kernel names (analyzer/kernel_names.sql, the ``kernel_short`` macro; short_names.sql for ties): checked on
every kernel name of sample_traces/ and sample_traces/external/ (ATen, cuDNN, cuBLAS/cuBLASLt, CUTLASS, xmma,
triton, ROCm/Tensile, mangled names) against an independent reading of the C++ names."""

import gzip
import re
from collections import defaultdict

import duckdb
import orjson
import pytest
from conftest import REPO
from kernelscope.analyzer import archive_runs, load_run
from kernelscope.analyzer.archive import Archive
from kernelscope.analyzer.kernel_names import define_kernel_short, short_kernel_names

DEVICE_CATEGORIES = {"kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
# what a name may differ in and still share a short name: scalar types, booleans, the plumbing that ATen's
# TensorIterator kernels and cub/rocprim carry in every name, and ATen's wrappers that say how a functor is applied
# (a scalar operand, casts or not); numbers, namespaces, parameter lists and lambda numbering come on top
# (canonical() below)
NO_IDENTITY = {
    *"ReduceOp func_wrapper_t AUnaryFunctor BUnaryFunctor BinaryFunctor gpu_kernel_impl gpu_kernel_impl_nocast".split(),
    *"void const volatile lambda operator unsigned signed int long short char float double bool true false".split(),
    *"Half BFloat16 __half __nv_bfloat16 __hip_bfloat16 bfloat16_t half_t size_t float2 int2 int3 int4".split(),
    *"array Array OffsetCalculator TrivialOffsetCalculator LoadWithoutCast StoreWithoutCast LoadWithCast".split(),
    *"StoreWithCast OpaqueType TensorListMetadata policy_hub Policy1000 NullType ScanTileState use_default".split(),
}


@pytest.fixture(scope="module")
def every_name() -> list[str]:
    """Every device event name of the sample traces, read straight from the files."""
    paths = [
        *(REPO / "sample_traces").glob("*/trace.json.gz"),
        *(REPO / "sample_traces" / "external").glob("*.json*"),
        *(REPO / "sample_traces" / "plain_kineto").glob("*.json.gz"),
    ]
    names = set()
    for path in paths:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for event in orjson.loads(raw)["traceEvents"]:
            if isinstance(event, dict) and event.get("cat") in DEVICE_CATEGORIES and event.get("name"):
                names.add(event["name"])
    assert len(names) > 250 and any(name.startswith("Cijk_") for name in names), "ROCm names are in the set"
    return sorted(names)


def shorten(names: list[str]) -> dict[str, str]:
    con = duckdb.connect()
    define_kernel_short(con)
    return dict(con.execute("SELECT name, kernel_short(name) FROM unnest(?) AS t(name)", [names]).fetchall())


def outside_parentheses(name: str) -> str:
    kept, depth = [], 0
    for char in name:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def canonical(name: str) -> tuple[str, ...]:
    """The identifiers that tell a C++ kernel name apart: outside parameter lists, not namespaces, not in
    NO_IDENTITY."""
    text = re.sub(r"::(\{[^}]*\}|operator)", " ", outside_parentheses(name))  # X::{lambda}: X is a function
    words = re.findall(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_]|::)", text)  # not 2ul
    return tuple(word for word in words if word not in NO_IDENTITY)


def base(name: str) -> str:
    """A C++ kernel's own name: the identifier before its template arguments or parameters."""
    head = re.split(r"[<(]", outside_parentheses(name.removeprefix("void ")), maxsplit=1)[0]
    return head.rsplit("::", 1)[-1].strip()


@pytest.mark.parametrize(
    "full, short",
    [
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::"
            "{lambda(c10::Half)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::"
            "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
            "operator()() const::{lambda(c10::Half)#1}, std::array<char*, 2ul>)",
            "vectorized_elementwise_kernel<GeluCUDAKernelImpl>",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
            "unsigned int, long, 4, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, "
            "long, 4, 4>)",
            "reduce_kernel<ArgMaxOps>",
        ),
        ("triton_poi_fused_gelu_view_2", "triton_poi_fused_gelu_view_2"),
        ("nvjet_sm90_tst_96x64_64x8_1x2_h_bz_bias_NNN", "nvjet_sm90_tst_96x64_64x8_1x2_h_bz_bias_NNN"),
        ("Memcpy DtoH (Device -> Pinned)", "Memcpy DtoH (Device -> Pinned)"),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x6_nn_align2>"
            "(cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x6_nn_align2::Params)",
            "Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_64x64_64x6_nn_align2>",
        ),
        (
            "void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 4, false, false>"
            "(c10::Half*, c10::Half const*, int, int, int, bool const*, int, bool)",
            "softmax_warp_forward",
        ),
        (
            "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x32x512_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1",
            "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x32x512_MI16x16x1_SN_LDSB1_AFC…",
        ),
    ],
)
def test_the_rule_on_names_of_each_kind(full, short):
    assert shorten([full])[full] == short


def test_every_sample_kernel_keeps_its_own_name_within_80_characters(every_name):
    shorts = shorten(every_name)
    for full, short in shorts.items():
        assert 0 < len(short) <= 80, full
        if "<" in full or "::" in full:
            assert short.startswith(base(full)), (full, short)
            if not short.endswith("…"):  # every identifier that tells the kernel apart is kept
                kept = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", short))
                assert set(canonical(full)) <= kept, (full, short, set(canonical(full)) - kept)
        else:
            assert short == full or (short.endswith("…") and full.startswith(short[:-1])), full


def test_short_names_coincide_only_where_full_names_differ_in_numbers_types_or_plumbing(every_name):
    groups = defaultdict(list)
    for full, short in shorten(every_name).items():
        groups[short].append(full)
    shared = {short: fulls for short, fulls in groups.items() if len(fulls) > 1}
    assert shared, "the sample names do hold kernels that differ only in dtype or launch shape"
    for short, fulls in shared.items():
        if not any("<" in full or "::" in full for full in fulls):  # plain names tie only where the cut joins them
            assert short.endswith("…") and all(len(full) > 80 and full.startswith(short[:-1]) for full in fulls)
            continue
        assert all(("<" in full or "::" in full) for full in fulls), f"a plain name tied a C++ one: {short}"
        assert len({canonical(full) for full in fulls}) == 1, (short, [canonical(full) for full in fulls])


def test_the_kernels_of_one_table_never_look_alike(every_name):
    shown = short_kernel_names(every_name)
    assert len(set(shown.values())) == len(every_name)
    half = "void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 4, false, false>(int)"
    single = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*)"
    assert short_kernel_names([single, half, None]) == {
        half: "softmax_warp_forward [1]",  # numbered in the order of their full names
        single: "softmax_warp_forward [2]",
    }
    assert short_kernel_names([single]) == {single: "softmax_warp_forward"}


def test_sql_of_a_run_and_of_an_archive_has_the_macro(tmp_path):
    demo = REPO / "sample_traces" / "demo"
    query = "SELECT count(DISTINCT kernel) AS full, count(DISTINCT kernel_short(kernel)) AS short FROM kernels"
    with load_run(demo) as run:
        full, short = run.sql(query).iloc[0]
        assert 0 < short <= full
    archive_runs([demo], tmp_path / "archive")
    with Archive(tmp_path / "archive") as archive:
        assert tuple(archive.sql(query).iloc[0]) == (full, short)
