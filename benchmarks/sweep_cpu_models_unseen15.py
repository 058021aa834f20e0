"""Programs for cpu_sweep.py of kinds no earlier program file has: ``torch.compile``d functions handed the model's
modules (a ModuleList, with and without a graph break, whose resume function holds no ``self``), a compiled method of
a plain object holding children, a compiled function reading the model's encoder as a global, or its children from a
dict, a tuple and a global list, a compiled submodule whose forward breaks under an eager parent that hooks its
output, ``mode="reduce-overhead"`` with ``dynamic=True`` on the CPU, ``aot_eager`` with a break between the root's
children, a break whose resume function holds the next child on its stack, a ModuleDict of keys that are no
identifiers, a compiled child run in a thread of the forward or pre-hooked with kwargs, dynamic qint8 Linear layers,
``functional_call``, a generator expression and a jagged nested tensor, each compiled; ``torch.vmap`` of a child
inside a forward, forwards that are a ``functools.partialmethod``, a class-level lambda or a staticmethod lambda,
children reached through ``map``/``functools.reduce`` over a ModuleDict, ``weakref.proxy`` and
``type(child).__call__``, a ParameterList iterated into ``F.linear``, a child run by one child's thread and joined by
another, a ``contextmanager`` helper that runs a child; and transformers families no sweep file built (Helium, GLM-4,
OLMo 3, Arcee, ERNIE 4.5, Seed-OSS, Apertus, BitNet, Qwen3, HunYuan dense, Doge; RoCBert, Data2Vec text, MarkupLM,
Splinter; SwiftFormer, ViT-MSN, I-JEPA, DINOv3, TextNet, ViTDet, PVT; PEGASUS-X, FSMT), from tiny configs (random
init, no downloads).

Each mechanism program states what a user expects of its rows (``modules``, ``calls``: cpu_sweep.py checks them): with
inductor on the CPU a compiled region's ``linear`` is an extern ``addmm`` named in its module, and its fused C++
kernels are ``torch.compile``'s rows (docs/recording.md).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import _w, _x
from sweep_cpu_models import _auto, _decoder, _ids, _seq2seq, _vision
from torch import nn

KV = {"num_key_value_heads": 2}


# --- torch.compile around the model's modules ---------------------------------------------------------------------


@torch.compile(backend="inductor")
def _run_layers(layers, x):
    for layer in layers:
        x = F.gelu(layer(x))
    return x


class HandsLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(_run_layers(self.layers, x))


def compiled_function_handed_modules():
    return _w("compiled_function_handed_modules", HandsLayers().eval(), description="a torch.compile'd function "
              "handed the model's ModuleList, called from its forward with no compiled module around it",
              modules={"linear": {"layers.0", "layers.1", "layers.2", "head"}})  # fmt: skip


@torch.compile(backend="inductor")
def _project_then_break(proj, x):
    y = F.silu(proj(x))
    torch._dynamo.graph_break()
    return proj(y) * 0.5


class BreaksInFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(16, 16))
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return _project_then_break(self.proj, self.inner(x))


def compiled_function_resume_no_self():
    return _w("compiled_function_resume_no_self", BreaksInFunction().eval(), description="a compiled function "
              "handed a child, a graph break in it: its resume function holds the child, and no self",
              modules={"linear": {"inner.0", "proj"}})  # fmt: skip


_GLOBAL_ENCODER = None  # the model's encoder, read by a compiled function as a global of this file


@torch.compile(backend="inductor")
def _encode_with_global(x):
    return F.gelu(_GLOBAL_ENCODER(x))


class GlobalEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.head = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16)), nn.Linear(16, 4)
        global _GLOBAL_ENCODER
        _GLOBAL_ENCODER = self.enc

    def forward(self, x):
        return self.head(_encode_with_global(x))


def compiled_function_global_module():
    return _w("compiled_function_global_module", GlobalEncoder().eval(), description="a compiled function that calls "
              "the model's encoder held in a global of its file (dynamo's G[...] paths)",
              modules={"linear": {"enc.0", "enc.1", "head"}})  # fmt: skip


_GLOBAL_HEADS: list = []  # one of the model's children in a global list of this file


@torch.compile(backend="inductor")
def _run_containers(mods, pair, x):
    return F.silu(mods["enc"](x)) + pair[1](x) + _GLOBAL_HEADS[0](x)


class HandsContainers(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.proj, self.extra = nn.Linear(16, 16), nn.Sequential(nn.Linear(16, 16)), nn.Linear(16, 16)
        _GLOBAL_HEADS[:] = [self.extra]

    def forward(self, x):
        return _run_containers({"enc": self.enc}, (None, self.proj), x)


def compiled_function_module_containers():
    return _w("compiled_function_module_containers", HandsContainers().eval(), description="a compiled function "
              "handed the model's children in a dict and a tuple, and reading one from a global list",
              modules={"linear": {"enc", "proj.0", "extra"}})  # fmt: skip


class Helper:
    """A plain object (not a module) holding two of the model's children, with a compiled method."""

    def __init__(self, fc, norm):
        self.fc, self.norm = fc, norm
        self.step = torch.compile(self.step, backend="inductor")

    def step(self, x):
        return self.norm(F.gelu(self.fc(x)))


class HoldsHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.norm, self.out = nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 4)
        self.__dict__["helper"] = Helper(self.fc, self.norm)

    def forward(self, x):
        return self.out(self.helper.step(x))


def compiled_helper_method():
    return _w("compiled_helper_method", HoldsHelper().eval(), description="the compiled method of a plain object "
              "that holds two of the model's children", modules={"linear": {"fc", "out"}})  # fmt: skip


class BreakingBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        y = F.gelu(self.fc1(x))
        if y.sum() > 0:  # data-dependent: a graph break
            y = y * 2
        return self.fc2(y)


class HooksCompiledChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(BreakingBlock(), backend="inductor")
        self.block.register_forward_hook(lambda module, args, out: F.layer_norm(out, (16,)))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.relu(self.block(x)))


def compiled_child_breaks_hooked():
    return _w("compiled_child_breaks_hooked", HooksCompiledChild().eval(), description="an eager model whose "
              "compiled child's forward breaks on a data-dependent branch, a forward hook on the compiled child "
              "replacing its output", modules={"linear": {"block._orig_mod.fc1", "block._orig_mod.fc2", "head"},
              "layer_norm": {"block"}, "relu": {""}})  # fmt: skip


class TwoMlps(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        return self.b(F.gelu(self.a(x)))


def compile_reduce_overhead_dynamic():
    model = torch.compile(TwoMlps().eval(), mode="reduce-overhead", dynamic=True)
    samples = [((_x(n, 16),), {}) for n in (2, 5, 7)]
    return _w("compile_reduce_overhead_dynamic", model, samples=samples, description='torch.compile(mode='
              '"reduce-overhead", dynamic=True) on the CPU, three batch sizes',
              modules={"linear": {"_orig_mod.a", "_orig_mod.b"}})  # fmt: skip


class BreaksBetweenChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = TwoMlps(), TwoMlps()

    def forward(self, x):
        y = self.a(x)
        torch._dynamo.graph_break()
        return self.b(y)


def compile_aot_eager_resume():
    model = torch.compile(BreaksBetweenChildren().eval(), backend="aot_eager")
    return _w("compile_aot_eager_resume", model, description="the root compiled with aot_eager, a graph break "
              "between its two children (the second runs in a resume function)")  # fmt: skip


class BreakingHeadless(nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.head = BreakingBlock(), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.block(x))  # broken inside the block: the resume holds self.head on its stack


def compile_resume_stack_module():
    model = torch.compile(BreakingHeadless().eval(), backend="inductor")
    return _w("compile_resume_stack_module", model, description="the root compiled, a graph break inside a child "
              "called as self.head(self.block(x)): the root's resume function holds self.head on its stack, no "
              "self", modules={"linear": {"_orig_mod.block.fc1", "_orig_mod.block.fc2", "_orig_mod.head"}})  # fmt: skip


class OddKeys(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"k-v": nn.Linear(16, 16), "3": nn.Linear(16, 16), "q proj": nn.Linear(16, 16)})

    def forward(self, x):
        return sum(head(x) for head in self.heads.values())


def compiled_module_dict_odd_keys():
    model = torch.compile(OddKeys().eval(), backend="inductor")
    return _w("compiled_module_dict_odd_keys", model, description="a compiled model whose ModuleDict's keys are no "
              "identifiers (k-v, 3, a space)", modules={"linear": {"_orig_mod.heads.k-v", "_orig_mod.heads.3",
              "_orig_mod.heads.q proj"}})  # fmt: skip


