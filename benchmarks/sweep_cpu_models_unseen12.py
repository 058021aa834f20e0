"""transformers architectures and usage for cpu_sweep.py that the other sweep files leave out, from tiny configs
(random init, no downloads): DeBERTa-v2's disentangled attention, RoFormer, GPT-BigCode's multi-query attention,
CodeGen, XGLM, Granite, M2M-100, MobileViT, CANINE's character hashing, Nyströmformer, PatchTST on a time series, the
Audio Spectrogram Transformer; and a training step of Llama under gradient checkpointing (transformers' layers tell
their own forward by identity), profiled as a function.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
from sweep_cpu_models import SIZES, _auto, _decoder, _ids, _seq2seq, _vision
from sweep_cpu_models_unseen9 import _named
from workload import Workload

SEQ2SEQ = {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}  # fmt: skip


def _checkpointed_train_step():
    import transformers

    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model("llama", **SIZES))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ids = _ids(2, 8)

    def train_step():
        with torch.enable_grad():
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
        model.zero_grad(set_to_none=True)
        return loss.detach()

    # each decoder layer's MLP runs twice: in the forward and again in the backward's recomputation
    return Workload("hf_llama_checkpointed_train_step", train_step, None, model, "Llama in train mode with "
                    "gradient_checkpointing_enable (non-reentrant): forward, loss and backward profiled as a "
                    "function", notes={"calls": {"silu": 4}})  # fmt: skip


def _deberta():
    w = _auto("deberta-v2", {"input_ids": _ids()}, relative_attention=True, pos_att_type=["p2c", "c2p"],
              position_buckets=8)  # fmt: skip
    return _named(w, "hf_deberta_v2", ": relative positions, disentangled attention (p2c, c2p)")


UNSEEN12_MODELS = {
        "hf_llama_checkpointed_train_step": _checkpointed_train_step,
        "hf_deberta_v2": _deberta,
        "hf_roformer": lambda: _auto("roformer", {"input_ids": _ids()}, embedding_size=64),
        "hf_gpt_bigcode": lambda: _decoder("gpt_bigcode", n_embd=64, n_layer=2, n_head=4, multi_query=True),
        "hf_codegen": lambda: _decoder("codegen", n_embd=64, n_layer=2, n_head=4, rotary_dim=8),
        "hf_xglm": lambda: _decoder("xglm", d_model=64, ffn_dim=128, num_layers=2, attention_heads=4),
        "hf_granite": lambda: _decoder("granite", num_key_value_heads=2),
        "hf_m2m_100": lambda: _seq2seq("m2m_100", **SEQ2SEQ),
        "hf_mobilevit": lambda: _vision("mobilevit", size=64, hidden_sizes=[32, 48, 64],
                                        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]),
        "hf_canine": lambda: _auto("canine", {"input_ids": _ids(2, 32)}, num_hash_buckets=64, downsampling_rate=4),
        "hf_nystromformer": lambda: _auto("nystromformer", {"input_ids": _ids(2, 64)}, num_landmarks=8,
                                          segment_means_seq_len=64),
        "hf_patchtst": lambda: _auto("patchtst", {"past_values": torch.randn(2, 32, 3)}, num_input_channels=3,
                                     context_length=32, patch_length=8, patch_stride=8, d_model=32,
                                     num_attention_heads=4, ffn_dim=64),
        "hf_ast": lambda: _named(_auto("audio-spectrogram-transformer", {"input_values": torch.randn(2, 64, 32)},
                                       max_length=64, num_mel_bins=32, patch_size=16), "hf_ast"),
}  # fmt: skip
