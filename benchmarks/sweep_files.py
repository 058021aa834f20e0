"""The program files of cpu_sweep.py, each with the dict of its factories (name -> a function that makes the
Workload): sweep_cpu_models.py (transformers architectures from tiny configs, random init, no downloads; generate()),
sweep_cpu_mechanisms.py, sweep_cpu_mechanisms_more.py, sweep_cpu_mechanisms_edge.py, sweep_cpu_mechanisms_unseen.py,
sweep_cpu_mechanisms_unseen_more.py, sweep_cpu_mechanisms_unseen3.py, sweep_cpu_mechanisms_unseen4.py,
sweep_cpu_mechanisms_unseen4_graphs.py and sweep_cpu_mechanisms_unseen4_forwards.py (torch mechanisms around small
modules: the last three add dispatch modes, tensor subclasses, __torch_function__ handlers, one-rank DTensor and DDP,
higher-order ops, export and TorchScript variants, odd forwards and transformers compositions),
sweep_cpu_mechanisms_unseen5.py, sweep_cpu_mechanisms_unseen5_instances.py, sweep_cpu_mechanisms_unseen5_ops.py and
sweep_cpu_mechanisms_unseen5_models.py (hooks of every kind, odd module names, asyncio tasks, frozen, copied and
tied modules, QAT, numerics namespaces, losses, sparse, complex and nested layouts, decoding loops of the user's own),
sweep_cpu_mechanisms_unseen6.py (hooks and forwards set around each call, a child's forward inspected by its parent),
sweep_cpu_models_unseen.py (transformers architectures and ``generate()`` modes that sweep_cpu_models.py leaves
out), sweep_cpu_mechanisms_unseen7.py and sweep_cpu_mechanisms_unseen7_ops.py (200 levels of nesting, 2,000
siblings, modules equal by value, ``__getattribute__`` forwards, contexts saved before profile(), forwards written by
``exec``, fx Interpreters, metaclasses, functionals held deeper; empty batches, integer-only models, odd dtypes and
strides, meta tensors, mkldnn, functionals and torch forwards a library replaced, ``torch.jit.trace`` in a forward,
vmap and Python scans), sweep_cpu_models_unseen7.py (more transformers architectures and
``generate()`` modes: prompt lookup, token constraints, a prefilled prompt cache, ``inputs_embeds``),
sweep_cpu_mechanisms_unseen8.py, sweep_cpu_mechanisms_unseen8_more.py and sweep_cpu_mechanisms_unseen8_modules.py
(model families written by hand: a diffusion UNet, a VAE decoder, a Swin-like ViT, RWKV and Mamba-like recurrences,
speculative decoding, a beam search, a list KV cache; torch.distributions mixtures, packed bidirectional recurrences,
the full nn.Transformer, resampling, routing, robust statistics, LU solves, a sparse GCN, NumPy detours, batch sizes;
modules doing more than their one call, hook dicts written directly, torch functions a library replaced, functionals
held in Enums, slots, lambda defaults and class registries), sweep_cpu_models_unseen8.py (transformers'
flex_attention on the CPU, SDPA with padding, pipeline objects profiled with ``module=pipeline.model``),
sweep_cpu_mechanisms_unseen9.py (singledispatch and cached-property forwards, the user's decorators and
record_function regions, hooks and forwards written around each call or at the recorded pass's first call,
``torch.export`` and a compiled function inside a forward, modules built or cast while recorded),
sweep_cpu_models_unseen9.py (hybrid state-space and mixture-of-experts decoders, ESM, ProphetNet, Depth Anything,
Pix2Struct, DAC, Mimi, BLIP; Whisper and beam-sampling Marian ``generate()``, bf16 at batch 1, ``torch.compile`` of
the root profiled with ``module=`` the model it wraps, in place, per layer, of ``model.forward`` and of
``model.generate``),
sweep_cpu_mechanisms_unseen10.py (the user's ``Lambda`` modules, default_collate, generator and dict-subclass outputs,
tensor and multi-grad hooks, torch.func.grad, packed sequences, rare functionals, Python operators, torch.save round
trips, clip_grad_norm_, Gumbel sampling under seeds, mkldnn flags, ``torch._check``, a child under two names, fx
tracing, make_fx and jit.script of a child in the forward),
sweep_cpu_mechanisms_unseen11.py and sweep_cpu_mechanisms_unseen11_more.py (torch.func vjp, jacfwd, linearize and
functionalize, nested torch.cond, FlexAttention with per-call document masks and inside a
compiled module, custom ops that mutate, return tuples or come from a ``Library``, jagged SDPA, fp16 dynamic
quantization, fp8 ``_scaled_mm``, autocast and parametrizations compiled, ``super().__call__``, a block under two
parents, ``send()``-driven generators, ``mark_dynamic`` and recompiles, checkpoint_sequential and save_on_cpu
backwards, MaskedTensor, allow_in_graph, a wrapper calling its model's forward directly), sweep_cpu_models_unseen11.py
(BART beam ``generate()`` returning a dict, ``generate()`` in a thread feeding a streamer, T5 with every output, BERT
layer pooling),
sweep_cpu_mechanisms_unseen12.py, sweep_cpu_mechanisms_unseen12_more.py and
sweep_cpu_mechanisms_unseen12_handlers.py (children pickled and torch.save'd whole in a forward, split_module, fx.wrap
and leaf-keeping tracers, complex rotary embeddings, FloatFunctional, custom_fwd, vmap's randomness, set_stance in a
forward, modules as arguments, out= tensors, odd indices, positional-only forwards, exported TorchScript methods,
functional_call with tied or parametrized weights, hooks calling their module again, hypernetworks, unsafe
parametrizations, pytree inputs, asyncio.to_thread, caught functional errors, forwards returning modules; objects that
are not tensors with __torch_function__, Parameter subclasses, DisableTorchFunction, checker and name-keyed modes),
sweep_cpu_models_unseen12.py (DeBERTa-v2, RoFormer, GPT-BigCode, CodeGen, XGLM, Granite, M2M-100, MobileViT, CANINE,
Nyströmformer, PatchTST, AST; a Llama training step under gradient checkpointing),
sweep_cpu_models_unseen13.py (custom autograd Functions of SEW-D and YOSO, ConvBERT's unfold convolution, NLLB-MoE's
capacity routing, deformable attention in RT-DETR and Deformable DETR, SuperPoint's keypoints, VITS, FastSpeech2,
backbones made by load_backbone, GroupViT, OWLv2, X-CLIP, GIT, MusicGen's guided ``generate()`` and more),
sweep_cpu_mechanisms_unseen13.py (boolean_dispatch functionals returning indices, seeded fractional pooling, a loss
given a distance callable, functionals as a class's staticmethod forward or an instance's forward, rare losses, norms,
activations and layers, the legacy pre-hook weight_norm),
sweep_cpu_mechanisms_unseen13_identity.py (forwards and torch functions asked what they are in a forward: identity
with the class's and with references held at import, ``__wrapped__``, ``getattr_static``, handlers dispatching on
``func`` by identity, import-time dicts and ``resolve_name``, functionals' attributes and signatures, copies of a
child whose forward checks it is its class's),
sweep_cpu_models_unseen14.py (DiffLlama, MiniMax's lightning attention, LFM2, Gemma 3n, xLSTM, Zamba, Nemotron-H,
Autoformer, TimesFM, ViLT and 40 more; ``generate()`` with guidance, watermarking, sampling tails, early-exit
self-speculation and given encoder outputs; pipelines: zero-shot, audio classification, speech recognition),
sweep_cpu_mechanisms_unseen14.py and sweep_cpu_mechanisms_unseen14_tensors.py (modules as context managers,
ModuleTracker, forked DataLoader workers, ``types.new_class`` and ``__init_subclass__`` forwards, dataclass modules,
finalizers, children made by ``__getattr__``, descriptor forwards; Python's protocols on tensors, FakeTensorMode,
``setup_context`` autograd Functions, selective checkpointing, saved-tensor hooks, anomaly mode, batched grads,
``torch.autograd.functional``, a custom op's CPU kernel and vmap rule),
sweep_cpu_mechanisms_unseen15.py (compiled functions handed the model's modules, in containers too, or reading one
as a global, with a resume function that holds no ``self``, a compiled method of a plain object, compiled children that
break, are hooked or run in a thread, a ModuleDict of keys that are no identifiers, reduce-overhead with dynamic
shapes), sweep_cpu_mechanisms_unseen15_calls.py (vmap of a child, partialmethod and lambda forwards, children through
map, reduce, weakref proxies and ``type(child).__call__``), sweep_cpu_models_unseen15.py (24 transformers families no
other file built),
sweep_cpu_zoo_torchvision.py and sweep_cpu_zoo_timm.py (every torchvision builder, timm's families; cpu_sweep.py runs
them alone with ``--only-zoo``).
"""

