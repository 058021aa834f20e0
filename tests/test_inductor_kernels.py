"""Which scopes inductor's kernels get from its wrapper code's origin comments (recorder/inductor_kernels.py), on a
wrapper source written as inductor writes it for a GPU (Triton kernels, whose launches CI cannot run) and the nodes
of dynamo's graph as recorder/graph_nodes.py reads them: exact where the source nodes are one call in one module, the
common module where a kernel fuses several calls, nothing where a node ran in a module the compiled frame does not
own."""

import json
import types

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import graph_nodes, inductor_kernels  # noqa: E402

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
NODES = {  # node name -> (the frame's local its module is under, the module's path under it, call)
    "relu": ("self", "", "torch.relu"),
    "gelu": ("self", "blocks.0.mlp", "gelu"),
    "add": ("self", "blocks.0", "Tensor.__add__"),
    "linear": ("self", "blocks.0.mlp.fc", "linear"),
    "linear_2": ("model", "fc", "linear"),  # a module the compiled function was handed: L['model'].fc
}


def frame_self(local):
    """Paths under the compiled frame's own module, as with no compiled module's call around."""
    return "" if local == "self" else None


class Opened:
    """A scope that notes its name in ``opened`` as it opens and closes, in place of the profiler's."""

    def __init__(self, name, opened):
        self.name, self.opened = name, opened

    def __enter__(self):
        self.opened.append(self.name)

    def __exit__(self, *exc):
        self.opened.append("/" + self.name)


@pytest.fixture
def opened(monkeypatch):
    """The scopes the launches open, noted in order, as while recorded, with nothing resolved before."""
    opened = []
    monkeypatch.setattr(inductor_kernels, "_Scope", lambda name: Opened(name, opened))
    monkeypatch.setattr(inductor_kernels, "_recorded", lambda: True)
    monkeypatch.setattr(inductor_kernels, "_RESOLVED", {})
    monkeypatch.setattr(inductor_kernels, "_PATHS", {})
    return opened


class Kernel:
    def run(self, *args, **kwargs):
        return args


def test_kernels_get_the_scopes_their_source_nodes_say_exactly():
    namespace = {name: Kernel() for name in ("triton_poi_fused_relu_0", "triton_poi_fused_add_gelu_1",
                                             "triton_tem_fused_addmm_2")}  # fmt: skip
    namespace.update(extern_kernels=object(), __file__="/tmp/x.py")
    sites = {key: value for _, key, value in inductor_kernels._kernel_sites(SOURCE, namespace, {})}
    scopes = {
        key: inductor_kernels._scopes(getattr(site, "_origins", ()), NODES, frame_self) for key, site in sites.items()
    }
    assert scopes["triton_poi_fused_relu_0"] == ("", "torch.relu"), "one call, in the frame's own module"
    assert scopes["triton_poi_fused_add_gelu_1"] == ("blocks.0", None), "two calls: their module, no call"
    assert scopes["triton_tem_fused_addmm_2"] == (), "a node of a module the frame does not own names nothing"
    assert sites["extern_kernels"]._lines == {17: ("linear",)}, "the last source node, its line"
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
CPU_NODES = {"transpose": ("self", "", None), "conv1d": ("self", "conv", "conv1d"), "q_1": ("self", "attn", None),
             "scaled_dot_product_attention": ("self", "attn", "scaled_dot_product_attention")}  # fmt: skip


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
    monkeypatch.setattr(inductor_kernels, "_Scope", lambda name: Opened(name, opened))
    monkeypatch.setattr(inductor_kernels, "_recorded", lambda: True)
    sites = inductor_kernels._kernel_sites(CPU_SOURCE, namespace, {})
    assert {key for _, key, _ in sites} == {"extern_kernels", "torch"}
    for _, key, value in sites:
        monkeypatch.setitem(namespace, key, value)
    # the graph that runs is the one of the frame of the compiled module's own self
    monkeypatch.setattr(
        inductor_kernels, "_resolved", lambda origins, root: inductor_kernels._scopes(origins, CPU_NODES, frame_self)
    )
    token = inductor_kernels.COMPILED_MODULE_SCOPE.set(("ks.module:_orig_mod", None))
    try:
        out, dtype = namespace["call"]([torch.tensor([-1.0, 2.0])])
    finally:
        inductor_kernels.COMPILED_MODULE_SCOPE.reset(token)
    assert out.tolist() == [-0.0, -4.0] and dtype is torch.float32, "the same calls, the same results"
    assert opened == ["ks.module:_orig_mod.conv", "ks.fn:conv1d", "/ks.fn:conv1d", "/ks.module:_orig_mod.conv",
                      "ks.module:_orig_mod.attn", "ks.fn:scaled_dot_product_attention",
                      "/ks.fn:scaled_dot_product_attention", "/ks.module:_orig_mod.attn"]  # fmt: skip


