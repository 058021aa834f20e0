"""The GPU check's checks (gpu_check.check) on models the sample workloads do not hold: timm and torchvision
vision models, transformers architectures built from small configs (random init, no downloads), and a few
programs that launch kernels outside any torch operator (a raw Triton kernel, torch.fft, cuSOLVER, nested
tensors, autocast), and the GPU programs of sweep_programs.py and sweep_models_more.py. A model its library
cannot build here is reported as skipped, never as passed.

    python benchmarks/model_sweep.py OUT [name ...] [--deadline SECONDS]

Writes OUT/model_sweep.json (one result per model, as gpu_check.json's) and prints a table. The run directories
are written under a temporary directory and removed: only the numbers come back, unless ``--keep`` writes them under
OUT/runs/ (to look into a model's finding offline).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).parent))
from gpu_check import check, environment  # noqa: E402
from sweep_models_more import HF_AUTO, MORE  # noqa: E402
from sweep_programs import PROGRAMS  # noqa: E402
from workload import DEVICE, HALF, Workload  # noqa: E402


def _vision(name: str, model: nn.Module, size: int = 224, batch: int = 8, channels_last: bool = False) -> Workload:
    model = model.to(DEVICE, HALF).eval()
    x = torch.randn(batch, 3, size, size, device=DEVICE, dtype=HALF)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    return Workload(name, model, [((x,), {})], model, f"{name}, batch {batch}, {size}px, fp16")


def _timm(arch: str, **kw) -> Workload:
    import timm

    return _vision(f"timm_{arch}", timm.create_model(arch, pretrained=False, num_classes=100), **kw)


def _torchvision(arch: str, **kw) -> Workload:
    import torchvision

    return _vision(f"tv_{arch}", getattr(torchvision.models, arch)(weights=None), **kw)


def _text(name: str, model: nn.Module, vocab: int, seq: int = 128, batch: int = 4, **extra) -> Workload:
    model = model.to(DEVICE, HALF).eval()
    ids = torch.randint(3, vocab, (batch, seq), device=DEVICE)
    kwargs = {"input_ids": ids, **extra}
    return Workload(name, model, [((), kwargs)], model, f"transformers {name}, batch {batch}, seq {seq}, fp16")


def _small(**sizes):
    return {
        "hidden_size": 256,
        "intermediate_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 4000,
        **sizes,
    }


def hf_mistral() -> Workload:
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(**_small(num_key_value_heads=2, sliding_window=64))
    return _text("hf_mistral", MistralForCausalLM(config), 4000, use_cache=False)


def hf_qwen2() -> Workload:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return _text("hf_qwen2", Qwen2ForCausalLM(Qwen2Config(**_small(num_key_value_heads=2))), 4000, use_cache=False)


def hf_phi() -> Workload:
    from transformers import PhiConfig, PhiForCausalLM

    return _text("hf_phi", PhiForCausalLM(PhiConfig(**_small())), 4000, use_cache=False)


def hf_gpt_neox() -> Workload:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    return _text("hf_gpt_neox", GPTNeoXForCausalLM(GPTNeoXConfig(**_small())), 4000, use_cache=False)


def hf_bart() -> Workload:
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(
        vocab_size=4000, d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
    )  # fmt: skip
    return _text("hf_bart", BartForConditionalGeneration(config), 4000, use_cache=False)


def hf_distilbert() -> Workload:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=4000, dim=256, hidden_dim=1024, n_layers=2, n_heads=4)
    return _text("hf_distilbert", DistilBertModel(config), 4000)


def hf_mamba() -> Workload:
    from transformers import MambaConfig, MambaForCausalLM

    config = MambaConfig(vocab_size=4000, hidden_size=256, num_hidden_layers=2, state_size=16)
    return _text("hf_mamba", MambaForCausalLM(config), 4000, seq=64, use_cache=False)


def hf_whisper_encoder() -> Workload:
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(
        d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=1024, decoder_ffn_dim=1024, num_mel_bins=80, vocab_size=4000, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
    )  # fmt: skip
    encoder = WhisperModel(config).get_encoder().to(DEVICE, HALF).eval()
    features = torch.randn(2, 80, 3000, device=DEVICE, dtype=HALF)
    return Workload("hf_whisper_encoder", encoder, [((features,), {})], encoder, "Whisper encoder, 2 x 30 s")


def hf_wav2vec2() -> Workload:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024)
    model = Wav2Vec2Model(config).to(DEVICE, HALF).eval()
    audio = torch.randn(2, 16000, device=DEVICE, dtype=HALF)
    return Workload("hf_wav2vec2", model, [((audio,), {})], model, "wav2vec2 (conv feature encoder), 2 x 1 s")


def hf_clip() -> Workload:
    from transformers import CLIPConfig, CLIPModel

    config = CLIPConfig(
        text_config={"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "vocab_size": 4000},
        vision_config={"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "image_size": 224, "patch_size": 32},
    )  # fmt: skip
    model = CLIPModel(config).to(DEVICE, HALF).eval()
    kwargs = {
        "input_ids": torch.randint(3, 4000, (4, 32), device=DEVICE),
        "pixel_values": torch.randn(4, 3, 224, 224, device=DEVICE, dtype=HALF),
    }
    return Workload("hf_clip", model, [((), kwargs)], model, "CLIP text + vision towers, batch 4")


class _RawTriton(nn.Module):
    """A Linear, then a Triton kernel launched by hand (no torch operator around it), then a ReLU."""

    def __init__(self):
        super().__init__()
        import triton
        import triton.language as tl

        @triton.jit
        def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

        self.kernel, self.cdiv = scale, triton.cdiv
        self.fc = nn.Linear(256, 256)

    def forward(self, x):
        y = self.fc(x)
        out = torch.empty_like(y)
        n = y.numel()
        self.kernel[(self.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
        return F.relu(out)


class _AutotunedTriton(nn.Module):
    """An autotuned Triton kernel (``@triton.autotune``) launched with a grid function made per launch."""

    def __init__(self):
        super().__init__()
        import triton
        import triton.language as tl

        configs = [triton.Config({"BLOCK": b}) for b in (256, 1024)]

        @triton.autotune(configs=configs, key=["n"])
        @triton.jit
        def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

        self.kernel, self.cdiv = add_one, triton.cdiv
        self.norm = nn.LayerNorm(256)

    def forward(self, x):
        y = self.norm(x)
        out = torch.empty_like(y)
        n = y.numel()
        self.kernel[lambda meta: (self.cdiv(n, meta["BLOCK"]),)](y, out, n)
        return out


def raw_triton_autotuned() -> Workload:
    model = _AutotunedTriton().to(DEVICE, HALF).eval()
    x = torch.randn(64, 256, device=DEVICE, dtype=HALF)
    return Workload("raw_triton_autotuned", model, [((x,), {})], model, "LayerNorm, an autotuned Triton kernel")


def raw_triton() -> Workload:
    model = _RawTriton().to(DEVICE, HALF).eval()
    x = torch.randn(64, 256, device=DEVICE, dtype=HALF)
    return Workload("raw_triton", model, [((x,), {})], model, "Linear, a Triton kernel launched by hand, ReLU")


class _Numerics(nn.Module):
    """cuFFT, cuSOLVER, cuBLAS batched, sorting, a scatter, an EmbeddingBag, under autocast."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(1000, 64, mode="mean")
        self.proj = nn.Linear(64, 64)

    def forward(self, x, ids, offsets):
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            spectrum = torch.fft.rfft(x, dim=-1).abs()
            h = self.proj(self.bag(ids, offsets))
        a = x[:, :32, :32].float() @ x[:, :32, :32].float().transpose(1, 2) + 32 * torch.eye(32, device=x.device)
        chol = torch.linalg.cholesky(a)
        ranked, _ = torch.sort(h.float(), dim=-1)
        hist = torch.zeros(64, device=x.device).scatter_add_(0, ids[:64] % 64, torch.ones(64, device=x.device))
        return spectrum.sum() + chol.sum() + ranked.sum() + hist.sum()


