"""transformers architectures, ``generate()`` modes and pipelines for cpu_sweep.py that the other sweep files leave
out, from tiny configs and tokenizers built here (random init, no downloads; fp32): differential attention
(DiffLlama), GPT-NeoX's parallel residual, Persimmon's query-key norms, Nemotron's squared ReLU, Cohere2's
interleaved sliding windows, OLMo2, DeepSeek-V2's latent attention with routed experts, MiniMax's lightning
attention, LFM2's short convolutions, BioGPT, CTRL, OpenAI GPT, JetMoE's mixture of attention heads, PhiMoE,
Granite MoE hybrid, Zamba, Nemotron-H, EXAONE 4, SmolLM3's layers without positions, VaultGemma, Gemma 3n's AltUp and
per-layer embeddings, xLSTM; XLM, MRA, RemBERT, Megatron-BERT, DeBERTa (v1); ConvNeXt V2, RegNet, BiT's standardized
convolutions, PoolFormer, MobileNet V2, FocalNet, PVT v2, Hiera, ViT-MAE's seeded masking, YOLOS; UniSpeech,
Data2Vec audio, SEW, Speech2Text, Moonshine; mBART, Blenderbot, PLBart, mT5, T5Gemma; Autoformer's autocorrelation,
PatchTSMixer, TimesFM; ViLT, ALIGN, OWL-ViT; ``generate()`` with classifier-free guidance (an unbatched forward run
from a logits processor), watermarking, sampling tails, early-exit self-speculation, beam search from precomputed
encoder outputs; question answering, zero-shot and audio-classification pipelines.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
from sweep_cpu_models import _auto, _decoder, _ids, _seq2seq, _vision
from sweep_cpu_models_unseen7 import _causal_lm, _generating
from sweep_cpu_models_unseen8 import SENTENCES, _model, _pipeline
from workload import Workload

SEQ2SEQ = {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}  # fmt: skip
KV = {"num_key_value_heads": 2}
TOWER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}


def _seeded(w: Workload, description: str) -> Workload:
    """A model that draws random numbers in every call (masking, noise): seeded per call."""
    fn = w.fn

    def seeded(*args, **kwargs):
        torch.manual_seed(0)
        return fn(*args, **kwargs)

    w.fn, w.description = seeded, w.description + description
    return w


def _audio(model_type: str, auto: str = "AutoModel", **config) -> Workload:
    return _auto(model_type, {"input_values": torch.randn(2, 4000)}, auto, conv_dim=(32, 32), conv_stride=(5, 4),
                 conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                 **config)  # fmt: skip


def _dual(model_type: str, kwargs: dict, text: dict, vision: dict, **config) -> Workload:
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, text_config=text, vision_config=vision, **config)
    model = transformers.AutoModel.from_config(cfg).eval()
    return Workload(f"hf_{model_type}", model, [((), kwargs)], model, f"{model_type}: text and vision towers")


def _speech2text() -> Workload:
    kwargs = {"input_features": torch.randn(2, 64, 16), "decoder_input_ids": _ids(2, 4)}
    return _auto("speech_to_text", kwargs, input_feat_per_channel=16, input_channels=1, num_conv_layers=2,
                 conv_channels=32, max_source_positions=64, max_target_positions=32, **SEQ2SEQ)  # fmt: skip


def _moonshine() -> Workload:
    kwargs = {"input_values": torch.randn(2, 4000), "decoder_input_ids": _ids(2, 4)}
    return _auto("moonshine", kwargs, num_key_value_heads=2, encoder_num_hidden_layers=1,
                 decoder_num_hidden_layers=1, encoder_num_attention_heads=4, decoder_num_attention_heads=4)  # fmt: skip


def _time_series(model_type: str, auto: str = "AutoModel", **config) -> Workload:
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **config)
    model = getattr(transformers, auto).from_config(cfg).eval()
    return model


def _autoformer() -> Workload:
    model = _time_series("autoformer", prediction_length=4, context_length=16, lags_sequence=[1, 2], d_model=32,
                         encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                         encoder_ffn_dim=32, decoder_ffn_dim=32, num_time_features=1, moving_average=5)  # fmt: skip
    past = 16 + 2
    kwargs = {"past_values": torch.randn(2, past), "past_time_features": torch.randn(2, past, 1),
              "past_observed_mask": torch.ones(2, past), "future_values": torch.randn(2, 4),
              "future_time_features": torch.randn(2, 4, 1)}  # fmt: skip
    return Workload("hf_autoformer", model, [((), kwargs)], model, "Autoformer: series decomposition and "
                    "autocorrelation through torch.fft (rfft, irfft) and top-k delays")  # fmt: skip


def _patchtsmixer() -> Workload:
    model = _time_series("patchtsmixer", context_length=32, patch_length=8, patch_stride=8, num_input_channels=3,
                         d_model=16, num_layers=2, mode="mix_channel", gated_attn=True)  # fmt: skip
    kwargs = {"past_values": torch.randn(2, 32, 3)}
    return Workload("hf_patchtsmixer", model, [((), kwargs)], model, "PatchTSMixer: MLP mixing across patches and "
                    "channels with gated attention")  # fmt: skip


def _timesfm() -> Workload:
    model = _time_series("timesfm", patch_length=8, context_length=32, horizon_length=8, hidden_size=32,
                         intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, head_dim=16)  # fmt: skip
    padding = torch.zeros(2, 32, dtype=torch.long)
    padding[1, :8] = 1  # the second series is 8 steps shorter
    kwargs = {"past_values": torch.randn(2, 32), "past_values_padding": padding, "freq": torch.tensor([[0], [1]])}
    return Workload("hf_timesfm", model, [((), kwargs)], model, "TimesFM: a padded batch of series, normalized per "
                    "patch inside the model, a frequency embedding per series")  # fmt: skip


def _generate_guidance() -> Workload:
    model = _causal_lm("llama", **KV)
    return _generating("hf_llama_generate_guidance", model, "Llama generate() with guidance_scale and a negative "
                       "prompt: the logits processor runs the model again, unbatched, with its own cache",
                       guidance_scale=1.5, negative_prompt_ids=_ids(2, 3))  # fmt: skip


def _generate_watermark() -> Workload:
    import transformers

    model = _causal_lm("llama", **KV)
    config = transformers.WatermarkingConfig(bias=2.5, seeding_scheme="selfhash")
    return _generating("hf_llama_generate_watermark", model, "Llama generate() with a WatermarkingConfig "
                       "(greenlists seeded by a torch.Generator from the previous token)",
                       watermarking_config=config)  # fmt: skip


def _generate_tails() -> Workload:
    model = _causal_lm("gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=64)
    ids = _ids(2, 8)

    def generate():
        torch.manual_seed(0)
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                              do_sample=True, min_p=0.05, typical_p=0.9, epsilon_cutoff=3e-4, eta_cutoff=1e-3,
                              renormalize_logits=True, num_return_sequences=2, pad_token_id=0)  # fmt: skip

    return Workload("hf_gpt2_generate_sampling_tails", generate, None, model, "GPT-2 generate(), seeded sampling "
                    "with min_p, typical_p, epsilon and eta cutoffs, renormalized logits, two sequences per "
                    "prompt")  # fmt: skip


def _generate_early_exit() -> Workload:
    model = _causal_lm("llama", **{**KV, "num_hidden_layers": 3})
    return _generating("hf_llama_generate_early_exit", model, "Llama generate() with assistant_early_exit=1: the "
                       "model's first layer and its head draft tokens, the whole model verifies them",
                       ids=_ids(1, 8), assistant_early_exit=1)  # fmt: skip


def _generate_encoder_outputs() -> Workload:
    import transformers

    cfg = transformers.AutoConfig.for_model("t5", vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                            num_heads=4, decoder_start_token_id=0, pad_token_id=0,
                                            eos_token_id=1)  # fmt: skip
    model = transformers.AutoModelForSeq2SeqLM.from_config(cfg).eval()
    ids = _ids(2, 8)

    def generate():
        encoded = model.get_encoder()(input_ids=ids)
        return model.generate(encoder_outputs=encoded, attention_mask=torch.ones_like(ids), max_new_tokens=4,
                              min_new_tokens=4, num_beams=3, length_penalty=0.6, num_return_sequences=2,
                              early_stopping=False, output_scores=True, return_dict_in_generate=True)  # fmt: skip

    return Workload("hf_t5_generate_encoder_outputs", generate, None, model, "T5: the encoder run by the caller, "
                    "generate() given its encoder_outputs, beam search with a length penalty, two sequences, "
                    "scores in a returned dict")  # fmt: skip


def _audio_pipeline(name: str, task: str, model, description: str, call: dict, **parts) -> Workload:
    """A pipeline of a tiny Wav2Vec2 model with a feature extractor built here, run on two NumPy waveforms."""
    import numpy as np
    import transformers

    extractor = transformers.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True)
    pipe = transformers.pipeline(task, model=model, feature_extractor=extractor, device="cpu", **parts)
    waves = [np.random.default_rng(seed).standard_normal(4000).astype(np.float32) for seed in range(2)]

    def run():
        return pipe(waves, **call)

    return Workload(name, run, None, model, f"transformers pipeline('{task}') of a tiny Wav2Vec2 {description}, two "
                    "NumPy waveforms, profiled with module=pipeline.model")  # fmt: skip


def _speech_recognition() -> Workload:
    import json
    import tempfile
    from pathlib import Path

    import transformers

    letters = ["<pad>", "<s>", "</s>", "<unk>", "|", *"abcdefghijklmnopqrstuvwxyz"]
    vocab = Path(tempfile.mkdtemp()) / "vocab.json"
    vocab.write_text(json.dumps({letter: i for i, letter in enumerate(letters)}))
    tokenizer = transformers.Wav2Vec2CTCTokenizer(str(vocab), word_delimiter_token="|")
    model = _audio("wav2vec2", auto="AutoModelForCTC", vocab_size=len(letters), pad_token_id=0).module
    return _audio_pipeline("hf_pipeline_speech_recognition", "automatic-speech-recognition", model, "CTC model with "
                           "a character tokenizer, in one batch", {"batch_size": 2}, tokenizer=tokenizer)  # fmt: skip


def _audio_classification() -> Workload:
    model = _audio("wav2vec2", auto="AutoModelForAudioClassification", num_labels=3).module
    return _audio_pipeline("hf_pipeline_audio_classification", "audio-classification", model, "classifier, top_k=2",
                           {"top_k": 2})  # fmt: skip


def _zero_shot() -> Workload:
    model = _model("AutoModelForSequenceClassification", num_labels=3,
                   label2id={"entailment": 0, "neutral": 1, "contradiction": 2},
                   id2label={0: "entailment", 1: "neutral", 2: "contradiction"})  # fmt: skip
    return _pipeline("hf_pipeline_zero_shot", "zero-shot-classification", model, SENTENCES, "BERT NLI classifier, "
                     "three candidate labels per sentence (one batch of pairs each), multi_label=True",
                     candidate_labels=["cat", "dog", "fox"], multi_label=True)  # fmt: skip


def _vit_mae() -> Workload:
    w = _vision("vit_mae", patch_size=8, mask_ratio=0.5)
    return _seeded(w, ": random patch masking (torch.rand + argsort), seeded per call")


UNSEEN14_MODELS = {
    "hf_diffllama": lambda: _decoder("diffllama", **KV),
    "hf_gpt_neox": lambda: _decoder("gpt_neox", rotary_pct=0.5, use_parallel_residual=True),
    "hf_persimmon": lambda: _decoder("persimmon", qk_layernorm=True),
    "hf_nemotron": lambda: _decoder("nemotron", **KV),
    "hf_cohere2": lambda: _decoder("cohere2", **KV, sliding_window=8, layer_types=["sliding_attention",
                                   "full_attention"]),
    "hf_olmo2": lambda: _decoder("olmo2", **KV),
    "hf_deepseek_v2": lambda: _decoder("deepseek_v2", **KV, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
                                       qk_nope_head_dim=8, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                                       moe_intermediate_size=32, first_k_dense_replace=1, n_shared_experts=1),
    "hf_minimax": lambda: _decoder("minimax", **KV, num_local_experts=4, num_experts_per_tok=2,
                                   layer_types=["linear_attention", "full_attention"], block_size=8),
    "hf_lfm2": lambda: _decoder("lfm2", **KV, layer_types=["conv", "full_attention"], conv_L_cache=3),
    "hf_biogpt": lambda: _decoder("biogpt"),
    "hf_ctrl": lambda: _decoder("ctrl", n_embd=64, n_layer=2, n_head=4, dff=128),
    "hf_openai_gpt": lambda: _decoder("openai-gpt", n_embd=64, n_layer=2, n_head=4),
    "hf_jetmoe": lambda: _decoder("jetmoe", num_local_experts=4, num_experts_per_tok=2, kv_channels=16),
    "hf_phimoe": lambda: _decoder("phimoe", **KV, num_local_experts=4, num_experts_per_tok=2),
    "hf_granitemoehybrid": lambda: _decoder("granitemoehybrid", **KV, num_local_experts=4, num_experts_per_tok=2,
                                            layer_types=["mamba", "attention"], mamba_d_state=8, mamba_n_heads=8,
                                            mamba_d_head=16, mamba_n_groups=1),
    "hf_zamba": lambda: _decoder("zamba", **KV, num_hidden_layers=4, mamba_d_state=8,
                                 layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
                                 n_mamba_heads=2),
    "hf_nemotron_h": lambda: _decoder("nemotron_h", **KV, hybrid_override_pattern="M*", ssm_state_size=8,
                                      mamba_num_heads=8, mamba_head_dim=16, n_groups=1, use_mamba_kernels=False),
    "hf_exaone4": lambda: _decoder("exaone4", **KV, sliding_window=8),
    "hf_smollm3": lambda: _decoder("smollm3", **KV, no_rope_layer_interval=2, pad_token_id=0, bos_token_id=1,
                                      eos_token_id=2),
    "hf_vaultgemma": lambda: _decoder("vaultgemma", **KV, head_dim=16),
    "hf_gemma3n_text": lambda: _decoder("gemma3n_text", **KV, head_dim=16, sliding_window=8, laurel_rank=8,
                                        hidden_size_per_layer_input=16, vocab_size_per_layer_input=512,
                                        altup_num_inputs=2, num_kv_shared_layers=0,
                                        activation_sparsity_pattern=[0.95, 0.0], layer_types=["sliding_attention",
                                        "full_attention"], intermediate_size=[128, 128]),
    "hf_xlstm": lambda: _decoder("xlstm", embedding_dim=64, num_blocks=2, num_heads=4, mode="inference"),
    "hf_xlm": lambda: _auto("xlm", emb_dim=64, n_layers=2, n_heads=4),
    "hf_mra": lambda: _auto("mra", {"input_ids": _ids(2, 64)}, block_per_row=2, approx_mode="full"),
    "hf_rembert": lambda: _auto("rembert", input_embedding_size=32, output_embedding_size=32),
    "hf_megatron_bert": lambda: _auto("megatron-bert"),
    "hf_deberta": lambda: _auto("deberta", relative_attention=True, pos_att_type=["p2c", "c2p"]),
    "hf_convnextv2": lambda: _vision("convnextv2", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
    "hf_mobilenet_v1": lambda: _vision("mobilenet_v1", depth_multiplier=0.25),
    "hf_poolformer": lambda: _vision("poolformer", hidden_sizes=[16, 32], depths=[1, 1], num_encoder_blocks=2,
                                     patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1]),
    "hf_mobilenet_v2": lambda: _vision("mobilenet_v2", depth_multiplier=0.35),
    "hf_focalnet": lambda: _vision("focalnet", embed_dim=16, depths=[1, 1], focal_levels=[2, 2],
                                   focal_windows=[3, 3], patch_size=4),
    "hf_pvt_v2": lambda: _vision("pvt_v2", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                 hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3],
                                 strides=[4, 2], mlp_ratios=[2, 2]),
    "hf_hiera": lambda: _auto("hiera", {"pixel_values": torch.randn(2, 3, 64, 64)}, image_size=[64, 64],
                              embed_dim=16, depths=[1, 1], num_heads=[1, 2], query_stride=[2, 2],
                              masked_unit_size=[4, 4], patch_stride=[4, 4], num_query_pool=1),
    "hf_vit_mae": _vit_mae,
    "hf_yolos": lambda: _auto("yolos", {"pixel_values": torch.randn(2, 3, 32, 32)}, "AutoModelForObjectDetection",
                              image_size=[32, 32], patch_size=8, num_detection_tokens=4),
    "hf_unispeech": lambda: _audio("unispeech"),
    "hf_data2vec_audio": lambda: _audio("data2vec-audio"),
    "hf_sew": lambda: _audio("sew", squeeze_factor=2),
    "hf_speech_to_text": _speech2text,
    "hf_moonshine": _moonshine,
    "hf_mbart": lambda: _seq2seq("mbart", **SEQ2SEQ),
    "hf_blenderbot": lambda: _seq2seq("blenderbot", **SEQ2SEQ),
    "hf_plbart": lambda: _seq2seq("plbart", **SEQ2SEQ),
    "hf_mt5": lambda: _seq2seq("mt5", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4),
    "hf_autoformer": _autoformer,
    "hf_patchtsmixer": _patchtsmixer,
    "hf_timesfm": _timesfm,
    "hf_vilt": lambda: _seeded(_auto("vilt", {"input_ids": _ids(2, 8), "pixel_values": torch.randn(2, 3, 32, 32)},
                                     image_size=32, patch_size=8), ": image patches sampled by torch.multinomial, "
                               "seeded per call"),
    "hf_chinese_clip": lambda: _dual("chinese_clip", {"input_ids": _ids(2, 8), "pixel_values": torch.randn(2, 3, 32,
                                     32)}, {**TOWER, "vocab_size": 512}, {**TOWER, "image_size": 32, "patch_size": 8}),
    "hf_owlvit": lambda: _dual("owlvit", {"input_ids": _ids(2, 8), "pixel_values": torch.randn(2, 3, 32, 32)},
                               {**TOWER, "vocab_size": 512}, {**TOWER, "image_size": 32, "patch_size": 8}),
    "hf_llama_generate_guidance": _generate_guidance,
    "hf_llama_generate_watermark": _generate_watermark,
    "hf_gpt2_generate_sampling_tails": _generate_tails,
    "hf_llama_generate_early_exit": _generate_early_exit,
    "hf_t5_generate_encoder_outputs": _generate_encoder_outputs,
    "hf_pipeline_speech_recognition": _speech_recognition,
    "hf_pipeline_zero_shot": _zero_shot,
    "hf_pipeline_audio_classification": _audio_classification,
}  # fmt: skip
