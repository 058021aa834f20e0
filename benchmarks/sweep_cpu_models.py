"""transformers architectures for cpu_sweep.py, built from tiny configs (random init, no downloads), fp32 on the
CPU: encoders, decoders, encoder-decoders, vision, audio, multimodal, mixtures of experts, state-space models on
their slow path, ``generate()`` with the dynamic, static and sliding-window caches, eager and SDPA attention."""

from __future__ import annotations

import torch
from workload import Workload

SIZES = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "max_position_embeddings": 128}  # fmt: skip


def _ids(batch: int = 2, seq: int = 16, vocab: int = 512) -> torch.Tensor:
    return torch.randint(3, vocab, (batch, seq))


def _auto(model_type: str, kwargs=None, auto: str = "AutoModel", attn: str | None = None, **config) -> Workload:
    import transformers

    sizes = {key: value for key, value in {**SIZES, **config}.items() if value is not None}
    cfg = transformers.AutoConfig.for_model(model_type, **sizes)
    extra = {} if attn is None else {"attn_implementation": attn}
    model = getattr(transformers, auto).from_config(cfg, **extra).eval()
    kwargs = {"input_ids": _ids()} if kwargs is None else kwargs
    name = f"hf_{model_type}" + (f"_{attn}" if attn else "")
    return Workload(name, model, [((), kwargs)], model, f"transformers {model_type} ({auto}), tiny config")


def _decoder(model_type: str, attn: str | None = None, **config) -> Workload:
    return _auto(model_type, {"input_ids": _ids(), "use_cache": False}, "AutoModelForCausalLM", attn, **config)


def _generate(name: str, model_type: str, cache: str | None, new: int = 4, **config) -> Workload:
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **{**SIZES, **config})
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = _ids(2, 8)
    extra = {} if cache is None else {"cache_implementation": cache}

    def generate():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                              do_sample=False, pad_token_id=0, **extra)  # fmt: skip

    return Workload(name, generate, None, model, f"{model_type} generate(), cache {cache or 'dynamic'}")


def _vision(model_type: str, auto: str = "AutoModel", size: int = 32, channels: int = 3, **config) -> Workload:
    kwargs = {"pixel_values": torch.randn(2, channels, size, size)}
    return _auto(model_type, kwargs, auto, image_size=size, **config)


def _seq2seq(model_type: str, **config) -> Workload:
    kwargs = {"input_ids": _ids(), "decoder_input_ids": _ids(2, 8), "use_cache": False}
    return _auto(model_type, kwargs, "AutoModelForSeq2SeqLM", **config)


def _whisper() -> Workload:
    kwargs = {"input_features": torch.randn(1, 16, 3000), "decoder_input_ids": _ids(1, 4)}
    return _auto("whisper", kwargs, "AutoModel", num_mel_bins=16, d_model=64, encoder_layers=1, decoder_layers=1,
                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                 max_source_positions=1500, max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 decoder_start_token_id=1)  # fmt: skip


def _audio(model_type: str, **config) -> Workload:
    kwargs = {"input_values": torch.randn(2, 4000)}
    return _auto(model_type, kwargs, "AutoModel", conv_dim=(32, 32), conv_stride=(5, 4), conv_kernel=(10, 4),
                 num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **config)  # fmt: skip


def _clip(model_type: str) -> Workload:
    import transformers

    tower = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
    cfg = transformers.AutoConfig.for_model(model_type, text_config={**tower, "vocab_size": 512},
                                            vision_config={**tower, "image_size": 32, "patch_size": 8})  # fmt: skip
    model = transformers.AutoModel.from_config(cfg).eval()
    kwargs = {"input_ids": _ids(2, 8), "pixel_values": torch.randn(2, 3, 32, 32)}
    return Workload(f"hf_{model_type}", model, [((), kwargs)], model, f"{model_type} text and vision towers")


