"""Programs for cpu_sweep.py around forwards reached in ways the other sweep files leave out: ``_call_impl`` and
``nn.Module.__call__`` called directly; forwards as a ``partialmethod``, a property, a callable object, a mixin's
method, a decorated method; a module whose class the model changes while it runs; ``stack_module_state`` ensembles,
``nn.utils.stateless``, forward-mode AD dual tensors, grad modes switched inside a forward, Python tracers set inside
a forward; transformers' encoder-decoder compositions (BERT2BERT with beam search, ViT + GPT-2), eager attention with
every output switch and ``return_dict=False``, seeded sampling.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import functools
import sys

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_mechanisms import Mlp, Net, _w
from sweep_cpu_models import SIZES, _ids
from torch import nn
from workload import Workload

# --- forwards reached in odd ways -----------------------------------------------------------------------------------


class CallsImpl(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Mlp(), Mlp(), nn.Linear(16, 16)

    def forward(self, x):
        return F.celu(self.c._call_impl(nn.Module.__call__(self.b, self.a._call_impl(x))))


def call_impl_direct():
    return _w("call_impl_direct", CallsImpl().eval(), description="child._call_impl(x) and nn.Module.__call__(child, "
              "x)", modules={"gelu": {"a", "b"}, "linear": {"a.fc1", "a.fc2", "b.fc1", "b.fc2", "c"},
              "celu": {""}})  # fmt: skip


class PartialForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def _forward(self, x, slope):
        return F.leaky_relu(self.fc(x), slope)

    forward = functools.partialmethod(_forward, slope=0.2)


class PropertyForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @property
    def forward(self):
        return lambda x: F.hardsigmoid(self.fc(x))


class Scaler:
    def __call__(self, x):
        return F.softmin(x, -1)


class CallableForward(nn.Module):
    forward = Scaler()


class Mixin:
    def forward(self, x):
        return F.tanhshrink(self.fc(x))


class MixedIn(Mixin, nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    @torch.no_grad()
    @torch.autocast("cpu", enabled=False)
    def forward(self, x):
        return F.relu6(self.fc(x))


class OddForwards(nn.Module):
    def __init__(self):
        super().__init__()
        self.partial, self.prop, self.callable = PartialForward(), PropertyForward(), CallableForward()
        self.mixed, self.decorated = MixedIn(), Decorated()

    def forward(self, x):
        return self.decorated(self.mixed(self.callable(self.prop(self.partial(x)))))


def odd_forward_kinds():
    return _w("odd_forward_kinds", OddForwards().eval(), description="forwards as a partialmethod, a property, a "
              "callable object, a mixin's method, a decorated method",
              modules={"leaky_relu": {"partial"}, "hardsigmoid": {"prop"}, "softmin": {"callable"},
                       "tanhshrink": {"mixed"}, "relu6": {"decorated"}})  # fmt: skip


class Fast(nn.Module):
    def forward(self, x):
        return F.silu(self.fc(x))


class SwapsItsClass(nn.Module):
    """Changes its own class at its second call, as libraries that swap in a faster implementation do."""

    def __init__(self):
        super().__init__()
        self.fc, self.calls = nn.Linear(16, 16), 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 2:
            self.__class__ = Fast
        return F.gelu(self.fc(x))


class SwapParent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = SwapsItsClass()

    def forward(self, x):
        return F.softsign(self.child(x))


def _swap_parent() -> SwapParent:
    with torch.random.fork_rng():  # the same weights in the copy the sweep's unprofiled passes run
        torch.manual_seed(1)
        return SwapParent().eval()


def class_changed_midway():
    # the unprofiled passes of a fresh copy reach its 4th call too, where profile()'s recorded pass is
    return _w("class_changed_midway", _swap_parent(), fresh=_swap_parent, reference_warm_up=3,
              description="a module whose class the model changes at its second call (module.__class__ = Fast), "
              "inside profile()'s warm-up", modules={"silu": {"child"}, "softsign": {""}},
              calls={"silu": 1})  # fmt: skip


# --- functional and stateless calls, forward-mode AD, grad modes ------------------------------------------------------


class Ensemble(nn.Module):
    def __init__(self):
        super().__init__()
        self.members = nn.ModuleList(Mlp() for _ in range(3))
        self.params, self.buffers_ = torch.func.stack_module_state(list(self.members))
        self.base = [Mlp().to("meta")]

    def forward(self, x):
        call = lambda p, b, v: torch.func.functional_call(self.base[0], (p, b), (v,))  # noqa: E731
        return torch.vmap(call, in_dims=(0, 0, None))(self.params, self.buffers_, x).sum(0)


def stacked_ensemble():
    return _w("stacked_ensemble", Ensemble().eval(), description="stack_module_state + vmap(functional_call) over a "
              "meta-device base model")  # fmt: skip


class Stateless(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()
        self.other = {k: v + 1 for k, v in Mlp().state_dict().items()}

    def forward(self, x):
        with torch.nn.utils.stateless._reparametrize_module(self.mlp, self.other):
            y = self.mlp(x)
        return nn.utils.stateless.functional_call(self.mlp, self.other, (y,)) + self.mlp(x)


def stateless_reparametrized():
    return _w("stateless_reparametrized", Stateless().eval(), description="nn.utils.stateless: _reparametrize_module "
              "and functional_call", modules={"gelu": {"mlp"}}, calls={"gelu": 3})  # fmt: skip


def forward_ad_dual():
    import torch.autograd.forward_ad as fwad

    model = Net().eval()

    def dual(x):
        with fwad.dual_level():
            out = model(fwad.make_dual(x, torch.ones_like(x)))
            primal, tangent = fwad.unpack_dual(out)
            return primal + tangent

    return _w("forward_ad_dual", model, fn=dual, description="forward-mode AD: dual tensors through the model",
              modules={"gelu": {"a", "b"}})  # fmt: skip


class GradSwitches(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Mlp(), Mlp()

    def forward(self, x):
        with torch.set_grad_enabled(True):
            y = self.a(x)
            with torch.no_grad(), torch.inference_mode():
                z = self.b(x)
        torch.set_grad_enabled(True)  # left on: the caller's no_grad puts it back
        return F.logsigmoid(y.detach() + z.clone())


def grad_switches():
    return _w("grad_switches", GradSwitches().eval(), description="set_grad_enabled(True) inside a no-grad forward, "
              "inference_mode nested in no_grad, grad left enabled", modules={"gelu": {"a", "b"},
              "logsigmoid": {""}})  # fmt: skip


class Traces(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp, self.fc = Mlp(), nn.Linear(16, 16)

    def forward(self, x):
        events = []
        before_trace, before_profile = sys.gettrace(), sys.getprofile()
        sys.settrace(lambda frame, event, arg: None if events.append(event) else None)
        sys.setprofile(lambda frame, event, arg: events.append(event))
        try:
            y = self.mlp(x)
        finally:
            sys.settrace(before_trace)
            sys.setprofile(before_profile)
        return F.gelu(self.fc(y))


def python_tracers_inside():
    return _w("python_tracers_inside", Traces().eval(), description="sys.settrace and sys.setprofile set inside a "
              "forward, around a child", modules={"gelu": {"mlp", ""}})  # fmt: skip


# --- transformers compositions and switches ---------------------------------------------------------------------------


def _bert_config(**extra):
    import transformers

    return transformers.BertConfig(**{**SIZES, **extra})


def hf_encoder_decoder_generate():
    import transformers

    decoder = _bert_config(is_decoder=True, add_cross_attention=True)
    cfg = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(_bert_config(), decoder)
    cfg.decoder_start_token_id, cfg.pad_token_id, cfg.eos_token_id = 1, 0, 2
    model = transformers.EncoderDecoderModel(cfg).eval()
    ids = _ids(2, 8)

    def generate():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                              num_beams=2, do_sample=False)  # fmt: skip

    return Workload("hf_encoder_decoder_generate", generate, None, model, "EncoderDecoderModel (BERT + BERT decoder "
                    "with cross-attention caches), beam search")  # fmt: skip


def hf_vision_encoder_decoder():
    import transformers

    vit = transformers.ViTConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 image_size=32, patch_size=8)  # fmt: skip
    gpt2 = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=64,
                                   add_cross_attention=True, is_decoder=True)  # fmt: skip
    cfg = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(vit, gpt2)
    cfg.decoder_start_token_id, cfg.pad_token_id, cfg.eos_token_id = 1, 0, 2
    model = transformers.VisionEncoderDecoderModel(cfg).eval()
    pixels = torch.randn(1, 3, 32, 32)

    def generate():
        return model.generate(pixel_values=pixels, max_new_tokens=4, min_new_tokens=4, do_sample=False)

    return Workload("hf_vision_encoder_decoder", generate, None, model, "VisionEncoderDecoderModel (ViT + GPT-2), "
                    "greedy generate()")  # fmt: skip


def hf_outputs_everything():
    import transformers

    cfg = transformers.AutoConfig.for_model("llama", **{**SIZES, "num_key_value_heads": 2})
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    kwargs = {"input_ids": _ids(), "output_attentions": True, "output_hidden_states": True, "return_dict": False}
    return Workload("hf_outputs_everything", model, [((), kwargs)], model, "Llama, eager attention, "
                    "output_attentions and output_hidden_states, return_dict=False")  # fmt: skip


def hf_sampling_seeded():
    import transformers

    cfg = transformers.AutoConfig.for_model("gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=64)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = _ids(2, 8)

    def generate():
        torch.manual_seed(0)
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                              do_sample=True, top_k=20, top_p=0.9, temperature=0.7, repetition_penalty=1.2,
                              pad_token_id=0)  # fmt: skip

    return Workload("hf_sampling_seeded", generate, None, model, "GPT-2 generate(): seeded sampling with top-k, "
                    "top-p, temperature and a repetition penalty")  # fmt: skip


UNSEEN4_FORWARD_MECHANISMS = {f.__name__: f for f in (
    call_impl_direct, odd_forward_kinds, class_changed_midway, stacked_ensemble, stateless_reparametrized,
    forward_ad_dual, grad_switches, python_tracers_inside, hf_encoder_decoder_generate, hf_vision_encoder_decoder,
    hf_outputs_everything, hf_sampling_seeded,
)}  # fmt: skip
