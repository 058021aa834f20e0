"""More GPU programs for model_sweep.py, each a way of running a model that no other workload holds: detection,
segmentation, video and optical-flow models of torchvision; transformers models under autocast, with a static
KV cache, and compiled as their users compile them (the bound ``forward`` replaced by a compiled one, the
``reduce-overhead`` mode's CUDA graphs); torch.func ensembles under vmap; jagged nested tensors through SDPA;
cuDNN's benchmark mode; a forward that syncs on data (``.item()``, boolean masks) under inference_mode.
"""

from __future__ import annotations

import torch
from sweep_programs import small_llama
from torch import nn
from torch.nn import functional as F
from workload import BF16, DEVICE, HALF, Workload


def _detection(name: str, arch: str, size: int = 320) -> Workload:
    import torchvision

    builder = getattr(torchvision.models.detection, arch)
    model = builder(weights=None, weights_backbone=None, min_size=size, max_size=size).to(DEVICE).eval()
    images = [torch.rand(3, size, size, device=DEVICE) for _ in range(2)]
    return Workload(name, model, [((images,), {})], model, f"torchvision {arch}, 2 images of {size}px, fp32")


def tv_maskrcnn() -> Workload:
    return _detection("tv_maskrcnn", "maskrcnn_resnet50_fpn")


def tv_retinanet() -> Workload:
    return _detection("tv_retinanet", "retinanet_resnet50_fpn")


def tv_deeplabv3() -> Workload:
    import torchvision

    model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None)
    model = model.to(DEVICE, HALF).eval()
    x = torch.randn(2, 3, 256, 256, device=DEVICE, dtype=HALF)
    return Workload("tv_deeplabv3", model, [((x,), {})], model, "DeepLabV3 MobileNetV3 (dict output), fp16")


def tv_r3d_18() -> Workload:
    import torchvision

    model = torchvision.models.video.r3d_18(weights=None).to(DEVICE, HALF).eval()
    clip = torch.randn(2, 3, 8, 112, 112, device=DEVICE, dtype=HALF)
    return Workload("tv_r3d_18", model, [((clip,), {})], model, "R3D-18 video model (conv3d), 2 clips of 8 frames")


def tv_raft_small() -> Workload:
    import torchvision

    model = torchvision.models.optical_flow.raft_small(weights=None).to(DEVICE).eval()
    frames = [torch.rand(1, 3, 128, 128, device=DEVICE) for _ in range(2)]
    kwargs = {"num_flow_updates": 4}
    return Workload("tv_raft_small", model, [((*frames,), kwargs)], model, "RAFT-small optical flow, 4 updates")


def _bert(**config):
    from transformers import BertConfig, BertModel

    sizes = {"vocab_size": 4000, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
             "num_attention_heads": 4}  # fmt: skip
    return BertModel(BertConfig(**sizes, **config)).to(DEVICE).eval()


def hf_bert_autocast() -> Workload:
    model = _bert(attn_implementation="sdpa")
    ids = torch.randint(3, 4000, (4, 128), device=DEVICE)

    def under_autocast():
        with torch.autocast(DEVICE, dtype=BF16):
            return model(input_ids=ids).last_hidden_state

    return Workload("hf_bert_autocast", under_autocast, None, model, "BERT fp32 weights under bf16 autocast, SDPA")


def hf_static_cache_generate() -> Workload:
    model = small_llama(max_positions=256)
    ids = torch.randint(3, 4000, (2, 16), device=DEVICE)

    def generate():
        return model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False, cache_implementation="static")

    return Workload("hf_static_cache_generate", generate, None, model, "Llama generate() with a StaticCache")


def hf_gpt2_compiled_forward() -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=4000, n_embd=256, n_layer=2, n_head=4, n_positions=256)
    model = GPT2LMHeadModel(config).to(DEVICE, HALF).eval()
    model.forward = torch.compile(model.forward)  # as transformers' docs show: the bound forward, compiled
    ids = torch.randint(3, 4000, (4, 64), device=DEVICE)
    description = "GPT-2 with its bound forward replaced by torch.compile(model.forward)"
    return Workload("hf_gpt2_compiled_forward", model, [((ids,), {"use_cache": False})], model, description,
                    compiled=True)  # fmt: skip


def hf_distilbert_reduce_overhead() -> Workload:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=4000, dim=256, hidden_dim=1024, n_layers=2, n_heads=4)
    model = DistilBertModel(config).to(DEVICE, HALF).eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    ids = torch.randint(3, 4000, (4, 64), device=DEVICE)
    description = "DistilBERT under torch.compile(mode='reduce-overhead'): CUDA graph trees"
    return Workload("hf_distilbert_reduce_overhead", compiled, [((ids,), {})], compiled, description, compiled=True)


