"""transformers architectures and ``generate()`` modes for cpu_sweep.py that sweep_cpu_models.py leaves out, from
tiny configs (random init, no downloads; fp32): long-sequence attention (LongT5, Reformer's LSH, Funnel, LED,
BigBird's block-sparse, Longformer), Perceiver, Wav2Vec2-Conformer, SAM, DETR and Conditional DETR on a ResNet
backbone, SpeechT5, EnCodec, Mask2Former, Llava; beam search, assisted decoding and a compiled static cache."""

from __future__ import annotations

import torch
from sweep_cpu_models import SIZES, _auto, _ids, _seq2seq
from workload import Workload


def _generate_with(
    name: str, model_type: str, description: str, assistant: bool = False, compiled: bool = False, **kwargs
) -> Workload:
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **{**SIZES, "num_key_value_heads": 2})
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    extra = dict(kwargs)
    if compiled:  # generate() compiles the static cache's forward on the GPU only, unless told to on every device
        extra["compile_config"] = transformers.CompileConfig(mode="default")
        extra["compile_config"]._compile_all_devices = True
    if assistant:
        small = transformers.AutoConfig.for_model(model_type, **{**SIZES, "num_key_value_heads": 2,
                                                                 "num_hidden_layers": 1})  # fmt: skip
        extra["assistant_model"] = transformers.AutoModelForCausalLM.from_config(small).eval()
    ids = _ids(1 if assistant else 2, 8)

    def generate():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                              pad_token_id=0, **extra)  # fmt: skip

    return Workload(name, generate, None, model, description)


def _perceiver():
    import transformers

    cfg = transformers.PerceiverConfig(num_latents=8, d_latents=32, d_model=32, num_blocks=1,
                                       num_self_attends_per_block=1, num_self_attention_heads=2,
                                       num_cross_attention_heads=1, vocab_size=512,
                                       max_position_embeddings=64)  # fmt: skip
    model = transformers.PerceiverForMaskedLM(cfg).eval()
    return Workload("hf_perceiver", model, [((), {"inputs": _ids(2, 16)})], model, "Perceiver masked LM")


def _built(name: str, config, cls: str, kwargs: dict, description: str) -> Workload:
    import transformers

    model = getattr(transformers, cls)(config).eval()
    return Workload(name, model, [((), kwargs)], model, description)


def _sam():
    import transformers

    cfg = transformers.SamConfig(
        vision_config={"hidden_size": 32, "output_channels": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "mlp_dim": 64, "image_size": 64, "patch_size": 8, "window_size": 4,
                       "global_attn_indexes": [1], "num_pos_feats": 8},
        prompt_encoder_config={"hidden_size": 16, "image_size": 64, "patch_size": 8, "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "mlp_dim": 32,
                             "iou_head_hidden_dim": 16},
    )  # fmt: skip
    kwargs = {"pixel_values": torch.randn(1, 3, 64, 64), "input_points": torch.tensor([[[[10.0, 20.0]]]])}
    return _built("hf_sam", cfg, "SamModel", kwargs, "SAM: image encoder, point prompt, mask decoder")


def _detr(model_type: str):
    import transformers

    backbone = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                         out_features=["stage2"])  # fmt: skip
    config = transformers.AutoConfig.for_model(
        model_type, use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False, d_model=32,
        encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=8, num_labels=3)  # fmt: skip
    model = transformers.AutoModelForObjectDetection.from_config(config).eval()
    kwargs = {"pixel_values": torch.randn(1, 3, 64, 64)}
    return Workload(f"hf_{model_type}", model, [((), kwargs)], model, f"{model_type} object detection, ResNet backbone")


def _speecht5():
    import transformers

    cfg = transformers.SpeechT5Config(vocab_size=64, hidden_size=32, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                      decoder_ffn_dim=64, num_mel_bins=16, speech_decoder_prenet_units=32,
                                      speaker_embedding_dim=16, max_speech_positions=256, max_text_positions=64,
                                      speech_decoder_prenet_dropout=0.0)  # fmt: skip
    kwargs = {"input_ids": _ids(1, 12, 64), "decoder_input_values": torch.randn(1, 6, 16),
              "speaker_embeddings": torch.randn(1, 16)}  # fmt: skip
    return _built("hf_speecht5_tts", cfg, "SpeechT5ForTextToSpeech", kwargs, "SpeechT5 text to speech")


def _encodec():
    import transformers

    cfg = transformers.EncodecConfig(
        hidden_size=16,
        num_filters=4,
        num_residual_layers=1,
        upsampling_ratios=[4, 2],
        codebook_size=32,
        codebook_dim=16,
        target_bandwidths=[1.5],
        sampling_rate=800,
    )  # fmt: skip (100 frames a second: one codebook at 1.5 kbps)
    kwargs = {"input_values": torch.randn(1, 1, 800)}
    return _built("hf_encodec", cfg, "EncodecModel", kwargs, "EnCodec: conv encoder, RVQ, decoder")