class Block(torch.nn.Module):
    def forward(self, run):  # as a frame dynamo compiled runs its graph: the graph's L['self'] is this block
        return run()


def test_a_graph_of_a_frame_whose_self_is_a_submodule_gets_that_submodules_paths(opened):
    """A graph break inside a submodule's forward makes dynamo compile that forward as a frame of its own, whose
    graph's ``L['self']`` is the submodule: its kernels' modules are under the submodule, found from the frame that
    runs the graph, as are the nodes the kernel's source nodes name (inductor shares one wrapper among graphs it
    compiled alike); a frame whose ``self`` is no module of the compiled one's names nothing."""
    root = torch.nn.Module()
    root.blocks = torch.nn.ModuleList([Block(), Block()])
    launch = inductor_kernels._ScopedLaunches(Kernel(), ("linear_1",))
    other = inductor_kernels._ScopedLaunches(Kernel(), ("h",))  # a node of the graph inductor compiled first
    nodes = {"linear_1": ("self", "fc", "linear")}
    # the compiled function as dynamo's entry code (Block.forward's here) calls it
    graph = inductor_kernels._in_its_frame(lambda: launch.run(1) + other.run(2), nodes, {Block.forward.__code__})
    token = inductor_kernels.COMPILED_MODULE_SCOPE.set(("ks.module:_orig_mod", root))
    try:
        assert root.blocks[1](graph) == (1, 2)
        expected = [
            "ks.module:_orig_mod.blocks.1.fc",
            "ks.fn:linear",
            "/ks.fn:linear",
            "/ks.module:_orig_mod.blocks.1.fc",
        ]
        assert opened == expected, "the frame's self: blocks.1; h: a node the running graph does not hold"
        opened.clear()
        Block()(graph)
        assert opened == [], "a self outside the compiled module: not known here"
        launch.run(1)
        (lambda: graph())()
        assert opened == [], "no compiled function runs it, or no entry of its calls it: not known here"
    finally:
        inductor_kernels.COMPILED_MODULE_SCOPE.reset(token)


PROVENANCE_SOURCE = """
cpp_fused_native_layer_norm_0 = async_compile.cpp_pybinding(['float*'], r'''
extern "C" void kernel(float* in_out_ptr0) {}
''')
cpp_fused_add_view_1 = async_compile.cpp_pybinding(['float*'], r'''
''')
cpp_fused_relu_2 = async_compile.cpp_pybinding(['float*'], r'''
''')
"""
# torch._inductor.config.trace.provenance_tracking_level = 1: the compiled graph's inductor_provenance_mapping_str
PROVENANCE = {
    "cppCodeToPost": {"cpp_fused_native_layer_norm_0:1": ["var_mean", "mul"], "extern_kernels.addmm:2": ["addmm"],
                      "cpp_fused_add_view_1:3": ["add_2", "view_7"], "cpp_fused_relu_2:4": ["relu", "made_by_a_pass"]},
    "postToPre": {"var_mean": ["h_1"], "mul": ["h_1"], "addmm": ["linear"], "add_2": ["h_2"], "view_7": ["linear_1"],
                  "relu": ["relu"]},
}  # fmt: skip
PROVENANCE_NODES = {"h_1": ("self", "ln", "layer_norm"), "h_2": ("self", "", "Tensor.__add__"),
                    "linear_1": ("self", "attn.proj", "linear"), "relu": ("self", "", "torch.relu")}  # fmt: skip