MOE = {"num_local_experts": 4, "num_experts_per_tok": 2}
MODELS = {
    "hf_bert": lambda: _auto("bert"),
    "hf_bert_eager": lambda: _auto("bert", attn="eager"),
    "hf_roberta": lambda: _auto("roberta"),
    "hf_albert": lambda: _auto("albert", embedding_size=32),
    "hf_distilbert": lambda: _auto("distilbert", dim=64, hidden_dim=128, n_layers=2, n_heads=4),
    "hf_electra": lambda: _auto("electra", embedding_size=32),
    "hf_deberta-v2": lambda: _auto("deberta-v2", relative_attention=True, pos_att_type=["p2c", "c2p"]),
    "hf_mobilebert": lambda: _auto("mobilebert", embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32),
    "hf_xlnet": lambda: _auto("xlnet", max_position_embeddings=None, d_model=64, n_layer=2, n_head=4, d_inner=128),
    "hf_gpt2": lambda: _decoder("gpt2", n_embd=64, n_layer=2, n_head=4),
    "hf_gpt_neo": lambda: _decoder("gpt_neo", num_layers=2, attention_types=[[["global", "local"], 1]], num_heads=4),
    "hf_gptj": lambda: _decoder("gptj", n_embd=64, n_layer=2, n_head=4, rotary_dim=8),
    "hf_llama": lambda: _decoder("llama", num_key_value_heads=2),
    "hf_llama_eager": lambda: _decoder("llama", attn="eager", num_key_value_heads=2),
    "hf_mistral": lambda: _decoder("mistral", num_key_value_heads=2, sliding_window=8),
    "hf_mixtral": lambda: _decoder("mixtral", num_key_value_heads=2, **MOE),
    "hf_qwen2": lambda: _decoder("qwen2", num_key_value_heads=2),
    "hf_qwen3_moe": lambda: _decoder("qwen3_moe", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                     moe_intermediate_size=32),
    "hf_phi3": lambda: _decoder("phi3", num_key_value_heads=2, pad_token_id=0, eos_token_id=2, bos_token_id=1),
    "hf_gemma": lambda: _decoder("gemma", num_key_value_heads=2, head_dim=16),
    "hf_gemma2": lambda: _decoder("gemma2", num_key_value_heads=2, head_dim=16, sliding_window=8),
    "hf_gemma3_text": lambda: _decoder("gemma3_text", num_key_value_heads=2, head_dim=16, sliding_window=8),
    "hf_falcon": lambda: _decoder("falcon"),
    "hf_bloom": lambda: _decoder("bloom", n_head=4),
    "hf_opt": lambda: _decoder("opt", ffn_dim=128, word_embed_proj_dim=64),
    "hf_mpt": lambda: _decoder("mpt", d_model=64, n_heads=4, n_layers=2),
    "hf_olmo": lambda: _decoder("olmo", num_key_value_heads=2),
    "hf_starcoder2": lambda: _decoder("starcoder2", num_key_value_heads=2),
    "hf_mamba": lambda: _decoder("mamba", state_size=8),
    "hf_mamba2": lambda: _decoder("mamba2", num_heads=8, head_dim=16, state_size=8, n_groups=1, expand=2),
    "hf_falcon_mamba": lambda: _decoder("falcon_mamba", state_size=8),
    "hf_jamba": lambda: _decoder("jamba", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                 attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                                 expert_layer_offset=1, mamba_d_state=8, use_mamba_kernels=False),
    "hf_rwkv": lambda: _decoder("rwkv", attention_hidden_size=64, num_hidden_layers=2),
    "hf_recurrent_gemma": lambda: _decoder("recurrent_gemma", num_key_value_heads=1, lru_width=64,
                                           attention_window_size=8, block_types=["recurrent", "attention"]),
    "hf_t5": lambda: _seq2seq("t5", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4),
    "hf_bart": lambda: _seq2seq("bart", d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
    "hf_pegasus": lambda: _seq2seq("pegasus", d_model=64, encoder_layers=1, decoder_layers=1,
                                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                   decoder_ffn_dim=128),
    "hf_whisper": _whisper,
    "hf_wav2vec2": lambda: _audio("wav2vec2"),
    "hf_hubert": lambda: _audio("hubert"),
    "hf_vit": lambda: _vision("vit", patch_size=8),
    "hf_deit": lambda: _vision("deit", patch_size=8),
    "hf_beit": lambda: _vision("beit", patch_size=8),
    "hf_dinov2": lambda: _vision("dinov2", patch_size=8),
    "hf_swin": lambda: _vision("swin", num_attention_heads=None, num_hidden_layers=None, patch_size=4, embed_dim=16,
                               depths=[1, 1], num_heads=[2, 2], window_size=4),
    "hf_convnext": lambda: _vision("convnext", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
    "hf_resnet": lambda: _vision("resnet", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1]),
    "hf_segformer": lambda: _vision("segformer", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                    hidden_sizes=[16, 32], num_attention_heads=[1, 2], decoder_hidden_size=32,
                                    patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]),
    "hf_clip": lambda: _clip("clip"),
    "hf_siglip": lambda: _clip("siglip"),
    "hf_llama_generate": lambda: _generate("hf_llama_generate", "llama", None, num_key_value_heads=2),
    "hf_llama_generate_static": lambda: _generate("hf_llama_generate_static", "llama", "static",
                                                  num_key_value_heads=2),
    "hf_mistral_generate_sliding": lambda: _generate("hf_mistral_generate_sliding", "mistral", None, new=8,
                                                     num_key_value_heads=2, sliding_window=4),
    "hf_gemma2_generate_hybrid": lambda: _generate("hf_gemma2_generate_hybrid", "gemma2", None, new=6,
                                                   num_key_value_heads=2, head_dim=16, sliding_window=4),
    "hf_gpt2_generate": lambda: _generate("hf_gpt2_generate", "gpt2", None, n_embd=64, n_layer=2, n_head=4),
    "hf_mamba_generate": lambda: _generate("hf_mamba_generate", "mamba", None, state_size=8),
}  # fmt: skip
