"""Which scopes inductor's kernels get from its wrapper code's origin comments (recorder/inductor_kernels.py), on a
wrapper source written as inductor writes it for a GPU (Triton kernels, whose launches CI cannot run) and the nodes
of dynamo's graph as ``_node_call`` reads them: exact where the source nodes are one call in one module, the common
module where a kernel fuses several calls, nothing where a node ran in a module the compiled frame does not own."""

import types

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import inductor_kernels  # noqa: E402

SOURCE = '''
# kernel path: /tmp/x.py
# Topologically Sorted Source Nodes: [relu], Original ATen: [aten.relu]
# Source node to ATen node mapping:
#   relu => relu_default

triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', """...""")

# Topologically Sorted Source Nodes: [gelu, add], Original ATen: [aten.gelu, aten.add]
triton_poi_fused_add_gelu_1 = async_compile.triton('triton_poi_fused_add_gelu_1', """...""")

# Topologically Sorted Source Nodes: [linear_2], Original ATen: [aten.addmm]
triton_tem_fused_addmm_2 = async_compile.triton('triton_tem_fused_addmm_2', """...""")

def call(args):
    # Topologically Sorted Source Nodes: [gelu, linear], Original ATen: [aten.gelu, aten.addmm]
    extern_kernels.addmm(a, b, c, out=buf0)
    triton_poi_fused_relu_0.run(buf0, stream=stream0)
'''
NODES = {  # node name -> (module under the compiled frame's self, call)
    "relu": ("", "torch.relu"),
    "gelu": ("blocks.0.mlp", "gelu"),
    "add": ("blocks.0", "Tensor.__add__"),
    "linear": ("blocks.0.mlp.fc", "linear"),
    "linear_2": (None, "linear"),  # a module the compiled function was handed: L['model'].fc
}


class Kernel:
    def run(self, *args, **kwargs):
        return args


def test_kernels_get_the_scopes_their_source_nodes_say_exactly():
    namespace = {name: Kernel() for name in ("triton_poi_fused_relu_0", "triton_poi_fused_add_gelu_1",
                                             "triton_tem_fused_addmm_2")}  # fmt: skip
    namespace.update(extern_kernels=object(), __file__="/tmp/x.py")
    sites = {key: value for _, key, value in inductor_kernels._kernel_sites(SOURCE, namespace, NODES)}
    assert sites["triton_poi_fused_relu_0"]._scopes == ("", "torch.relu"), "one call, in the frame's own module"
    assert sites["triton_poi_fused_add_gelu_1"]._scopes == ("blocks.0", None), "two calls: their module, no call"
    assert "triton_tem_fused_addmm_2" not in sites, "a node of a module the frame does not own names nothing"
    assert sites["extern_kernels"]._lines == {17: ("blocks.0.mlp.fc", "linear")}, "the last source node, its line"
    assert sites["triton_poi_fused_relu_0"].run(1, 2) == (1, 2), "unrecorded, the kernel runs as it is"


CPU_SOURCE = '''
def call(args):
    # Topologically Sorted Source Nodes: [transpose, conv1d], Original ATen: [aten.transpose, aten.convolution]
    buf1 = extern_kernels.convolution(args[0])
    # Topologically Sorted Source Nodes: [q_1, scaled_dot_product_attention], Original ATen: [aten.transpose, aten.relu]
    buf2 = torch.ops.aten.relu.default(buf1)
    buf3 = torch.ops.aten.neg.default(buf2)
    return (buf3, torch.float32)
'''  # fmt: skip
CPU_NODES = {"transpose": ("", None), "conv1d": ("conv", "conv1d"), "q_1": ("attn", None),
             "scaled_dot_product_attention": ("attn", "scaled_dot_product_attention")}  # fmt: skip


def test_fallback_calls_and_extern_results_on_the_cpu_get_their_source_nodes_scopes(monkeypatch):
    """As inductor writes a CPU graph's wrapper: an extern kernel whose result is assigned (``buf1 =
    extern_kernels.convolution(...)``) and an ATen fallback
    (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(...)``; ``relu`` here) under its origin
    comment open the scopes of their last source node; a fallback line without one (``neg``) opens none, and every
    other use of ``torch`` is torch's own."""
    externs = types.SimpleNamespace(convolution=lambda x: x * 2)
    namespace = {"extern_kernels": externs, "torch": torch, "__file__": "/tmp/y.py"}
    exec(compile(CPU_SOURCE, "/tmp/y.py", "exec"), namespace)  # noqa: S102 - the wrapper's own form, run for real
    opened = []

    class Scope:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            opened.append(self.name)

        def __exit__(self, *exc):
            opened.append("/" + self.name)

    monkeypatch.setattr(inductor_kernels, "_Scope", Scope)
    monkeypatch.setattr(inductor_kernels, "_recorded", lambda: True)
    sites = inductor_kernels._kernel_sites(CPU_SOURCE, namespace, CPU_NODES)
    assert {key for _, key, _ in sites} == {"extern_kernels", "torch"}
    for _, key, value in sites:
        monkeypatch.setitem(namespace, key, value)
    token = inductor_kernels.COMPILED_MODULE_SCOPE.set("ks.module:_orig_mod")
    try:
        out, dtype = namespace["call"]([torch.tensor([-1.0, 2.0])])
    finally:
        inductor_kernels.COMPILED_MODULE_SCOPE.reset(token)
    assert out.tolist() == [-0.0, -4.0] and dtype is torch.float32, "the same calls, the same results"
    assert opened == ["ks.module:_orig_mod.conv", "ks.fn:conv1d", "/ks.fn:conv1d", "/ks.module:_orig_mod.conv",
                      "ks.module:_orig_mod.attn", "ks.fn:scaled_dot_product_attention",
                      "/ks.fn:scaled_dot_product_attention", "/ks.module:_orig_mod.attn"]  # fmt: skip