def test_c_kernels_get_the_scopes_inductors_provenance_tracking_recorded(monkeypatch):
    """Where provenance tracking was on when inductor compiled, its mapping says which post-grad nodes each C++ kernel
    computes, and of which of dynamo's nodes each came: a kernel of one call is that call in its module; one of
    several modules' calls their common module (the frame's own: nothing); one with a node of no recorded source
    (made by a pass), or none in the mapping, only its operator range."""
    kernels = ("cpp_fused_native_layer_norm_0", "cpp_fused_add_view_1", "cpp_fused_relu_2")
    namespace = {name: lambda *args: args for name in kernels}
    opened = []
    monkeypatch.setattr(inductor_kernels, "_Scope", lambda name: Opened(name, opened))
    monkeypatch.setattr(inductor_kernels, "_recorded", lambda: True)
    monkeypatch.setattr(
        inductor_kernels,
        "_resolved",
        lambda origins, root: inductor_kernels._scopes(origins, PROVENANCE_NODES, frame_self),
    )
    provenance = graph_nodes.provenance_origins(json.dumps(PROVENANCE))
    assert provenance == {"cpp_fused_native_layer_norm_0": ("h_1",), "cpp_fused_add_view_1": ("h_2", "linear_1")}
    sites = {key: value for _, key, value in inductor_kernels._kernel_sites(PROVENANCE_SOURCE, namespace, provenance)}
    token = inductor_kernels.COMPILED_MODULE_SCOPE.set(("ks.module:_orig_mod", None))
    try:
        for name in kernels:
            assert sites[name](1, 2) == (1, 2)
    finally:
        inductor_kernels.COMPILED_MODULE_SCOPE.reset(token)
    assert [name for name in opened if not name.startswith("/")] == [
        "ks.module:_orig_mod.ln", "ks.fn:layer_norm", "cpp_fused_native_layer_norm_0", "cpp_fused_add_view_1",
        "cpp_fused_relu_2"]  # fmt: skip
    assert graph_nodes.provenance_origins(None) == graph_nodes.provenance_origins("{") == {}


class BlockOfS(torch.nn.Module):
    def forward(s, run):  # noqa: N805 - a forward whose first parameter is not named self: dynamo's L['s']
        return run()


class Wrapper:
    """As dynamo's frame around a compiled module whose own forward it does not compile (a compiled ``nn.Sequential``:
    its graph's modules are under ``L['fn']``, the module the frame calls)."""

    def __call__(self, fn, run):
        return run()


def test_a_graphs_modules_are_found_under_whichever_local_of_its_frame_they_start_from(opened):
    """dynamo roots a node's module path at the frame's local that holds the module: ``L['s']`` where a forward names
    its first parameter ``s``, ``L['fn']`` in the frame that calls a compiled Sequential; both named nothing while
    only ``L['self']`` was read. A node of two locals' modules gets their common module in the compiled one."""
    root = torch.nn.Module()
    root.block = BlockOfS()
    root.seq = torch.nn.Sequential(torch.nn.Linear(2, 2))
    launch = inductor_kernels._ScopedLaunches(Kernel(), ("linear_1",))
    both = inductor_kernels._ScopedLaunches(Kernel(), ("linear_1", "linear_2"))
    token = inductor_kernels.COMPILED_MODULE_SCOPE.set(("ks.module:", root))
    try:
        nodes = {"linear_1": ("s", "fc", "linear")}
        graph = inductor_kernels._in_its_frame(lambda: launch.run(1), nodes, {BlockOfS.forward.__code__})
        root.block(graph)
        assert opened == ["ks.module:block.fc", "ks.fn:linear", "/ks.fn:linear", "/ks.module:block.fc"]
        opened.clear()
        nodes = {"linear_1": ("fn", "0", "linear"), "linear_2": ("s", "fc", "linear")}
        graph = inductor_kernels._in_its_frame(lambda: launch.run(1) + both.run(2), nodes, {Wrapper.__call__.__code__})
        Wrapper()(root.seq, graph)
        assert opened == ["ks.module:seq.0", "ks.fn:linear", "/ks.fn:linear", "/ks.module:seq.0"], (
            "a local the frame does not hold (s) names nothing"
        )
    finally:
        inductor_kernels.COMPILED_MODULE_SCOPE.reset(token)