class _Member(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(128, 256), nn.Linear(256, 64)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class _Ensemble(nn.Module):
    """torch.func's model ensembling: the members' stacked parameters, one functional_call under vmap."""

    def __init__(self, members: int = 4):
        super().__init__()
        from torch.func import stack_module_state

        self.members = nn.ModuleList(_Member() for _ in range(members))
        params, buffers = stack_module_state(list(self.members))
        self.params = nn.ParameterDict({k.replace(".", "_"): nn.Parameter(v) for k, v in params.items()})
        self.names, self.buffers_ = list(params), buffers
        self._base = [_Member().to("meta")]  # in a list: not a submodule, so .to() leaves it on meta

    def forward(self, x):
        from torch.func import functional_call, vmap

        params = {name: self.params[name.replace(".", "_")] for name in self.names}

        def one(p, b, x):
            return functional_call(self._base[0], (p, b), (x,))

        return vmap(one, in_dims=(0, 0, None))(params, self.buffers_, x)


def vmap_ensemble() -> Workload:
    model = _Ensemble().to(DEVICE, HALF).eval()
    x = torch.randn(32, 128, device=DEVICE, dtype=HALF)
    return Workload("vmap_ensemble", model, [((x,), {})], model, "torch.func ensemble: vmap over functional_call")


class _JaggedAttention(nn.Module):
    def __init__(self, dim: int = 128, heads: int = 4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v)
        return self.out(attended.transpose(1, 2).flatten(-2))


def nested_jagged_sdpa() -> Workload:
    model = _JaggedAttention().to(DEVICE, HALF).eval()
    lengths = (17, 64, 5, 40)
    x = torch.nested.nested_tensor(
        [torch.randn(n, 128, device=DEVICE, dtype=HALF) for n in lengths], layout=torch.jagged
    )
    return Workload("nested_jagged_sdpa", model, [((x,), {})], model, "jagged nested tensors through SDPA")


class _Routed(nn.Module):
    """A forward that syncs on data: boolean masks, nonzero and .item() pick the work."""

    def __init__(self):
        super().__init__()
        self.gate, self.small, self.large = nn.Linear(128, 1), nn.Linear(128, 128), nn.Linear(128, 512)

    def forward(self, x):
        chosen = self.gate(x).squeeze(-1) > 0
        out = torch.zeros(x.shape[0], 512, device=x.device, dtype=x.dtype)
        if chosen.any().item():
            out[chosen] = self.large(x[chosen])
        rows = torch.nonzero(~chosen).squeeze(-1)
        out[rows, :128] = torch.relu(self.small(x[rows]))
        return out


def data_dependent() -> Workload:
    model = _Routed().to(DEVICE, HALF).eval()
    x = torch.randn(256, 128, device=DEVICE, dtype=HALF)

    def inference():
        with torch.inference_mode():
            return model(x)

    return Workload("data_dependent", inference, None, model, "boolean masks, nonzero, .item() under inference_mode")


class _Convs(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 5, stride=2, padding=2), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 16, 4, stride=2, padding=1),
        )  # fmt: skip

    def forward(self, x):
        return self.body(x)


class _CudnnBenchmark(nn.Module):
    """cuDNN's benchmark mode on for the model's passes only: it tries algorithms on each new shape."""

    def __init__(self):
        super().__init__()
        self.convs = _Convs()

    def forward(self, x):
        before = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = True
        try:
            return self.convs(x)
        finally:
            torch.backends.cudnn.benchmark = before


def cudnn_benchmark() -> Workload:
    model = _CudnnBenchmark().to(DEVICE, HALF).eval().to(memory_format=torch.channels_last)
    x = torch.randn(8, 3, 96, 96, device=DEVICE, dtype=HALF).to(memory_format=torch.channels_last)
    return Workload("cudnn_benchmark", model, [((x,), {})], model, "convs under cudnn.benchmark, channels_last")


MORE = [
    tv_maskrcnn, tv_retinanet, tv_deeplabv3, tv_r3d_18, tv_raft_small, hf_bert_autocast, hf_static_cache_generate,
    hf_gpt2_compiled_forward, hf_distilbert_reduce_overhead, vmap_ensemble, nested_jagged_sdpa, data_dependent,
    cudnn_benchmark,
]  # fmt: skip


def _hf_auto(model_type: str, seq: int = 64, **config) -> Workload:
    """A transformers architecture from a small random config (``AutoConfig.for_model``), fp16, no KV cache."""
    from transformers import AutoConfig, AutoModel

    sizes = {"vocab_size": 4000, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
             "num_attention_heads": 4, **config}  # fmt: skip
    model = AutoModel.from_config(AutoConfig.for_model(model_type, **sizes)).to(DEVICE, HALF).eval()
    ids = torch.randint(3, 4000, (4, seq), device=DEVICE)
    description = f"transformers {model_type} (AutoModel, small random config), batch 4, seq {seq}, fp16"
    return Workload(f"hf_{model_type}", model, [((), {"input_ids": ids, "use_cache": False})], model, description)


def _hf_encoder(model_type: str, **config) -> Workload:
    from transformers import AutoConfig, AutoModel

    sizes = {"vocab_size": 4000, "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
             "num_attention_heads": 4, **config}  # fmt: skip
    model = AutoModel.from_config(AutoConfig.for_model(model_type, **sizes)).to(DEVICE, HALF).eval()
    ids = torch.randint(3, 4000, (4, 64), device=DEVICE)
    description = f"transformers {model_type} encoder (AutoModel, small random config), batch 4, seq 64, fp16"
    return Workload(f"hf_{model_type}", model, [((), {"input_ids": ids})], model, description)


HF_AUTO = {
    "gemma2": lambda: _hf_auto("gemma2", num_key_value_heads=2, head_dim=64, sliding_window=32),
    "qwen2_moe": lambda: _hf_auto("qwen2_moe", num_key_value_heads=2, moe_intermediate_size=256,
                                  shared_expert_intermediate_size=512, num_experts=4, num_experts_per_tok=2),
    "falcon": lambda: _hf_auto("falcon"),
    "bloom": lambda: _hf_auto("bloom", n_head=4),
    "opt": lambda: _hf_auto("opt", ffn_dim=1024, word_embed_proj_dim=256),
    "stablelm": lambda: _hf_auto("stablelm", num_key_value_heads=2),
    "deberta-v2": lambda: _hf_encoder("deberta-v2", relative_attention=True, pos_att_type=["p2c", "c2p"]),
    "electra": lambda: _hf_encoder("electra", embedding_size=128),
}  # fmt: skip
