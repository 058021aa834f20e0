"""More models for the GPU check, each a kind whose kernels are hard to name: a decoder LLM with grouped-query
attention and RMSNorm, a mixture of experts, an encoder-decoder's generate() (the pipeline form: a function, no
samples), a detection model with NMS and RoIAlign, recurrent layers (cuDNN through torch._VF), the fused fast path
of a stock nn.TransformerEncoder, a CNN compiled whole with inductor, and the same CNN exported (torch.export).
Random init, no downloads; the GPU sizes are real-model shapes cut to a few layers, the CPU sizes small enough to
try the check on a laptop."""

from __future__ import annotations

import torch
from torch import nn
from workload import BF16, DEVICE, HALF, Workload, on_gpu


def _decoder(name: str, model: nn.Module, lengths: tuple, kind: str) -> Workload:
    """A causal LM on batches of 4 random token sequences of ``lengths``, bf16, without a KV cache."""
    model = model.to(DEVICE, BF16).eval()
    c = model.config
    samples = [
        ((), {"input_ids": torch.randint(0, c.vocab_size, (4, n), device=DEVICE), "use_cache": False}) for n in lengths
    ]
    description = (
        f"transformers {kind}, {c.num_hidden_layers} layers, d {c.hidden_size}, {c.num_attention_heads} heads / "
        f"{c.num_key_value_heads} KV heads (GQA), batch 4, seq {lengths}, bf16, use_cache=False"
    )
    return Workload(name, model, samples, model, description, 0)


def _decoder_sizes(intermediate: int, layers: int) -> dict:
    return {
        "vocab_size": on_gpu(32000, 2000),
        "hidden_size": on_gpu(1024, 128),
        "intermediate_size": on_gpu(intermediate, intermediate // 8),
        "num_hidden_layers": on_gpu(layers, 2),
        "num_attention_heads": on_gpu(16, 4),
        "num_key_value_heads": on_gpu(4, 2),
        "max_position_embeddings": 1024,
    }


def llama() -> Workload:
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(**_decoder_sizes(2816, 8)))
    return _decoder("llama", model, on_gpu((512, 256), (32, 16)), "Llama (RMSNorm, SwiGLU)")


def mixtral() -> Workload:
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(**_decoder_sizes(1792, 4), num_local_experts=8, num_experts_per_tok=2)
    lengths = on_gpu((256, 128), (32, 16))
    return _decoder("mixtral", MixtralForCausalLM(config), lengths, "Mixtral MoE (8 experts, top-2)")


def t5_generate() -> Workload:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=on_gpu(32128, 2000),
        d_model=on_gpu(512, 128),
        d_kv=on_gpu(64, 32),
        d_ff=on_gpu(2048, 512),
        num_layers=on_gpu(6, 2),
        num_heads=on_gpu(8, 4),
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    model = T5ForConditionalGeneration(config).to(DEVICE, BF16).eval()
    ids = torch.randint(2, config.vocab_size, (4, on_gpu(128, 16)), device=DEVICE)
    new_tokens = on_gpu(32, 8)

    def generate():
        return model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, min_new_tokens=new_tokens
        )

    return Workload(
        "t5_generate",
        generate,
        None,
        model,
        f"transformers T5 (d {config.d_model}, {config.num_layers}+{config.num_layers} layers) generate(), greedy, "
        f"{new_tokens} new tokens, batch 4, bf16: profile(fn, module=model) with data=None",
        0,
    )


def fasterrcnn() -> Workload:
    import torchvision

    model = torchvision.models.detection.fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None)
    model = model.to(DEVICE).eval()
    images = [torch.rand(3, on_gpu(512, 128), on_gpu(512, 128), device=DEVICE) for _ in range(2)]
    return Workload(
        "fasterrcnn",
        model,
        [((images,), {})],
        model,
        "torchvision Faster R-CNN ResNet-50 FPN, random weights, 2 images 512x512 (resized to 800), fp32: "
        "torchvision::nms, roi_align",
        0,
    )


class Recurrent(nn.Module):
    """A 2-layer LSTM then a GRU (cuDNN RNN kernels, called through torch._VF) and a linear head."""

    def __init__(self, width: int):
        super().__init__()
        self.lstm = nn.LSTM(width, width, 2, batch_first=True)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, width)

    def forward(self, x):
        h, _ = self.lstm(x)
        h, _ = self.gru(h)
        return self.head(h)


def rnn() -> Workload:
    width = on_gpu(512, 64)
    model = Recurrent(width).to(DEVICE, HALF).eval()
    x = torch.randn(16, on_gpu(128, 16), width, device=DEVICE, dtype=HALF)
    return Workload("rnn", model, [((x,), {})], model, f"nn.LSTM (2 layers) + nn.GRU, {width} wide, batch 16, fp16")


def fast_path_encoder() -> Workload:
    width = on_gpu(512, 64)
    layer = nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 4).to(DEVICE, HALF).eval()
    x = torch.randn(8, on_gpu(128, 16), width, device=DEVICE, dtype=HALF)
    return Workload(
        "fast_path_encoder",
        model,
        [((x,), {})],
        model,
        f"stock nn.TransformerEncoder(nn.TransformerEncoderLayer({width}, 8, batch_first=True), 4) in eval: the "
        "fused fast path (aten::_transformer_encoder_layer_fwd), fp16",
    )


class SmallCNN(nn.Module):
    """Conv-BatchNorm-ReLU stages with stride 2, then pooling and a classifier."""

    def __init__(self, widths=(32, 64, 128, 256)):
        super().__init__()
        stages, previous = [], 3
        for width in widths:
            stages += [nn.Conv2d(previous, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
            previous = width
        self.features = nn.Sequential(*stages)
        self.classifier = nn.Linear(previous, 1000)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


def compiled_cnn() -> Workload:
    model = torch.compile(SmallCNN().to(DEVICE, HALF).eval())
    x = torch.randn(on_gpu(32, 2), 3, on_gpu(128, 32), on_gpu(128, 32), device=DEVICE, dtype=HALF)
    return Workload(
        "compiled_cnn",
        model,
        [((x,), {})],
        model,
        "a CNN (4 conv-bn-relu stages, pool, linear) compiled whole: torch.compile(model), inductor, batch 32, fp16",
        compiled=True,
    )


def exported_cnn() -> Workload:
    x = torch.randn(on_gpu(32, 2), 3, on_gpu(128, 32), on_gpu(128, 32), device=DEVICE, dtype=HALF)
    model = torch.export.export(SmallCNN().to(DEVICE, HALF).eval(), (x,)).module()
    return Workload(
        "exported_cnn",
        model,
        [((x,), {})],
        model,
        "the same CNN through torch.export: ExportedProgram.module(), one flat GraphModule whose nodes name the "
        "modules they ran in, batch 32, fp16",
    )


MODELS = [llama, mixtral, t5_generate, fasterrcnn, rnn, fast_path_encoder, compiled_cnn, exported_cnn]
