"""Programs for cpu_sweep.py: transformers families no earlier program file built (Helium, GLM-4, OLMo 3, Arcee,
ERNIE 4.5, Seed-OSS, Apertus, BitNet, Qwen3, HunYuan dense, Doge; RoCBert, Data2Vec text, MarkupLM, Splinter;
SwiftFormer, ViT-MSN, I-JEPA, DINOv3, TextNet, ViTDet, PVT; PEGASUS-X, FSMT), from tiny configs (random init, no
downloads). The mechanisms found with them are in sweep_cpu_mechanisms_unseen15.py and
sweep_cpu_mechanisms_unseen15_calls.py.
"""

from __future__ import annotations

import torch
from sweep_cpu_models import _auto, _decoder, _ids, _seq2seq, _vision

KV = {"num_key_value_heads": 2}

UNSEEN15_MODELS = {
    "hf_helium": lambda: _decoder("helium", **KV, head_dim=16),
    "hf_glm4": lambda: _decoder("glm4", **KV, head_dim=16, pad_token_id=0, eos_token_id=1),
    "hf_olmo3": lambda: _decoder("olmo3", **KV, sliding_window=8),
    "hf_arcee": lambda: _decoder("arcee", **KV),
    "hf_ernie4_5": lambda: _decoder("ernie4_5", **KV, head_dim=16),
    "hf_seed_oss": lambda: _decoder("seed_oss", **KV, head_dim=16),
    "hf_apertus": lambda: _decoder("apertus", **KV),
    "hf_bitnet": lambda: _decoder("bitnet", **KV),
    "hf_qwen3": lambda: _decoder("qwen3", **KV, head_dim=16),
    "hf_hunyuan_v1_dense": lambda: _decoder("hunyuan_v1_dense", **KV, head_dim=16),
    "hf_doge": lambda: _decoder("doge", **KV, keep_window_size=8),
    "hf_roc_bert": lambda: _auto("roc_bert", {"input_ids": _ids(), "input_shape_ids": _ids(vocab=32),
                                 "input_pronunciation_ids": _ids(vocab=32)}, shape_vocab_size=32,
                                 pronunciation_vocab_size=32, shape_embed_dim=16, pronunciation_embed_dim=16),
    "hf_data2vec-text": lambda: _auto("data2vec-text"),
    "hf_markuplm": lambda: _auto("markuplm", {"input_ids": _ids(), "xpath_tags_seq": torch.randint(0, 50, (2, 16, 50)),
                                 "xpath_subs_seq": torch.randint(0, 50, (2, 16, 50))}),
    "hf_splinter": lambda: _auto("splinter", {"input_ids": _ids()}, "AutoModelForQuestionAnswering",
                                 question_token_id=5),
    "hf_vitdet": lambda: _vision("vitdet", patch_size=8, pretrain_image_size=32, window_size=2,
                                 window_block_indices=[0], residual_block_indices=[1],
                                 use_relative_position_embeddings=True),
    "hf_pvt": lambda: _vision("pvt", num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1],
                              hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[4, 2], strides=[4, 2],
                              mlp_ratios=[2, 2]),
    "hf_swiftformer": lambda: _vision("swiftformer", depths=[1, 1, 1, 1], embed_dims=[16, 16, 32, 32]),
    "hf_vit_msn": lambda: _vision("vit_msn", patch_size=8),
    "hf_ijepa": lambda: _vision("ijepa", patch_size=8),
    "hf_dinov3_vit": lambda: _vision("dinov3_vit", patch_size=8, hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=2, num_attention_heads=4, num_register_tokens=2),
    "hf_textnet": lambda: _vision("textnet", hidden_sizes=[16, 16, 32, 32, 64], stem_out_channels=16),
    "hf_pegasus_x": lambda: _seq2seq("pegasus_x", d_model=64, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, block_size=8, num_global_tokens=4),
    "hf_fsmt": lambda: _auto("fsmt", {"input_ids": _ids(), "decoder_input_ids": _ids(2, 8)}, "AutoModel",
                             src_vocab_size=512, tgt_vocab_size=512, d_model=64, encoder_layers=1, decoder_layers=1,
                             encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                             decoder_ffn_dim=128, langs=["en", "de"]),
}  # fmt: skip