def _node(name, source_name, path):
    meta = {"source_fn_stack": [(source_name, torch.nn.Linear)], "nn_module_stack": {path: (path, torch.nn.Linear)}}
    return types.SimpleNamespace(name=name, op="call_function", target=torch.nn.functional.linear, meta=meta)


def test_a_node_is_found_by_the_name_its_call_had_when_dynamo_made_it():
    """A compiled Sequential's ``input = module(input)`` renames its nodes ``input_1``, ``input_2``, while inductor's
    "Source Nodes" name them as their calls were first named (``linear``, ``linear_1``): its kernels named nothing.
    A name two nodes answer to (a node's own and another's first name) names nothing."""
    call_names = {id(torch.nn.functional.linear): "linear"}
    graph = [_node("input_1", "linear", "L['fn'].0"), _node("input_2", "linear_1", "L['fn'].1")]
    nodes = graph_nodes.nodes_by_source_name(graph, call_names, {"linear"})
    assert nodes["linear"] == nodes["input_1"] == ("fn", "0", "linear")
    assert nodes["linear_1"] == ("fn", "1", "linear")
    clash = [_node("linear", "linear", "L['self'].a"), _node("input_1", "linear", "L['self'].b")]
    nodes = graph_nodes.nodes_by_source_name(clash, call_names, {"linear"})
    assert nodes["linear"] == (None, "", None), "which node inductor meant is not known: nothing"
    assert nodes["input_1"] == ("self", "b", "linear")


def run_layers(layers, run):  # as dynamo's frame of a compiled function handed a module: its nodes' L['layers'].0
    return run()


def test_a_module_a_compiled_function_was_handed_is_found_in_the_recorded_model(opened, monkeypatch):
    """A compiled function called with no compiled module around it (``run_layers(self.layers, x)``, compiled, called
    from the model's forward) roots its nodes at the local that holds the module it was handed: found by identity
    among the recorded model's modules, its kernels get that module's scope and their call (they were
    ``torch.compile``'s). A module outside the recorded model names nothing; a node of no module (the frame's
    ``self``, which a function has not) still names only its call, in the caller's scope."""
    root = torch.nn.Module()
    root.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)])
    monkeypatch.setattr(inductor_kernels, "_RECORDED_PATHS", {id(m): name for name, m in root.named_modules()})
    launch = inductor_kernels._ScopedLaunches(Kernel(), ("linear_1",))
    free = inductor_kernels._ScopedLaunches(Kernel(), ("gelu",))
    nodes = {"linear_1": ("layers", "1", "linear"), "gelu": ("self", "", "gelu")}
    graph = inductor_kernels._in_its_frame(lambda: launch.run(1) + free.run(2), nodes, {run_layers.__code__})
    assert run_layers(root.layers, graph) == (1, 2)
    assert opened == ["ks.module:layers.1", "ks.fn:linear", "/ks.fn:linear", "/ks.module:layers.1", "ks.fn:gelu",
                      "/ks.fn:gelu"]  # fmt: skip
    opened.clear()
    run_layers(torch.nn.ModuleList([torch.nn.Linear(2, 2)] * 2), graph)
    assert opened == ["ks.fn:gelu", "/ks.fn:gelu"], "a module the recorded model does not hold: not known here"