def numerics() -> Workload:
    model = _Numerics().to(DEVICE).eval()
    x = torch.randn(8, 64, 256, device=DEVICE)
    ids = torch.randint(0, 1000, (256,), device=DEVICE)
    offsets = torch.arange(0, 256, 8, device=DEVICE)
    return Workload("numerics", model, [((x, ids, offsets), {})], model, "fft, cholesky, sort, scatter, bag")


class _Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(128, 4, batch_first=True)

    def forward(self, x, padding):
        return self.attn(x, x, x, key_padding_mask=padding, need_weights=False)[0]


def masked_attention() -> Workload:
    model = _Nested().to(DEVICE, HALF).eval()
    x = torch.randn(8, 100, 128, device=DEVICE, dtype=HALF)
    padding = torch.arange(100, device=DEVICE)[None, :] >= torch.randint(10, 100, (8, 1), device=DEVICE)
    return Workload("masked_attention", model, [((x, padding), {})], model, "MHA with a padding mask")


def _factories() -> dict:
    timm_archs = {
        "efficientnet_b0": {}, "mobilenetv3_large_100": {}, "convnext_tiny": {"channels_last": True},
        "swin_tiny_patch4_window7_224": {}, "deit_small_patch16_224": {}, "regnety_016": {},
        "densenet121": {}, "mixer_b16_224": {}, "maxvit_tiny_tf_224": {}, "levit_128": {},
        "poolformer_s12": {}, "inception_v3": {"size": 299}, "efficientvit_b0": {}, "coatnet_0_rw_224": {},
    }  # fmt: skip
    tv_archs = {"mobilenet_v2": {}, "swin_t": {}, "efficientnet_v2_s": {}, "regnet_y_400mf": {}, "squeezenet1_1": {}}
    factories = {f"timm_{a}": (lambda a=a, kw=kw: _timm(a, **kw)) for a, kw in timm_archs.items()}
    factories.update({f"tv_{a}": (lambda a=a, kw=kw: _torchvision(a, **kw)) for a, kw in tv_archs.items()})
    for f in (hf_mistral, hf_qwen2, hf_phi, hf_gpt_neox, hf_bart, hf_distilbert, hf_mamba, hf_whisper_encoder,
              hf_wav2vec2, hf_clip, raw_triton, raw_triton_autotuned, numerics, masked_attention,
              *PROGRAMS, *MORE):  # fmt: skip
        factories[f.__name__] = f
    factories.update({f"hf_{name}": f for name, f in HF_AUTO.items()})
    return factories


