"""Which scopes inductor's kernels get from its wrapper code's origin comments (recorder/inductor_kernels.py), on a
wrapper source written as inductor writes it for a GPU (Triton kernels, whose launches CI cannot run) and the nodes
of dynamo's graph as ``_node_call`` reads them: exact where the source nodes are one call in one module, the common
module where a kernel fuses several calls, nothing where a node ran in a module the compiled frame does not own."""

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