class Helper:
    """A plain object holding one of the model's modules, whose method dynamo compiled: its nodes' L['self'].fc."""

    def __init__(self, fc):
        self.fc = fc

    def step(self, run):
        return run()


def test_a_module_a_compiled_method_of_a_plain_object_holds_is_found_in_the_recorded_model(opened, monkeypatch):
    """A compiled method of an object that is no module (a helper holding the model's children) roots its nodes at
    ``L['self']``, the helper: the module along the node's path from it is found in the recorded model."""
    root = torch.nn.Module()
    root.fc = torch.nn.Linear(2, 2)
    monkeypatch.setattr(inductor_kernels, "_RECORDED_PATHS", {id(m): name for name, m in root.named_modules()})
    launch = inductor_kernels._ScopedLaunches(Kernel(), ("linear",))
    graph = inductor_kernels._in_its_frame(lambda: launch.run(1), {"linear": ("self", "fc", "linear")},
                                           {Helper.step.__code__})  # fmt: skip
    helpers = [Helper(root.fc), Helper(torch.nn.Linear(2, 2))]  # both alive: resolved scopes are kept by id
    assert helpers[0].step(graph) == (1,)
    assert opened == ["ks.module:fc", "ks.fn:linear", "/ks.fn:linear", "/ks.module:fc"]
    opened.clear()
    helpers[1].step(graph)
    assert opened == [], "a module the recorded model does not hold: not known here"


def test_a_compiled_graph_held_by_aot_autograds_function_class_is_found():
    """With grad enabled (``torch.enable_grad()`` in a forward, or a thread the forward starts, whose grad mode is its
    own), aot_autograd runs inductor's forward graph through an ``autograd.Function`` class it makes per graph, which
    holds the graph as a class attribute (``CompiledFunction.compiled_fw``) and is reached as the ``__self__`` of its
    bound ``apply``: its kernels were named nothing, the graph not found there."""
    from kernelscope.recorder.compiled_graphs import values_in_closures

    graph = object()
    made = type("CompiledFunction", (torch.autograd.Function,), {"compiled_fw": graph, "__module__": "torch._x"})

    apply = made.apply  # a bound classmethod, as aot_autograd's wrappers close over it

    def runtime_wrapper(*args):
        return apply(*args)

    def outer(*args):
        return runtime_wrapper(*args)

    assert values_in_closures(outer, lambda value: value is graph) == [graph]
    other = type("Other", (torch.autograd.Function,), {"compiled_fw": graph, "__module__": "user"})
    assert values_in_closures(lambda: other.apply, lambda value: value is graph) == [], "not torch's: not looked into"


def test_a_compiled_graph_a_function_wraps_is_found():
    """With tensor subclass inputs (a jagged nested tensor into a compiled child), aot_autograd's runtime wrapper closes
    over inductor's ``inner_fn``, which holds its compiled graph only as ``__wrapped__`` (functools.wraps): its kernels
    were named nothing, the graph not found."""
    from kernelscope.recorder.compiled_graphs import values_in_closures

    graph = object()

    def inner_fn(*args):
        return args

    inner_fn.__wrapped__ = graph

    def runtime_wrapper(*args):
        return inner_fn(*args)

    assert values_in_closures(runtime_wrapper, lambda value: value is graph) == [graph]


def test_a_node_of_a_child_whose_name_is_no_identifier_is_found():
    """A ModuleDict's key may be any name without a dot (``"k-v"``, ``"3"``): dynamo's path ``L['self'].heads.k-v``
    named nothing, read as no local's."""
    call_names = {id(torch.nn.functional.linear): "linear"}
    graph = [_node("linear_1", "linear_1", "L['self'].heads.k-v"), _node("linear_2", "linear_2", "L['x'].a b.3")]
    nodes = graph_nodes.nodes_by_source_name(graph, call_names, {"linear"})
    assert nodes["linear_1"] == ("self", "heads.k-v", "linear")
    assert nodes["linear_2"] == ("x", "a b.3", "linear")