class CompiledInThread(nn.Module):
    def __init__(self):
        super().__init__()
        self.worker = torch.compile(TwoMlps(), backend="inductor")
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out = {}

        def work():
            try:
                out["y"] = self.worker(x)
            except BaseException as exc:  # noqa: BLE001 - raised again in the forward's thread
                out["raised"] = exc

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        if "raised" in out:
            raise out["raised"]
        return self.head(out["y"])


def compiled_child_in_thread():
    return _w("compiled_child_in_thread", CompiledInThread().eval(), description="a compiled child run in a "
              "thread the forward starts and joins", modules={"linear": {"worker._orig_mod.a", "worker._orig_mod.b",
              "head"}})  # fmt: skip


class KwargsScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, scale=1.0):
        return self.fc(x) * scale


class PreHookKwargsCompiled(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = torch.compile(KwargsScaled(), backend="inductor")
        self.child.register_forward_pre_hook(
            lambda module, args, kwargs: ((F.softplus(args[0]),), {**kwargs, "scale": 0.5}), with_kwargs=True
        )

    def forward(self, x):
        return F.tanh(self.child(x, scale=2.0))


def compiled_child_pre_hook_kwargs():
    return _w("compiled_child_pre_hook_kwargs", PreHookKwargsCompiled().eval(), description="a forward pre-hook "
              "with kwargs on a compiled child, rewriting its input and a keyword argument",
              modules={"softplus": {"child"}, "linear": {"child._orig_mod.fc"}, "tanh": {""}})  # fmt: skip


def quantized_dynamic_compiled():
    quantized = torch.ao.quantization.quantize_dynamic(TwoMlps().eval(), {nn.Linear}, dtype=torch.qint8)
    model = torch.compile(quantized, backend="inductor")
    return _w("quantized_dynamic_compiled", model, description="torch.ao dynamic qint8 Linear layers, the model "
              "then compiled with inductor")  # fmt: skip


class FunctionalCallCompiled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = TwoMlps()
        self.delta = nn.Parameter(torch.full((16,), 0.1))

    def forward(self, x):
        params = {"a.bias": self.inner.a.bias + self.delta}
        return torch.func.functional_call(self.inner, params, (x,), strict=False)


def functional_call_compiled():
    model = torch.compile(FunctionalCallCompiled().eval(), backend="inductor")
    return _w("functional_call_compiled", model, description="torch.func.functional_call of a child with one "
              "parameter replaced, inside a compiled forward", modules={"linear": {"_orig_mod.inner.a",
              "_orig_mod.inner.b"}})  # fmt: skip


class GeneratorSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])

    def forward(self, x):
        return sum(expert(x) for expert in self.experts) / len(self.experts)


def generator_expression_compiled():
    model = torch.compile(GeneratorSum().eval(), backend="inductor")
    return _w("generator_expression_compiled", model, description="a compiled forward summing its children over a "
              "generator expression", modules={"linear": {"_orig_mod.experts.0", "_orig_mod.experts.1",
              "_orig_mod.experts.2"}})  # fmt: skip


class JaggedChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.compile(TwoMlps(), backend="inductor", dynamic=True)

    def forward(self, a, b):
        nested = torch.nested.nested_tensor([a, b], layout=torch.jagged)
        return self.block(nested).values().sum(0)


def nested_jagged_compiled_child():
    samples = [((_x(3, 16), _x(5, 16)), {})]
    return _w("nested_jagged_compiled_child", JaggedChild().eval(), samples=samples, description="a jagged nested "
              "tensor of two sequences into a compiled child (dynamic=True)",
              modules={"linear": {"block._orig_mod.a", "block._orig_mod.b"}})  # fmt: skip


# --- forwards and calls of unusual shapes -------------------------------------------------------------------------


class VmapsChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = TwoMlps()

    def forward(self, x):
        return torch.vmap(self.cell, in_dims=1, out_dims=1)(x.view(4, 2, 8).repeat(1, 1, 2))


def vmap_child_in_forward():
    return _w("vmap_child_in_forward", VmapsChild().eval(), description="torch.vmap over a child's call inside the "
              "forward (in_dims=1)", modules={"linear": {"cell.a", "cell.b"}, "gelu": {"cell"}})  # fmt: skip


class PartialMethodForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def _run(self, x, scale):
        return F.hardswish(self.fc(x)) * scale

    forward = functools.partialmethod(_run, scale=2.0)


class LambdaForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    forward = lambda self, x: F.mish(self.fc(x))  # noqa: E731


class StaticLambdaForward(nn.Module):
    forward = staticmethod(lambda x: F.softsign(x) + 1)


