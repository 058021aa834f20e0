"""transformers programs for cpu_sweep.py that the other sweep files leave out, from tiny configs and tokenizers built
here (random init, no downloads; fp32): attention implementations the other files leave out (``flex_attention`` on
the CPU, whose compiled ``flex_attention`` function runs inside each attention module; ``sdpa`` with a padded
batch), and ``pipeline`` objects (feature extraction, text classification, fill mask, text generation, token
classification) profiled as the callable with ``module=pipeline.model``: the pipeline's own pre- and post-processing
runs outside the model, its rows without a module.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
from sweep_cpu_models import SIZES, _auto, _decoder
from workload import Workload

WORDS = "the a cat dog sat on mat and ran far away quick brown fox jumps over lazy home".split()
SENTENCES = ["the cat sat on the mat", "a quick brown fox jumps over the lazy dog and ran far away"]


def _tokenizer(mask: bool = False):
    """A WordLevel fast tokenizer over WORDS with BERT's special tokens, built in memory."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: i for i, token in enumerate(specials + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                                cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")  # fmt: skip


def _model(auto: str, model_type: str = "bert", **config):
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **{**SIZES, "vocab_size": 5 + len(WORDS), **config})
    return getattr(transformers, auto).from_config(cfg).eval()


def _pipeline(name: str, task: str, model, inputs, description: str, prefix: str = "bert.", **call) -> Workload:
    import transformers

    pipe = transformers.pipeline(task, model=model, tokenizer=_tokenizer(), device="cpu")

    def run():
        return pipe(inputs, **call)

    return Workload(name, run, None, pipe.model, f"transformers pipeline('{task}') of a tiny {description}, "
                    "profiled as a callable with module=pipeline.model",
                    notes={"modules": {"embedding": {f"{prefix}embeddings.{kind}_embeddings" for kind in ("word",
                    "position", "token_type")}}})  # fmt: skip


def _feature_extraction():
    return _pipeline("hf_pipeline_feature_extraction", "feature-extraction", _model("AutoModel"), SENTENCES,
                     "BERT, return_tensors=True", "", return_tensors=True)  # fmt: skip


def _text_classification():
    return _pipeline("hf_pipeline_text_classification", "text-classification",
                     _model("AutoModelForSequenceClassification", num_labels=3), SENTENCES, "BERT classifier, "
                     "top_k=None (every label's score)", top_k=None)  # fmt: skip


def _fill_mask():
    return _pipeline("hf_pipeline_fill_mask", "fill-mask", _model("AutoModelForMaskedLM"),
                     ["the cat [MASK] on the mat", "a [MASK] fox"], "BERT masked LM, top_k=3", top_k=3)  # fmt: skip


def _token_classification():
    return _pipeline("hf_pipeline_token_classification", "token-classification",
                     _model("AutoModelForTokenClassification", num_labels=4), SENTENCES, "BERT tagger, "
                     "aggregation_strategy='simple' (offsets from the fast tokenizer)",
                     aggregation_strategy="simple")  # fmt: skip


def _text_generation():
    model = _model("AutoModelForCausalLM", "llama", num_key_value_heads=2, pad_token_id=0, bos_token_id=2,
                   eos_token_id=3)  # fmt: skip
    w = _pipeline("hf_pipeline_text_generation", "text-generation", model, SENTENCES[0], "Llama, greedy, "
                  "4 new tokens", max_new_tokens=4, min_new_tokens=4, do_sample=False)  # fmt: skip
    w.notes["modules"] = {"embedding": {"model.embed_tokens"}, "linear": {"lm_head", *(
        f"model.layers.{i}.{part}" for i in range(2) for part in ("self_attn.q_proj", "self_attn.k_proj",
        "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))}}  # fmt: skip
    return w


def _attention(model_type: str, attn: str, **config) -> Workload:
    w = _decoder(model_type, attn, num_key_value_heads=2, **config)
    w.description += f", attn_implementation={attn!r}"
    w.notes["modules"] = {"embedding": {"model.embed_tokens"}}
    if attn == "sdpa":
        w.notes["modules"]["scaled_dot_product_attention"] = {f"model.layers.{i}.self_attn" for i in range(2)}
    return w


def _bert_attention(attn: str) -> Workload:
    w = _auto("bert", {"input_ids": torch.randint(3, 512, (2, 16)), "attention_mask": torch.tensor(
        [[1] * 16, [1] * 10 + [0] * 6])}, attn=attn)  # fmt: skip
    w.name, w.description = f"hf_bert_padded_{attn}", w.description + f", a padded batch, attn_implementation={attn!r}"
    if attn == "sdpa":
        w.notes["modules"] = {"scaled_dot_product_attention": {f"encoder.layer.{i}.attention.self" for i in range(2)}}
    return w


UNSEEN8_MODELS = {
    "hf_llama_flex_attention": lambda: _attention("llama", "flex_attention"),
    "hf_qwen2_sdpa": lambda: _attention("qwen2", "sdpa"), "hf_bert_padded_sdpa": lambda: _bert_attention("sdpa"),
    "hf_pipeline_feature_extraction": _feature_extraction, "hf_pipeline_text_classification": _text_classification,
    "hf_pipeline_fill_mask": _fill_mask, "hf_pipeline_token_classification": _token_classification,
    "hf_pipeline_text_generation": _text_generation,
}  # fmt: skip