from __future__ import annotations

import importlib

SWEEP_FILES = {  # the program files and the dict of factories each holds, in the order a sweep runs them
    "sweep_cpu_models": "MODELS", "sweep_cpu_mechanisms": "MECHANISMS", "sweep_cpu_mechanisms_more": "MORE_MECHANISMS",
    "sweep_cpu_mechanisms_edge": "EDGE_MECHANISMS", "sweep_cpu_models_unseen": "UNSEEN_MODELS",
    "sweep_cpu_mechanisms_unseen": "UNSEEN_MECHANISMS", "sweep_cpu_mechanisms_unseen_more": "UNSEEN_MORE_MECHANISMS",
    "sweep_cpu_mechanisms_unseen3": "UNSEEN3_MECHANISMS", "sweep_cpu_mechanisms_unseen4": "UNSEEN4_MECHANISMS",
    "sweep_cpu_mechanisms_unseen4_graphs": "UNSEEN4_GRAPH_MECHANISMS",
    "sweep_cpu_mechanisms_unseen4_forwards": "UNSEEN4_FORWARD_MECHANISMS",
    "sweep_cpu_mechanisms_unseen5": "UNSEEN5_MECHANISMS", "sweep_cpu_mechanisms_unseen5_instances":
    "UNSEEN5_INSTANCE_MECHANISMS", "sweep_cpu_mechanisms_unseen5_ops": "UNSEEN5_OP_MECHANISMS",
    "sweep_cpu_mechanisms_unseen5_models": "UNSEEN5_MODELS", "sweep_cpu_mechanisms_unseen6": "UNSEEN6_MECHANISMS",
    "sweep_cpu_mechanisms_unseen7": "UNSEEN7_MECHANISMS",
    "sweep_cpu_mechanisms_unseen7_ops": "UNSEEN7_OP_MECHANISMS", "sweep_cpu_models_unseen7": "UNSEEN7_MODELS",
    "sweep_cpu_mechanisms_unseen8": "UNSEEN8_MECHANISMS",
    "sweep_cpu_mechanisms_unseen8_more": "UNSEEN8_MORE_MECHANISMS",
    "sweep_cpu_mechanisms_unseen8_modules": "UNSEEN8_MODULE_MECHANISMS", "sweep_cpu_models_unseen8": "UNSEEN8_MODELS",
    "sweep_cpu_mechanisms_unseen9": "UNSEEN9_MECHANISMS",
    "sweep_cpu_models_unseen9": "UNSEEN9_MODELS",
    "sweep_cpu_mechanisms_unseen10": "UNSEEN10_MECHANISMS",
    "sweep_cpu_mechanisms_unseen11": "UNSEEN11_MECHANISMS",
    "sweep_cpu_mechanisms_unseen11_more": "UNSEEN11_MORE_MECHANISMS", "sweep_cpu_models_unseen11": "UNSEEN11_MODELS",
    "sweep_cpu_mechanisms_unseen12": "UNSEEN12_MECHANISMS",
    "sweep_cpu_mechanisms_unseen12_more": "UNSEEN12_MORE_MECHANISMS",
    "sweep_cpu_mechanisms_unseen12_handlers": "UNSEEN12_HANDLER_MECHANISMS",
    "sweep_cpu_models_unseen12": "UNSEEN12_MODELS", "sweep_cpu_models_unseen13": "UNSEEN13_MODELS",
    "sweep_cpu_mechanisms_unseen13": "UNSEEN13_MECHANISMS",
    "sweep_cpu_mechanisms_unseen13_identity": "UNSEEN13_IDENTITY_MECHANISMS",
    "sweep_cpu_models_unseen14": "UNSEEN14_MODELS",
    "sweep_cpu_mechanisms_unseen14": "UNSEEN14_MECHANISMS",
    "sweep_cpu_mechanisms_unseen14_tensors": "UNSEEN14_TENSOR_MECHANISMS",
    "sweep_cpu_models_unseen15": "UNSEEN15_MODELS",
    "sweep_cpu_mechanisms_unseen15": "UNSEEN15_MECHANISMS",
    "sweep_cpu_mechanisms_unseen15_calls": "UNSEEN15_CALL_MECHANISMS",
    "sweep_cpu_zoo_torchvision": "TORCHVISION_MODELS", "sweep_cpu_zoo_timm": "TIMM_MODELS",
}  # fmt: skip


def factories() -> dict:
    made: dict = {}
    for file, factories_name in SWEEP_FILES.items():
        found = getattr(importlib.import_module(file), factories_name)
        taken = sorted(made.keys() & found.keys())
        if taken:  # a later file's program would silently replace an earlier one, which then never runs
            raise ValueError(f"{file}.{factories_name} names programs that an earlier file names: {', '.join(taken)}")
        made.update(found)
    return made
