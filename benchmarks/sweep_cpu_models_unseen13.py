"""transformers architectures for cpu_sweep.py that the other sweep files leave out, from tiny configs (random init, no
downloads; fp32), chosen for their mechanisms: custom autograd Functions (SEW-D's XSoftmax and XDropout, YOSO's
expected cumulation), span-based dynamic convolution through ``unfold`` (ConvBERT) and ``unfold``/``fold`` patches
(MobileViTV2), relative position buckets (MPNet, UMT5 per layer, LayoutLMv3 in 2D), routed experts with a capacity
(NLLB-MoE), deformable attention through ``grid_sample`` (RT-DETR, Deformable DETR two-stage with box refinement),
keypoints of data-dependent count sampled by ``grid_sample`` (SuperPoint), VITS's flows, weight-normed vocoder and
seeded noise, FastSpeech2's length regulator, backbones built by ``load_backbone`` (UperNet on ConvNeXt, ViTMatte on
ViTDet, ZoeDepth on BEiT, Table Transformer on ResNet), GroupViT's hard grouping, OWLv2's box heads, X-CLIP's video
prompts, GIT, DPT, GLPN, Swin2SR's pixel shuffle, Swin V2's continuous position bias, EfficientNet, CvT's convolutional
projections, MGP-STR's A3 heads, LiLT's layout stream, Parakeet's conformer, TimeSformer, ViViT, X-MOD's language
adapters, TAPAS's seven token types, SqueezeBERT's grouped convolutions, Phi's parallel block, MusicGen's
``generate()`` with classifier-free guidance and its delay pattern.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
from sweep_cpu_models import _auto, _decoder, _ids, _seq2seq
from workload import Workload

SEQ2SEQ = {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}  # fmt: skip
TOWER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
TEXT = {**TOWER, "vocab_size": 512}
VISION = {**TOWER, "image_size": 32, "patch_size": 8}


def _built(name: str, cls: str, config: str, kwargs: dict, description: str, **settings) -> Workload:
    """A model class of transformers made from its config class (the model types AutoModel does not build)."""
    import transformers

    cfg = getattr(transformers, config)(**settings)
    model = getattr(transformers, cls)(cfg).eval()
    return Workload(name, model, [((), kwargs)], model, f"transformers {cls}, tiny config: {description}")


def _pixels(batch: int = 2, size: int = 32, channels: int = 3) -> dict:
    return {"pixel_values": torch.randn(batch, channels, size, size)}


def _boxes() -> torch.Tensor:
    return torch.sort(torch.randint(0, 1000, (2, 16, 4)), dim=-1).values  # x0 <= y0 <= x1 <= y1 after sorting


def _seeded(w: Workload, description: str) -> Workload:
    model = w.module

    def seeded(**inputs):  # the model draws noise with torch.randn in every call: seeded per call
        torch.manual_seed(0)
        return model(**inputs)

    w.fn, w.description = seeded, w.description + description
    return w


def _sew_d() -> Workload:
    w = _auto("sew-d", {"input_values": torch.randn(2, 4000)}, conv_dim=(32, 32), conv_stride=(5, 4),
              conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, squeeze_factor=2,
              position_buckets=16, max_position_embeddings=64)  # fmt: skip
    w.description += ": XSoftmax and XDropout autograd Functions, disentangled relative attention"
    return w


def _yoso() -> Workload:
    w = _auto("yoso", {"input_ids": _ids(2, 64)}, use_expectation=True, num_hash=2, hash_code_len=4)
    w.description += ": YosoCumulation autograd Function (expected LSH cumulation)"
    return w


def _rt_detr() -> Workload:
    import transformers

    backbone = transformers.RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 64], depths=[1, 1, 1, 1],
                                               out_features=["stage2", "stage3", "stage4"])  # fmt: skip
    return _built("hf_rt_detr", "RTDetrForObjectDetection", "RTDetrConfig", _pixels(1, 64), "hybrid encoder, "
                  "multi-scale deformable attention (grid_sample), top-k query selection", backbone_config=backbone,
                  encoder_hidden_dim=32, encoder_in_channels=[32, 64, 64], encoder_ffn_dim=64,
                  encoder_attention_heads=4, d_model=32, decoder_in_channels=[32, 32, 32], decoder_ffn_dim=64,
                  decoder_attention_heads=4, decoder_layers=2, num_queries=20, decoder_n_points=2, num_denoising=0,
                  anchor_image_size=None)  # fmt: skip


def _resnet(out_features: list) -> object:
    import transformers

    return transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
                                     out_features=out_features)  # fmt: skip


def _deformable_detr() -> Workload:
    return _built("hf_deformable_detr", "DeformableDetrForObjectDetection", "DeformableDetrConfig", _pixels(1, 128),
                  "two-stage, box refinement, multi-scale deformable attention (grid_sample)", use_timm_backbone=False,
                  backbone_config=_resnet(["stage2", "stage3", "stage4"]), use_pretrained_backbone=False, d_model=32,
                  encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                  encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, encoder_n_points=2, decoder_n_points=2,
                  two_stage=True, with_box_refine=True)  # fmt: skip


def _table_transformer() -> Workload:
    return _built("hf_table_transformer", "TableTransformerForObjectDetection", "TableTransformerConfig",
                  _pixels(1, 64), "DETR on a ResNet built by load_backbone", use_timm_backbone=False,
                  backbone_config=_resnet(["stage4"]), use_pretrained_backbone=False, d_model=32, encoder_layers=1,
                  decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                  decoder_ffn_dim=64, num_queries=10)  # fmt: skip


def _vits() -> Workload:
    w = _built("hf_vits", "VitsModel", "VitsConfig", {"input_ids": torch.randint(0, 32, (1, 8))}, "stochastic "
               "duration predictor, normalizing flows, HiFi-GAN decoder with weight_norm", vocab_size=32,
               hidden_size=32, num_hidden_layers=2, num_attention_heads=2, ffn_dim=64, flow_size=16,
               spectrogram_bins=33, upsample_initial_channel=32, upsample_rates=[4, 4], upsample_kernel_sizes=[8, 8],
               resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]], depth_separable_channels=2,
               duration_predictor_filter_channels=32, prior_encoder_num_flows=2, prior_encoder_num_wavenet_layers=2,
               posterior_encoder_num_wavenet_layers=2, wavenet_kernel_size=3)  # fmt: skip
    return _seeded(w, " (noise seeded per call)")


def _zoedepth() -> Workload:
    import transformers

    beit = transformers.BeitConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                                   image_size=32, patch_size=8, out_features=["stage1", "stage2", "stage3", "stage4"],
                                   reshape_hidden_states=False, use_relative_position_bias=True)  # fmt: skip
    return _built("hf_zoedepth", "ZoeDepthForDepthEstimation", "ZoeDepthConfig", _pixels(1, 32), "BEiT backbone, "
                  "metric bins and attractors", backbone_config=beit, neck_hidden_sizes=[8, 16, 32, 32],
                  fusion_hidden_size=16, bottleneck_features=16, num_attractors=[4, 4, 2, 1], bin_embedding_dim=16,
                  num_relative_features=8, patch_transformer_hidden_size=16, patch_transformer_intermediate_size=32,
                  patch_transformer_num_attention_heads=2,
                  bin_configurations=[{"n_bins": 8, "min_depth": 0.001, "max_depth": 10.0}])  # fmt: skip


def _vitmatte() -> Workload:
    import transformers

    vitdet = transformers.VitDetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                       image_size=32, pretrain_image_size=32, patch_size=16, num_channels=4,
                                       window_size=2, window_block_indices=[0], use_relative_position_embeddings=True,
                                       out_features=["stage2"])  # fmt: skip
    return _built("hf_vitmatte", "VitMatteForImageMatting", "VitMatteConfig", _pixels(1, 32, 4), "ViTDet backbone "
                  "with windowed and relative-position attention, 4 channels", backbone_config=vitdet,
                  hidden_size=32, convstream_hidden_sizes=[8, 16, 32], fusion_hidden_sizes=[32, 16, 8, 8])  # fmt: skip


def _upernet() -> Workload:
    import transformers

    convnext = transformers.ConvNextConfig(hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
                                           out_features=["stage1", "stage2", "stage3", "stage4"])  # fmt: skip
    return _built("hf_upernet", "UperNetForSemanticSegmentation", "UperNetConfig", _pixels(2, 64), "ConvNeXt "
                  "backbone, pyramid pooling (adaptive pools), auxiliary head", backbone_config=convnext,
                  hidden_size=16, auxiliary_in_channels=32, auxiliary_channels=16, num_labels=4)  # fmt: skip


def _cvt() -> Workload:
    two = {"attention_drop_rate": [0.0, 0.0], "drop_rate": [0.0, 0.0], "drop_path_rate": [0.0, 0.0],
           "qkv_bias": [True, True], "qkv_projection_method": ["dw_bn", "dw_bn"], "kernel_qkv": [3, 3],
           "padding_kv": [1, 1], "stride_kv": [2, 2], "padding_q": [1, 1], "stride_q": [1, 1]}  # fmt: skip
    return _built("hf_cvt", "CvtModel", "CvtConfig", _pixels(), "depthwise convolutional projections of q, k, v, a "
                  "class token in the last stage", embed_dim=[16, 32], num_heads=[1, 2], depth=[1, 2],
                  patch_sizes=[7, 3], patch_stride=[4, 2], patch_padding=[2, 1], mlp_ratio=[2.0, 2.0],
                  cls_token=[False, True], **two)  # fmt: skip


def _musicgen() -> Workload:
    import transformers

    decoder = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "ffn_dim": 64,
               "num_codebooks": 2, "max_position_embeddings": 64, "pad_token_id": 64, "bos_token_id": 64}  # fmt: skip
    model = transformers.MusicgenForCausalLM(transformers.MusicgenDecoderConfig(**decoder)).eval()
    ids = torch.full((2 * 2, 1), 64)  # batch 2 times two codebooks, each starting from the BOS token

    def generate():
        return model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False, guidance_scale=3.0,
                              pad_token_id=64, decoder_start_token_id=64, num_beams=1,
                              num_return_sequences=1)  # fmt: skip

    return Workload("hf_musicgen_generate_guidance", generate, None, model, "MusicGen's decoder generate() with "
                    "classifier-free guidance (an unconditional half of the batch), its delay pattern")  # fmt: skip


def _keyed(programs: dict) -> dict:
    """The programs, each Workload named by its key (_auto names one by its model type, "hf_sew-d")."""

    def named(name, factory):
        def make():
            w = factory()
            w.name = name
            return w

        return make

    return {name: named(name, factory) for name, factory in programs.items()}


UNSEEN13_MODELS = _keyed({
    "hf_sew_d": _sew_d,
    "hf_yoso": _yoso,
    "hf_convbert": lambda: _auto("convbert", embedding_size=64, conv_kernel_size=5, head_ratio=2),
    "hf_mobilevitv2": lambda: _built("hf_mobilevitv2", "MobileViTV2Model", "MobileViTV2Config", _pixels(2, 64),
                                     "separable linear attention over unfold/fold patches", image_size=64,
                                     width_multiplier=0.25),
    "hf_mpnet": lambda: _built("hf_mpnet", "MPNetModel", "MPNetConfig", {"input_ids": _ids()}, "relative position "
                               "buckets shared by the layers", vocab_size=512, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=128),
    "hf_umt5": lambda: _seq2seq("umt5", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4),
    "hf_layoutlmv3": lambda: _built("hf_layoutlmv3", "LayoutLMv3Model", "LayoutLMv3Config",
                                    {"input_ids": _ids(), "bbox": _boxes(), "pixel_values": torch.randn(2, 3, 32, 32)},
                                    "text, boxes and image patches; 1D and 2D relative position biases",
                                    vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=128, input_size=32, patch_size=8, coordinate_size=10,
                                    shape_size=12),
    "hf_nllb_moe": lambda: _seq2seq("nllb-moe", **SEQ2SEQ, num_experts=4, expert_capacity=8, encoder_sparse_step=1,
                                    decoder_sparse_step=1),
    "hf_rt_detr": _rt_detr,
    "hf_deformable_detr": _deformable_detr,
    "hf_table_transformer": _table_transformer,
    "hf_superpoint": lambda: _built("hf_superpoint", "SuperPointForKeypointDetection", "SuperPointConfig",
                                    _pixels(2, 64, 1), "keypoints of a data-dependent count (threshold, NMS, top-k) "
                                    "and descriptors sampled at them with grid_sample",
                                    encoder_hidden_sizes=[8, 8, 16, 16], decoder_hidden_size=32,
                                    keypoint_decoder_dim=65, descriptor_decoder_dim=32, max_keypoints=16),
    "hf_vits": _vits,
    "hf_fastspeech2_conformer": lambda: _built("hf_fastspeech2_conformer", "FastSpeech2ConformerModel",
                                               "FastSpeech2ConformerConfig", {"input_ids": _ids(1, 8, 32)},
                                               "conformer blocks, duration, pitch and energy predictors, a length "
                                               "regulator repeating frames", hidden_size=32, vocab_size=32,
                                               num_mel_bins=16, encoder_num_attention_heads=2, encoder_layers=1,
                                               encoder_linear_units=64, decoder_layers=1,
                                               decoder_num_attention_heads=2, decoder_linear_units=64,
                                               speech_decoder_postnet_layers=2, speech_decoder_postnet_units=32,
                                               duration_predictor_channels=32, energy_predictor_channels=32,
                                               pitch_predictor_channels=32),
    "hf_parakeet_ctc": lambda: _built("hf_parakeet_ctc", "ParakeetForCTC", "ParakeetCTCConfig",
                                      {"input_features": torch.randn(1, 64, 16)}, "conformer encoder with relative "
                                      "positions, convolutional subsampling, CTC head",
                                      encoder_config={**TOWER, "subsampling_conv_channels": 8, "num_mel_bins": 16},
                                      vocab_size=32),
    "hf_zoedepth": _zoedepth,
    "hf_vitmatte": _vitmatte,
    "hf_upernet": _upernet,
    "hf_dpt": lambda: _built("hf_dpt", "DPTForDepthEstimation", "DPTConfig", _pixels(), "reassembled ViT stages, "
                             "feature fusion with interpolate", hidden_size=64, num_hidden_layers=4,
                             num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8,
                             neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32,
                             backbone_out_indices=[0, 1, 2, 3]),
    "hf_glpn": lambda: _built("hf_glpn", "GLPNForDepthEstimation", "GLPNConfig", _pixels(), "efficient attention "
                              "with sequence reduction, selective feature fusion", num_encoder_blocks=2,
                              depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                              patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2], decoder_hidden_size=16),
    "hf_swin2sr": lambda: _built("hf_swin2sr", "Swin2SRForImageSuperResolution", "Swin2SRConfig", _pixels(2, 16),
                                 "Swin V2 blocks, pixel-shuffle upsampler", image_size=16, embed_dim=16, depths=[1, 1],
                                 num_heads=[2, 2], window_size=4, patch_size=1, upscale=2),
    "hf_swinv2": lambda: _auto("swinv2", _pixels(), image_size=32, num_attention_heads=None, num_hidden_layers=None,
                               patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
    "hf_efficientnet": lambda: _built("hf_efficientnet", "EfficientNetModel", "EfficientNetConfig", _pixels(),
                                      "depthwise blocks with squeeze-excitation", image_size=32,
                                      width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320),
    "hf_cvt": _cvt,
    "hf_groupvit": lambda: _built("hf_groupvit", "GroupViTModel", "GroupViTConfig",
                                  {"input_ids": _ids(2, 8), "pixel_values": torch.randn(2, 3, 32, 32),
                                   "output_segmentation": True}, "group tokens assigned by hard Gumbel-softmax "
                                  "(eval: argmax), segmentation output", text_config=TEXT,
                                  vision_config={**VISION, "depths": [1, 1], "num_group_tokens": [8, 4],
                                                 "num_output_groups": [8, 4]},
                                  projection_dim=16, projection_intermediate_dim=32),
    "hf_owlv2": lambda: _built("hf_owlv2", "Owlv2ForObjectDetection", "Owlv2Config",
                               {"input_ids": _ids(2, 8), "pixel_values": torch.randn(1, 3, 32, 32)}, "text-queried "
                               "detection: box bias, objectness head, class head by einsum", text_config=TEXT,
                               vision_config=VISION, projection_dim=32),
    "hf_x_clip": lambda: _built("hf_x_clip", "XCLIPModel", "XCLIPConfig",
                                {"input_ids": _ids(2, 8), "pixel_values": torch.randn(1, 4, 3, 32, 32)}, "video "
                                "frames with cross-frame message tokens, a multi-frame integration transformer, "
                                "video-specific prompts", text_config=TEXT,
                                vision_config={**VISION, "num_frames": 4, "mit_hidden_size": 32,
                                               "mit_intermediate_size": 64, "mit_num_hidden_layers": 1,
                                               "mit_num_attention_heads": 2},
                                projection_dim=32, prompt_layers=1, prompt_attention_heads=2),
    "hf_git": lambda: _built("hf_git", "GitForCausalLM", "GitConfig",
                             {"input_ids": _ids(2, 8), "pixel_values": torch.randn(2, 3, 32, 32)}, "image tokens "
                             "prepended to text under one causal mask", vision_config=VISION, vocab_size=512,
                             hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64),
    "hf_mgp_str": lambda: _built("hf_mgp_str", "MgpstrForSceneTextRecognition", "MgpstrConfig",
                                 {"pixel_values": torch.randn(2, 3, 16, 32)}, "character, BPE and wordpiece A3 heads "
                                 "with their attentions", image_size=[16, 32], patch_size=4, max_token_length=8,
                                 num_character_labels=10, num_bpe_labels=20, num_wordpiece_labels=20, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=2, output_a3_attentions=True),
    "hf_lilt": lambda: _built("hf_lilt", "LiltModel", "LiltConfig", {"input_ids": _ids(), "bbox": _boxes()},
                              "text and layout streams with bi-directional attention complementation",
                              vocab_size=512, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=96, channel_shrink_ratio=4),
    "hf_timesformer": lambda: _auto("timesformer", {"pixel_values": torch.randn(1, 4, 3, 32, 32)}, image_size=32,
                                    patch_size=8, num_frames=4),
    "hf_vivit": lambda: _auto("vivit", {"pixel_values": torch.randn(1, 4, 3, 32, 32)}, image_size=32,
                              tubelet_size=[2, 8, 8], num_frames=4),
    "hf_xmod": lambda: _auto("xmod", {"input_ids": _ids(), "lang_ids": torch.tensor([0, 1])},
                             languages=["en_XX", "de_DE"], default_language="en_XX"),
    "hf_tapas": lambda: _auto("tapas", {"input_ids": _ids(), "token_type_ids": torch.randint(0, 2, (2, 16, 7))}),
    "hf_squeezebert": lambda: _auto("squeezebert", embedding_size=64, q_groups=2, k_groups=2, v_groups=2,
                                    post_attention_groups=2, intermediate_groups=2, output_groups=2),
    "hf_phi": lambda: _decoder("phi", partial_rotary_factor=0.5),
    "hf_musicgen_generate_guidance": _musicgen,
})  # fmt: skip