class OddForwards(nn.Module):
    def __init__(self):
        super().__init__()
        self.partial, self.lam, self.static = PartialMethodForward(), LambdaForward(), StaticLambdaForward()

    def forward(self, x):
        return self.static(self.lam(self.partial(x)))


def forward_partialmethod_lambda():
    return _w("forward_partialmethod_lambda", OddForwards().eval(), description="children whose forward is a "
              "functools.partialmethod, a class-level lambda and a staticmethod lambda",
              modules={"hardswish": {"partial"}, "mish": {"lam"}, "softsign": {"static"},
                       "linear": {"partial.fc", "lam.fc"}})  # fmt: skip


class ReducedHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({name: nn.Linear(16, 16) for name in ("q", "k", "v")})
        self.gate = nn.Linear(16, 16)

    def forward(self, x):
        total = sum(map(lambda head: head(x), self.heads.values()))  # noqa: C417
        proxy = weakref.proxy(self.gate)
        gated = functools.reduce(lambda y, m: type(m).__call__(m, y), [proxy, self.heads["q"]], total)
        return F.tanh(gated)


def children_through_map_reduce():
    return _w("children_through_map_reduce", ReducedHeads().eval(), description="a ModuleDict's children called "
              "through map and functools.reduce, one through a weakref.proxy, one through type(child).__call__",
              modules={"linear": {"heads.q", "heads.k", "heads.v", "gate"}, "tanh": {""}},
              calls={"linear": 5})  # fmt: skip


class ParameterListLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(16, 16) / 4) for _ in range(3)])
        self.scales = nn.ParameterDict({"a": nn.Parameter(torch.ones(16)), "b": nn.Parameter(torch.ones(16) * 2)})

    def forward(self, x):
        for weight in self.weights:
            x = F.elu(F.linear(x, weight))
        return x * self.scales["a"] + self.scales["b"]


def parameter_list_linear():
    return _w("parameter_list_linear", ParameterListLinear().eval(), description="a ParameterList iterated into "
              "F.linear and a ParameterDict read in the forward", modules={"linear": {""}, "elu": {""}},
              calls={"linear": 3, "elu": 3})  # fmt: skip


class Starter(nn.Module):
    def __init__(self, worker):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.__dict__["worker"] = worker

    def forward(self, x, box):
        y = self.fc(x)

        def work():
            try:
                box["out"] = self.worker(y)
            except BaseException as exc:  # noqa: BLE001 - raised again by the joiner
                box["raised"] = exc

        box["thread"] = threading.Thread(target=work)
        box["thread"].start()
        return y


class Joiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, y, box):
        box["thread"].join()
        if "raised" in box:
            raise box["raised"]
        return self.fc(box["out"] + y)


class ThreadHandoff(nn.Module):
    def __init__(self):
        super().__init__()
        self.worker = TwoMlps()
        self.starter, self.joiner = Starter(self.worker), Joiner()

    def forward(self, x):
        box = {}
        return self.joiner(self.starter(x, box), box)


def thread_handoff_between_children():
    return _w("thread_handoff_between_children", ThreadHandoff().eval(), description="one child starts a thread "
              "that runs a third child, another child joins it", modules={"linear": {"starter.fc", "joiner.fc",
              "worker.a", "worker.b"}, "gelu": {"worker"}})  # fmt: skip


@contextlib.contextmanager
def _normalized(module, x):
    yield F.normalize(module(x), dim=-1)


class ContextHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(16, 16)

    def forward(self, x):
        with _normalized(self.enc, x) as y:
            return F.logsigmoid(y)


def contextmanager_runs_child():
    return _w("contextmanager_runs_child", ContextHelper().eval(), description="a contextlib.contextmanager helper "
              "that runs a child in its __enter__", modules={"linear": {"enc"}, "normalize": {""},
              "logsigmoid": {""}})  # fmt: skip


# --- transformers families no sweep file built --------------------------------------------------------------------