GLOBAL_ENCODER = None  # a module a compiled function reads as a global of its module: dynamo's G['GLOBAL_ENCODER']


def encode_with_global(run):
    return run()


def test_a_module_a_compiled_function_reads_as_a_global_is_found(opened, monkeypatch):
    """A compiled function that calls a module held as a global of its module (``G['ENC'].0`` in dynamo's paths)
    named its kernels nothing, the path read as no local's: the global is read from the frame's globals and found in
    the recorded model as a local is."""
    root = torch.nn.Module()
    root.enc = torch.nn.Sequential(torch.nn.Linear(2, 2))
    monkeypatch.setitem(globals(), "GLOBAL_ENCODER", root.enc)
    monkeypatch.setattr(inductor_kernels, "_RECORDED_PATHS", {id(m): name for name, m in root.named_modules()})
    call_names = {id(torch.nn.functional.linear): "linear"}
    nodes = graph_nodes.nodes_by_source_name([_node("linear", "linear", "G['GLOBAL_ENCODER'].0")], call_names,
                                             {"linear"})  # fmt: skip
    assert nodes["linear"] == ("G['GLOBAL_ENCODER']", "0", "linear")
    launch = inductor_kernels._ScopedLaunches(Kernel(), ("linear",))
    graph = inductor_kernels._in_its_frame(lambda: launch.run(1), nodes, {encode_with_global.__code__})
    assert encode_with_global(graph) == (1,)
    assert opened == ["ks.module:enc.0", "ks.fn:linear", "/ks.fn:linear", "/ks.module:enc.0"]


GLOBAL_ENCODERS = []  # modules in a global list: dynamo's G['GLOBAL_ENCODERS'][0]


def run_containers(mods, pair, run):  # a compiled function handed a dict and a list of modules
    return run()


def test_modules_a_compiled_function_reads_from_plain_containers_are_found(opened, monkeypatch):
    """Modules a compiled function reaches through a dict or list it was handed, or a global list
    (``L['mods']['enc']``, ``L['pair'][1].0``, ``G['GLOBAL_ENCODERS'][0]``) named nothing: the subscripts are read
    from the frame's locals and globals (plain dicts, lists and tuples only) and the module found in the model."""
    root = torch.nn.Module()
    root.enc, root.out = torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.Linear(2, 2))
    root.extra = torch.nn.Linear(2, 2)
    monkeypatch.setitem(globals(), "GLOBAL_ENCODERS", [root.extra])
    monkeypatch.setattr(inductor_kernels, "_RECORDED_PATHS", {id(m): name for name, m in root.named_modules()})
    call_names = {id(torch.nn.functional.linear): "linear"}
    graph = [_node("linear", "linear", "L['mods']['enc']"), _node("linear_1", "linear_1", "L['pair'][1].0"),
             _node("linear_2", "linear_2", "G['GLOBAL_ENCODERS'][0]")]  # fmt: skip
    nodes = graph_nodes.nodes_by_source_name(graph, call_names, {"linear"})
    assert nodes["linear_1"] == ("L['pair'][1]", "0", "linear")
    launches = [inductor_kernels._ScopedLaunches(Kernel(), (name,)) for name in ("linear", "linear_1", "linear_2")]
    run = inductor_kernels._in_its_frame(lambda: [each.run(1) for each in launches], nodes, {run_containers.__code__})
    run_containers({"enc": root.enc}, (None, root.out), run)
    assert [name for name in opened if name.startswith("ks.module:")] == [
        "ks.module:enc", "ks.module:out.0", "ks.module:extra"]  # fmt: skip