def _mask2former():
    import transformers

    stages = ["stage1", "stage2", "stage3", "stage4"]
    backbone = transformers.SwinConfig(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4,
                                       image_size=64, out_features=stages)  # fmt: skip
    cfg = transformers.Mask2FormerConfig(backbone_config=backbone, feature_size=32, mask_feature_size=32,
                                         hidden_dim=32, encoder_feedforward_dim=64, dim_feedforward=64,
                                         encoder_layers=1, decoder_layers=2, num_attention_heads=2, num_queries=8,
                                         num_labels=3, common_stride=4, use_pretrained_backbone=False)  # fmt: skip
    kwargs = {"pixel_values": torch.randn(1, 3, 64, 64)}
    return _built("hf_mask2former", cfg, "Mask2FormerForUniversalSegmentation", kwargs,
                  "Mask2Former: Swin backbone, deformable pixel decoder")  # fmt: skip


def _llava():
    import transformers

    vision = {
        "model_type": "clip_vision_model",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": 32,
        "patch_size": 8,
    }
    text = {"model_type": "llama", **SIZES, "num_key_value_heads": 2}
    cfg = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_index=5,
                                   vision_feature_layer=-1, projector_hidden_act="gelu")  # fmt: skip
    ids = _ids(1, 24)
    ids[0, 2:18] = 5  # the image's 16 patches
    kwargs = {"input_ids": ids, "pixel_values": torch.randn(1, 3, 32, 32)}
    return _built("hf_llava", cfg, "LlavaForConditionalGeneration", kwargs, "Llava: CLIP tower, projector, Llama")


UNSEEN_MODELS = {
    "hf_longt5": lambda: _seq2seq("longt5", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                  encoder_attention_type="transient-global", local_radius=4, global_block_size=4),
    "hf_reformer": lambda: _auto("reformer", {"input_ids": _ids(2, 16)}, "AutoModel", axial_pos_shape=[4, 4],
                                 axial_pos_embds_dim=[32, 32], attn_layers=["local", "lsh"], local_attn_chunk_length=4,
                                 lsh_attn_chunk_length=4, num_buckets=2, attention_head_size=16,
                                 feed_forward_size=128, max_position_embeddings=16, num_hidden_layers=None,
                                 hash_seed=0),  # LSH draws its rotations at random in every call unless seeded
    "hf_funnel": lambda: _auto("funnel", architectures=["FunnelModel"], block_sizes=[1, 1], block_repeats=[1, 1],
                               d_model=64, n_head=4, d_head=16, d_inner=128,
                               num_hidden_layers=None),
    "hf_led": lambda: _seq2seq("led", d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                               attention_window=8, max_encoder_position_embeddings=64,
                               max_decoder_position_embeddings=64),
    "hf_big_bird": lambda: _auto("big_bird", {"input_ids": _ids(1, 128)}, "AutoModel",
                                        attention_type="block_sparse", block_size=8, num_random_blocks=2,
                                        max_position_embeddings=256),
    "hf_longformer": lambda: _auto("longformer", {"input_ids": _ids(2, 32)}, "AutoModel", attention_window=8,
                                   pad_token_id=1),
    "hf_perceiver": _perceiver,
    "hf_wav2vec2-conformer": lambda: _auto("wav2vec2-conformer", {"input_values": torch.randn(2, 4000)}, "AutoModel",
                                           conv_dim=(32, 32), conv_stride=(5, 4), conv_kernel=(10, 4),
                                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                           conv_depthwise_kernel_size=3, position_embeddings_type="rotary"),
    "hf_llama_beam_search": lambda: _generate_with("hf_llama_beam_search", "llama", "Llama generate(), beam search",
                                                   num_beams=3, do_sample=False),
    "hf_llama_assisted": lambda: _generate_with("hf_llama_assisted", "llama", "Llama assisted generate()",
                                                assistant=True, do_sample=False),
    "hf_llama_generate_compiled_static": lambda: _generate_with(
        "hf_llama_generate_compiled_static", "llama", "Llama generate(), static cache, compiled forward",
        compiled=True, cache_implementation="static", do_sample=False),
    "hf_sam": _sam, "hf_detr": lambda: _detr("detr"), "hf_conditional_detr": lambda: _detr("conditional_detr"),
    "hf_speecht5_tts": _speecht5, "hf_encodec": _encodec, "hf_mask2former": _mask2former, "hf_llava": _llava,
}  # fmt: skip