UNSEEN15_MECHANISMS = {
    "compiled_function_handed_modules": compiled_function_handed_modules,
    "compiled_function_resume_no_self": compiled_function_resume_no_self,
    "compiled_helper_method": compiled_helper_method,
    "compiled_function_global_module": compiled_function_global_module,
    "compiled_function_module_containers": compiled_function_module_containers,
    "compiled_child_breaks_hooked": compiled_child_breaks_hooked,
    "compile_reduce_overhead_dynamic": compile_reduce_overhead_dynamic,
    "compile_aot_eager_resume": compile_aot_eager_resume,
    "compile_resume_stack_module": compile_resume_stack_module,
    "compiled_module_dict_odd_keys": compiled_module_dict_odd_keys,
    "compiled_child_in_thread": compiled_child_in_thread,
    "compiled_child_pre_hook_kwargs": compiled_child_pre_hook_kwargs,
    "quantized_dynamic_compiled": quantized_dynamic_compiled,
    "functional_call_compiled": functional_call_compiled,
    "generator_expression_compiled": generator_expression_compiled,
    "nested_jagged_compiled_child": nested_jagged_compiled_child,
    "vmap_child_in_forward": vmap_child_in_forward,
    "forward_partialmethod_lambda": forward_partialmethod_lambda,
    "children_through_map_reduce": children_through_map_reduce,
    "parameter_list_linear": parameter_list_linear,
    "thread_handoff_between_children": thread_handoff_between_children,
    "contextmanager_runs_child": contextmanager_runs_child,
}

UNSEEN15_MODELS = {
    **UNSEEN15_MECHANISMS,
    "hf_helium": lambda: _decoder("helium", **KV, head_dim=16),
    "hf_glm4": lambda: _decoder("glm4", **KV, head_dim=16, pad_token_id=0, eos_token_id=1),
    "hf_olmo3": lambda: _decoder("olmo3", **KV, sliding_window=8),
    "hf_arcee": lambda: _decoder("arcee", **KV),
    "hf_ernie4_5": lambda: _decoder("ernie4_5", **KV, head_dim=16),
    "hf_seed_oss": lambda: _decoder("seed_oss", **KV, head_dim=16),
    "hf_apertus": lambda: _decoder("apertus", **KV),
    "hf_bitnet": lambda: _decoder("bitnet", **KV),
    "hf_qwen3": lambda: _decoder("qwen3", **KV, head_dim=16),
    "hf_hunyuan_v1_dense": lambda: _decoder("hunyuan_v1_dense", **KV, head_dim=16),
    "hf_doge": lambda: _decoder("doge", **KV, keep_window_size=8),
    "hf_roc_bert": lambda: _auto("roc_bert", {"input_ids": _ids(), "input_shape_ids": _ids(vocab=32),
                                 "input_pronunciation_ids": _ids(vocab=32)}, shape_vocab_size=32,
                                 pronunciation_vocab_size=32, shape_embed_dim=16, pronunciation_embed_dim=16),
    "hf_data2vec-text": lambda: _auto("data2vec-text"),
    "hf_markuplm": lambda: _auto("markuplm", {"input_ids": _ids(), "xpath_tags_seq": torch.randint(0, 50, (2, 16, 50)),
                                 "xpath_subs_seq": torch.randint(0, 50, (2, 16, 50))}),
    "hf_splinter": lambda: _auto("splinter", {"input_ids": _ids()}, "AutoModelForQuestionAnswering",
                                 question_token_id=5),
    "hf_vitdet": lambda: _vision("vitdet", patch_size=8, pretrain_image_size=32, window_size=2,
                                 window_block_indices=[0], residual_block_indices=[1],
                                 use_relative_position_embeddings=True),
    "hf_pvt": lambda: _vision("pvt", num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1],
                              hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[4, 2], strides=[4, 2],
                              mlp_ratios=[2, 2]),
    "hf_swiftformer": lambda: _vision("swiftformer", depths=[1, 1, 1, 1], embed_dims=[16, 16, 32, 32]),
    "hf_vit_msn": lambda: _vision("vit_msn", patch_size=8),
    "hf_ijepa": lambda: _vision("ijepa", patch_size=8),
    "hf_dinov3_vit": lambda: _vision("dinov3_vit", patch_size=8, hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=2, num_attention_heads=4, num_register_tokens=2),
    "hf_textnet": lambda: _vision("textnet", hidden_sizes=[16, 16, 32, 32, 64], stem_out_channels=16),
    "hf_pegasus_x": lambda: _seq2seq("pegasus_x", d_model=64, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, block_size=8, num_global_tokens=4),
    "hf_fsmt": lambda: _auto("fsmt", {"input_ids": _ids(), "decoder_input_ids": _ids(2, 8)}, "AutoModel",
                             src_vocab_size=512, tgt_vocab_size=512, d_model=64, encoder_layers=1, decoder_layers=1,
                             encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                             decoder_ffn_dim=128, langs=["en", "de"]),
}  # fmt: skip
