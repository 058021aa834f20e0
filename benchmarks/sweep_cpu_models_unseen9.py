"""transformers architectures and usage patterns for cpu_sweep.py that the other sweep files leave out, from tiny
configs (random init, no downloads): hybrid state-space decoders (Zamba2, Falcon-H1, Bamba), mixtures of experts
(OLMoE, Granite-MoE, DBRX), ESM's rotary protein encoder, ProphetNet's n-gram stream, GPT-NeoX, Cohere, DINOv2 with
registers, Depth Anything's DPT head, Pix2Struct, DAC, WavLM, Mimi, BLIP; ``generate()`` of Whisper and Marian
(beam search with sampling, seeded); a bf16 model on the CPU at batch 1 and an odd length; ``torch.compile`` at
the root (``aot_eager``, ``dynamic=True``; profiled with ``module=`` the model it wraps), in place (``model.compile``,
``dynamic=True``, three lengths), on every decoder layer (``fullgraph=True``), of ``model.forward`` under
``generate()`` and of ``model.generate`` itself; Gemma3's sliding window past a batch-1 prompt.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
from sweep_cpu_models import SIZES, _auto, _decoder, _ids
from sweep_cpu_models_unseen import _built
from workload import Workload

MOE = {"num_experts": 4, "num_experts_per_tok": 2}
SEQ2SEQ = {"vocab_size": 512, "d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}  # fmt: skip


def _named(w: Workload, name: str, description: str = "", **notes) -> Workload:
    w.name = name
    w.description += description
    w.notes.update(notes)
    return w


def _embedded(w: Workload) -> Workload:
    w.notes["modules"] = {"embedding": {"model.embed_tokens"}}
    return w


def _causal(model_type: str, dtype=None, attn: str | None = None, **config):
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **{**SIZES, **config})
    extra = {} if attn is None else {"attn_implementation": attn}
    return transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype, **extra).eval()


def _bf16_odd():
    model = _causal("llama", torch.bfloat16, num_key_value_heads=2)
    kwargs = {"input_ids": _ids(1, 7), "use_cache": False}
    return Workload("hf_llama_bf16_batch1_odd", model, [((), kwargs)], model, "Llama in bfloat16 on the CPU, batch "
                    "1, 7 tokens", notes={"modules": {"embedding": {"model.embed_tokens"}}})  # fmt: skip


def _compiled_root():
    model = _causal("gpt_neox", num_key_value_heads=None, rotary_pct=0.5)
    compiled = torch.compile(model, backend="aot_eager", dynamic=True)
    samples = [((), {"input_ids": _ids(2, n), "use_cache": False}) for n in (9, 13)]
    w = Workload("hf_gpt_neox_compiled_aot_eager_dynamic", compiled, samples, model, "GPT-NeoX (partial rotary), "
                 "torch.compile(model, backend='aot_eager', dynamic=True) at the root, lengths 9 and 13, profiled "
                 "with module=model", notes={"modules": {"torch.compile": {""}}, "calls": {"torch.compile": 2}})
    w.compiled = True
    return w


def _compiled_layers():
    model = _causal("qwen2", num_key_value_heads=2)
    for layer in model.model.layers:
        layer.compile(backend="eager", fullgraph=True)
    kwargs = {"input_ids": _ids(2, 11), "use_cache": False}
    w = Workload("hf_qwen2_layers_compiled_fullgraph", model, [((), kwargs)], model, "Qwen2, every decoder layer "
                 "compiled in place (backend='eager', fullgraph=True), the embedding and head eager")  # fmt: skip
    w.compiled = True
    return w


def _greedy(generate, ids, new: int = 3):
    return generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new, do_sample=False,
                    pad_token_id=0)  # fmt: skip


def _generate_compiled():
    model = _causal("llama", num_key_value_heads=2)
    generate, ids = torch.compile(model.generate, backend="eager"), _ids(1, 5)
    w = Workload("hf_llama_generate_compiled", lambda: _greedy(generate, ids), None, model, "Llama, "
                 "torch.compile(model.generate, "
                 "backend='eager'): generate()'s Python loop traced with its graph breaks")  # fmt: skip
    w.compiled = True
    return w


def _generate_forward_compiled():
    model = _causal("llama", num_key_value_heads=2)
    model.forward = torch.compile(model.forward, backend="eager")
    ids = _ids(1, 5)
    w = Workload("hf_llama_generate_forward_compiled", lambda: _greedy(model.generate, ids), None, model, "Llama "
                 "generate() with model.forward = torch.compile(model.forward, backend='eager'): prefill and steps "
                 "compiled, generate()'s loop eager")  # fmt: skip
    w.compiled = True
    return w


def _compiled_in_place_dynamic():
    model = _causal("phi3", num_key_value_heads=2, pad_token_id=0, eos_token_id=2, bos_token_id=1)
    model.compile(backend="aot_eager", dynamic=True)
    samples = [((), {"input_ids": _ids(1, n), "use_cache": False}) for n in (5, 11, 3)]
    w = Workload("hf_phi3_compiled_in_place_dynamic", model, samples, model, "Phi-3, model.compile(backend="
                 "'aot_eager', dynamic=True) in place, batch 1, lengths 5, 11 and 3")  # fmt: skip
    w.compiled = True
    return w


def _gemma3_sliding_generate():
    model = _causal("gemma3_text", num_key_value_heads=2, head_dim=16, sliding_window=4)
    ids = _ids(1, 7)
    return Workload("hf_gemma3_text_generate_sliding_batch1", lambda: _greedy(model.generate, ids, 5), None, model,
                    "Gemma3 text generate(): sliding and full layers, a 7-token prompt past the 4-token window, "
                    "batch 1")  # fmt: skip


def _whisper_generate():
    import transformers

    cfg = transformers.WhisperConfig(**SEQ2SEQ, num_mel_bins=16, max_source_positions=1500, max_target_positions=64,
                                     pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                                     suppress_tokens=[], begin_suppress_tokens=[])  # fmt: skip
    model = transformers.WhisperForConditionalGeneration(cfg).eval()
    features = torch.randn(1, 16, 3000)

    def run():
        return model.generate(features, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                              decoder_input_ids=torch.tensor([[1]]))  # fmt: skip

    return Workload("hf_whisper_generate", run, None, model, "Whisper generate(): encoder once, decoder with its "
                    "encoder-decoder cache, 4 tokens")  # fmt: skip


def _marian_beam_sample():
    import transformers

    cfg = transformers.MarianConfig(**SEQ2SEQ, max_position_embeddings=64, pad_token_id=0, eos_token_id=2,
                                    decoder_start_token_id=0)  # fmt: skip
    model = transformers.MarianMTModel(cfg).eval()
    ids = _ids(2, 9)

    def run():
        torch.manual_seed(0)
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                              num_beams=2, do_sample=True, top_k=10)  # fmt: skip

    return Workload("hf_marian_beam_sample", run, None, model, "Marian generate(): beam search with sampling "
                    "(num_beams=2, do_sample=True, seeded), sinusoidal positions")  # fmt: skip


def _prophetnet():
    import transformers

    cfg = transformers.ProphetNetConfig(vocab_size=512, hidden_size=64, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                        num_encoder_layers=1, num_decoder_layers=1, num_encoder_attention_heads=4,
                                        num_decoder_attention_heads=4, ngram=2, num_buckets=8,
                                        relative_max_distance=16, max_position_embeddings=64)  # fmt: skip
    kwargs = {"input_ids": _ids(2, 12), "decoder_input_ids": _ids(2, 6), "use_cache": False}
    return _built("hf_prophetnet", cfg, "ProphetNetForConditionalGeneration", kwargs, "ProphetNet: n-gram "
                  "predicting decoder streams with relative buckets")  # fmt: skip


def _esm():
    kwargs = {"input_ids": _ids(2, 15, 33), "attention_mask": torch.ones(2, 15, dtype=torch.long)}
    return _auto("esm", kwargs, "AutoModelForMaskedLM", vocab_size=33, position_embedding_type="rotary",
                 pad_token_id=1, mask_token_id=32, token_dropout=True)  # fmt: skip


def _dbrx():
    return _decoder("dbrx", d_model=64, n_heads=4, n_layers=2, max_seq_len=128, hidden_size=None,
                    intermediate_size=None, num_hidden_layers=None, num_attention_heads=None,
                    max_position_embeddings=None,
                    attn_config={"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0},
                    ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2})  # fmt: skip


def _zamba2():
    return _embedded(_decoder("zamba2", mamba_d_state=8, mamba_headdim=16, n_mamba_heads=8, num_key_value_heads=4,
                              layers_block_type=["mamba", "hybrid"], num_hidden_layers=2, use_mem_rope=True,
                              use_shared_attention_adapter=True, adapter_rank=8, use_mamba_kernels=False))  # fmt: skip


def _falcon_h1():
    return _embedded(_decoder("falcon_h1", num_key_value_heads=2, head_dim=16, mamba_d_state=8, mamba_n_heads=8,
                              mamba_d_head=16, mamba_n_groups=1, mamba_d_ssm=128, mamba_chunk_size=8,
                              use_mamba_kernels=False))  # fmt: skip


def _bamba():
    return _embedded(_decoder("bamba", num_key_value_heads=2, mamba_d_state=8, mamba_n_heads=8, mamba_d_head=16,
                              mamba_n_groups=1, mamba_chunk_size=8, attn_layer_indices=[1], use_mamba_kernels=False))


def _dinov2_registers():
    kwargs = {"pixel_values": torch.randn(2, 3, 32, 32)}
    return _auto("dinov2_with_registers", kwargs, image_size=32, patch_size=8, num_register_tokens=4)


def _depth_anything():
    import transformers

    backbone = {"model_type": "dinov2", "hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 2,
                "intermediate_size": 64, "image_size": 28, "patch_size": 14,
                "out_indices": [1, 2, 3, 4], "reshape_hidden_states": False}  # fmt: skip
    cfg = transformers.DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32,
                                           neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
                                           head_hidden_size=8)  # fmt: skip
    kwargs = {"pixel_values": torch.randn(1, 3, 56, 42)}
    return _built("hf_depth_anything", cfg, "DepthAnythingForDepthEstimation", kwargs, "Depth Anything: DINOv2 "
                  "backbone, DPT reassemble and fusion, depth head; a non-square image")  # fmt: skip


def _pix2struct():
    import transformers

    text = {"vocab_size": 512, "hidden_size": 64, "d_kv": 16, "d_ff": 128, "num_layers": 1, "num_heads": 4}
    vision = {"hidden_size": 64, "patch_embed_hidden_size": 48, "d_kv": 16, "d_ff": 128, "num_hidden_layers": 1,
              "num_attention_heads": 4, "patch_size": 4}  # fmt: skip
    cfg = transformers.Pix2StructConfig(text_config=text, vision_config=vision)
    patches = torch.randn(1, 16, 2 + 3 * 4 * 4)
    patches[0, :, 0], patches[0, :, 1] = torch.arange(16) // 4 + 1, torch.arange(16) % 4 + 1  # row, column ids
    mask = torch.ones(1, 16)
    mask[0, 12:] = 0
    kwargs = {"flattened_patches": patches, "attention_mask": mask, "decoder_input_ids": _ids(1, 5)}
    return _built("hf_pix2struct", cfg, "Pix2StructForConditionalGeneration", kwargs, "Pix2Struct: variable-"
                  "resolution flattened patches with a padding mask, T5-style text decoder")  # fmt: skip


def _dac():
    import transformers

    cfg = transformers.DacConfig(encoder_hidden_size=8, downsampling_ratios=[2, 4], decoder_hidden_size=32,
                                 n_codebooks=3, codebook_size=64, codebook_dim=4, hidden_size=32)  # fmt: skip
    kwargs = {"input_values": torch.randn(1, 1, 400)}
    return _built("hf_dac", cfg, "DacModel", kwargs, "DAC: Snake-activated conv codec, factorised residual VQ")


def _wavlm():
    return _auto("wavlm", {"input_values": torch.randn(1, 3001)}, conv_dim=(32, 32), conv_stride=(5, 4),
                 conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                 num_buckets=16, max_bucket_distance=64)  # fmt: skip


def _mimi():
    import transformers

    cfg = transformers.MimiConfig(hidden_size=32, num_filters=4, upsampling_ratios=[4, 2], upsample_groups=32,
                                  codebook_size=64, codebook_dim=16, vector_quantization_hidden_dimension=16,
                                  num_quantizers=4, num_semantic_quantizers=1, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                                  sliding_window=8, frame_rate=12.5, sampling_rate=800)  # fmt: skip
    kwargs = {"input_values": torch.randn(1, 1, 640)}
    return _built("hf_mimi", cfg, "MimiModel", kwargs, "Mimi: conv codec with transformer layers and a split "
                  "semantic/acoustic residual VQ")  # fmt: skip


def _blip():
    import transformers

    tower = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
    cfg = transformers.BlipConfig(text_config={**tower, "vocab_size": 512},
                                  vision_config={**tower, "image_size": 32, "patch_size": 8},
                                  projection_dim=32)  # fmt: skip
    kwargs = {"input_ids": _ids(2, 9), "pixel_values": torch.randn(2, 3, 32, 32)}
    return _built("hf_blip", cfg, "BlipModel", kwargs, "BLIP: ViT image tower, BERT text tower, contrastive "
                  "logits")  # fmt: skip


UNSEEN9_MODELS = {
    "hf_zamba2": _zamba2,
    "hf_falcon_h1": _falcon_h1,
    "hf_bamba": _bamba,
    "hf_olmoe": lambda: _embedded(_decoder("olmoe", num_key_value_heads=2, **MOE)),
    "hf_granitemoe": lambda: _embedded(_decoder("granitemoe", num_key_value_heads=2, num_local_experts=4,
                                                num_experts_per_tok=2)),
    "hf_dbrx": _dbrx,
    "hf_cohere": lambda: _embedded(_decoder("cohere", num_key_value_heads=2, use_qk_norm=True)),
    "hf_esm": _esm,
    "hf_prophetnet": _prophetnet,
    "hf_dinov2_with_registers": _dinov2_registers,
    "hf_depth_anything": _depth_anything,
    "hf_pix2struct": _pix2struct,
    "hf_dac": _dac,
    "hf_wavlm": _wavlm,
    "hf_mimi": _mimi,
    "hf_blip": _blip,
    "hf_whisper_generate": _whisper_generate,
    "hf_marian_beam_sample": _marian_beam_sample,
    "hf_llama_bf16_batch1_odd": _bf16_odd,
    "hf_gpt_neox_compiled_aot_eager_dynamic": _compiled_root,
    "hf_qwen2_layers_compiled_fullgraph": _compiled_layers,
    "hf_llama_generate_forward_compiled": _generate_forward_compiled,
    "hf_phi3_compiled_in_place_dynamic": _compiled_in_place_dynamic,
    "hf_gemma3_text_generate_sliding_batch1": _gemma3_sliding_generate,
    "hf_llama_generate_compiled": _generate_compiled,
}  # fmt: skip
