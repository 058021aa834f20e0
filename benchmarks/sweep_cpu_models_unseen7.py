"""transformers architectures and ``generate()`` modes for cpu_sweep.py that the other sweep files leave out, from
tiny configs (random init, no downloads; fp32): DeBERTa-v2's disentangled attention, I-BERT in integer mode, Switch
Transformers' routed experts, DeepSeek-V3's latent attention and grouped routing, FNet's
Fourier mixing, LeViT's cached attention biases, Qwen3-Next's gated delta rule, gpt-oss's sinks and experts,
ModernBERT's unpadded alternating attention, Informer's sampled attention (seeded);
``generate()`` with prompt lookup, with penalties and token constraints, from a prefilled prompt cache, from
``inputs_embeds``.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import copy

import torch
from sweep_cpu_models import SIZES, _auto, _decoder, _ids
from workload import Workload

SMALL_MOE = {"num_experts_per_tok": 2, "moe_intermediate_size": 32}


def _renamed(w: Workload, name: str, **notes) -> Workload:
    w.name = name
    w.notes.update(notes)
    return w


def _causal_lm(model_type: str, **config):
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **{**SIZES, **config})
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def _generating(name: str, model, description: str, ids: torch.Tensor | None = None, **kwargs) -> Workload:
    ids = _ids(2, 8) if ids is None else ids

    def generate():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                              do_sample=False, pad_token_id=0, **kwargs)  # fmt: skip

    return Workload(name, generate, None, model, description)


def _prompt_lookup():
    model = _causal_lm("llama", num_key_value_heads=2)
    ids = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 8, 5, 6]])  # a repeating prompt: candidates are found in it
    return _generating("hf_llama_prompt_lookup", model, "Llama generate() with prompt lookup decoding "
                       "(prompt_lookup_num_tokens=3): candidates from n-grams of the prompt, verified in one forward",
                       ids=ids, prompt_lookup_num_tokens=3)  # fmt: skip


def _penalties():
    model = _causal_lm("gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=64)
    return _generating("hf_gpt2_generate_constraints", model, "GPT-2 generate() with repetition_penalty, "
                       "no_repeat_ngram_size, bad_words_ids, sequence_bias and prefix_allowed_tokens_fn",
                       repetition_penalty=1.3, no_repeat_ngram_size=2, bad_words_ids=[[7], [8, 9]],
                       sequence_bias={(10,): -5.0, (11, 12): 2.0},
                       prefix_allowed_tokens_fn=lambda batch, sent: list(range(3, 300)))  # fmt: skip


def _prefix_cache():
    import transformers

    model = _causal_lm("llama", num_key_value_heads=2)
    prefix = _ids(1, 6)
    with torch.no_grad():
        prompt_cache = model(prefix, past_key_values=transformers.DynamicCache(config=model.config)).past_key_values
    ids = torch.cat([prefix, _ids(1, 3)], dim=1)

    def generate():
        cache = copy.deepcopy(prompt_cache)  # a prefilled prompt cache, copied for every request
        return model.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache, max_new_tokens=4,
                              min_new_tokens=4, do_sample=False, pad_token_id=0)  # fmt: skip

    return Workload("hf_llama_prefix_cache", generate, None, model, "Llama generate() continuing a prefilled "
                    "DynamicCache deep-copied for every call (only the prompt's new tokens prefilled)")  # fmt: skip


def _inputs_embeds():
    model = _causal_lm("llama", num_key_value_heads=2)
    ids = _ids(2, 8)

    def generate():
        embeds = model.get_input_embeddings()(ids) * 1.0
        return model.generate(inputs_embeds=embeds, attention_mask=torch.ones_like(ids), max_new_tokens=4,
                              min_new_tokens=4, do_sample=False, pad_token_id=0)  # fmt: skip

    return Workload("hf_llama_generate_inputs_embeds", generate, None, model, "Llama generate() from inputs_embeds "
                    "made by the caller with the model's embedding", notes={"calls": {"embedding": 4}})  # fmt: skip


def _informer():
    import transformers

    cfg = transformers.InformerConfig(prediction_length=4, context_length=8, input_size=1, lags_sequence=[1, 2],
                                      num_time_features=1, d_model=16, encoder_layers=2, decoder_layers=1,
                                      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                      decoder_ffn_dim=32, attention_type="prob", sampling_factor=2, dropout=0.0,
                                      encoder_layerdrop=0.0, decoder_layerdrop=0.0)  # fmt: skip
    model = transformers.InformerModel(cfg).eval()
    length = cfg.context_length + max(cfg.lags_sequence)
    kwargs = {"past_values": torch.randn(2, length), "past_time_features": torch.randn(2, length, 1),
              "past_observed_mask": torch.ones(2, length), "future_values": torch.randn(2, 4),
              "future_time_features": torch.randn(2, 4, 1)}  # fmt: skip

    def seeded(**inputs):  # ProbSparse attention samples its keys with torch.randint: seeded per call
        torch.manual_seed(0)
        return model(**inputs)

    return Workload("hf_informer", seeded, [((), kwargs)], model, "Informer: ProbSparse attention sampling keys with "
                    "torch.randint (seeded), distilling convolutions, mean scaling")  # fmt: skip


def _levit():
    w = _auto("levit", {"pixel_values": torch.randn(2, 3, 64, 64)}, "AutoModel", image_size=64, hidden_sizes=[32, 48],
              num_attention_heads=[2, 2], depths=[1, 1], key_dim=[8, 8], drop_path_rate=0, mlp_ratio=[2, 2],
              attention_ratio=[2, 2], down_ops=[["Subsample", 8, 2, 2, 2, 2]], num_hidden_layers=None,
              hidden_size=None, intermediate_size=None, vocab_size=None, max_position_embeddings=None)  # fmt: skip
    w.description = "LeViT: attention biases gathered by index and cached per device in eval mode"
    return w


UNSEEN7_MODELS = {
    "hf_deberta-v2_buckets": lambda: _renamed(_auto("deberta-v2", relative_attention=True, pos_att_type=["p2c", "c2p"],
                                                    position_buckets=16, max_relative_positions=32, type_vocab_size=0),
                                              "hf_deberta-v2_buckets"),
    "hf_ibert_quant": lambda: _renamed(_auto("ibert", quant_mode=True), "hf_ibert_quant"),
    "hf_switch_transformers": lambda: _auto(
        "switch_transformers", {"input_ids": _ids(), "decoder_input_ids": _ids(2, 8)}, "AutoModelForSeq2SeqLM",
        d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2, num_decoder_layers=2, num_sparse_encoder_layers=1,
        num_sparse_decoder_layers=1, num_experts=4, expert_capacity=4, hidden_size=None, intermediate_size=None,
        num_hidden_layers=None, num_attention_heads=None, max_position_embeddings=None),
    "hf_deepseek_v3": lambda: _decoder("deepseek_v3", num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1,
                                       kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8,
                                       v_head_dim=16, first_k_dense_replace=1, n_group=2, topk_group=1,
                                       rope_interleave=True, **SMALL_MOE),
    "hf_fnet": lambda: _auto("fnet", {"input_ids": _ids()}, num_attention_heads=None,
                             use_tpu_fourier_optimizations=False),
    "hf_levit": _levit,
    "hf_qwen3_next": lambda: _decoder("qwen3_next", num_key_value_heads=2, head_dim=16, linear_key_head_dim=16,
                                      linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                                      num_experts=4, shared_expert_intermediate_size=32,
                                      layer_types=["linear_attention", "full_attention"], **SMALL_MOE),
    "hf_gpt_oss": lambda: _decoder("gpt_oss", num_key_value_heads=2, head_dim=16, num_local_experts=4,
                                   num_experts_per_tok=2, sliding_window=8, intermediate_size=64,
                                   layer_types=["sliding_attention", "full_attention"]),
    "hf_modernbert": lambda: _auto("modernbert", {"input_ids": _ids(), "attention_mask": torch.tensor(
        [[1] * 16, [1] * 10 + [0] * 6])}, global_attn_every_n_layers=2, local_attention=8, pad_token_id=0,
                                      bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2),
    "hf_informer": _informer,
    "hf_llama_prompt_lookup": _prompt_lookup,
    "hf_gpt2_generate_constraints": _penalties,
    "hf_llama_prefix_cache": _prefix_cache,
    "hf_llama_generate_inputs_embeds": _inputs_embeds,
}  # fmt: skip