COLUMNS = [
    "workload", "rows", "plain_device_events", "same_device_events_as_plain", "pct_time_in_rows",
    "pct_time_named_function",
    "in_process_equals_offline", "outputs_bit_identical", "launch_check_ok", "readers_agree",
    "rows_equal_reference", "samples_equal_reference", "profile_e2e_s", "error",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--deadline", type=float, default=480, help="start no model after this many seconds")
    parser.add_argument("--keep", action="store_true", help="keep the run directories under OUT/runs/")
    args = parser.parse_intermixed_args()  # gpu_session.py puts the names after --deadline
    factories = _factories()
    names = args.names or list(factories)
    args.out.mkdir(parents=True, exist_ok=True)
    env, results, began = environment(), [], time.perf_counter()
    print(json.dumps(env), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = args.out / "runs" if args.keep else Path(tmp)
        runs.mkdir(exist_ok=True)
        for name in names:
            if time.perf_counter() - began > args.deadline:
                results.append({"workload": name, "skipped": "past the deadline"})
                continue
            start = time.perf_counter()
            try:
                w = factories[name]()
            except Exception as exc:  # a library that cannot build the model here: not a result
                results.append({"workload": name, "skipped": f"{type(exc).__name__}: {str(exc)[:200]}"})
            else:
                try:
                    results.append(check(w, runs))
                except Exception as exc:  # a failure of kernelscope on this model: the finding
                    results.append(
                        {"workload": name, "error": f"{type(exc).__name__}: {exc}"[:500],
                         "traceback": traceback.format_exc()[-3000:]}
                    )  # fmt: skip
                del w
            results[-1]["check_s"] = time.perf_counter() - start
            print(json.dumps(results[-1], default=str), flush=True)
            torch.cuda.empty_cache()
    (args.out / "model_sweep.json").write_text(json.dumps({"environment": env, "results": results}, default=str))
    table = pd.DataFrame(results).reindex(columns=COLUMNS + ["skipped"])
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 3):
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
