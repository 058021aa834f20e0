"""transformers programs for cpu_sweep.py that the other sweep files leave out: a decoding loop of the user's own
over ``past_key_values``, a classifier computing its loss from ``labels``, gradient checkpointing in training mode,
``generate()`` with a logits processor and a stopping criterion of the user's own, beams and several sequences
returned, and one model called with ``use_cache`` on and off on left-padded batches. Tiny configs, random init, no
downloads.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from sweep_cpu_models import SIZES, _ids
from workload import Workload


def _causal_lm(model_type: str = "llama", **config):
    import transformers

    cfg = transformers.AutoConfig.for_model(model_type, **{**SIZES, "num_key_value_heads": 2, **config})
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def hf_manual_decode_loop():
    model = _causal_lm()
    ids = _ids(1, 6)

    def decode():
        out = model(input_ids=ids, use_cache=True)
        past, tokens = out.past_key_values, [int(out.logits[0, -1].argmax().item())]
        for _ in range(3):
            step = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=past, use_cache=True)
            past = step.past_key_values
            tokens.append(int(step.logits[0, -1].argmax().item()))
            if tokens[-1] == 2:  # an end token, as a user's loop stops
                break
        return torch.tensor(tokens)

    return Workload("hf_manual_decode_loop", decode, None, model, "Llama: a greedy decoding loop of the user's own "
                    "over past_key_values, .item() per step", notes={"calls": {"embedding": 4}})  # fmt: skip


def hf_classifier_with_labels():
    import transformers

    cfg = transformers.BertConfig(**SIZES, num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.BertForSequenceClassification(cfg).eval()
    kwargs = {"input_ids": _ids(), "attention_mask": torch.ones(2, 16, dtype=torch.long),
              "labels": torch.tensor([0, 2])}  # fmt: skip
    return Workload("hf_classifier_with_labels", model, [((), kwargs)], model, "BertForSequenceClassification given "
                    "labels: the loss computed in the forward", notes={"modules": {"cross_entropy": {""}},
                    "calls": {"cross_entropy": 1}})  # fmt: skip


def hf_checkpointing_train_mode():
    model = _causal_lm(attention_dropout=0.0)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    kwargs = {"input_ids": _ids(), "use_cache": False}
    layers = {f"model.layers.{i}.mlp.act_fn" for i in range(2)}
    return Workload("hf_checkpointing_train_mode", model, [((), kwargs)], model, "Llama in training mode with "
                    "gradient checkpointing on (no dropout), under profile()'s no_grad",
                    notes={"modules": {"silu": layers}, "calls": {"silu": 2}})  # fmt: skip


def hf_generate_custom_processors():
    import transformers

    model = _causal_lm("gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=64)
    ids = _ids(2, 6)

    class Penalize(transformers.LogitsProcessor):
        def __call__(self, input_ids, scores):
            return scores + F.logsigmoid(scores) * 0.1

    class NeverEarly(transformers.StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    def generate():
        return model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=4,
            min_new_tokens=4,
            num_beams=2,
            num_return_sequences=2,
            no_repeat_ngram_size=2,
            do_sample=False,
            logits_processor=transformers.LogitsProcessorList([Penalize()]),
            stopping_criteria=transformers.StoppingCriteriaList([NeverEarly()]),
            pad_token_id=0,
        )

    return Workload("hf_generate_custom_processors", generate, None, model, "GPT-2 beam search with a logits "
                    "processor and a stopping criterion of the user's own, two sequences returned",
                    notes={"modules": {"logsigmoid": {"<none>"}}, "calls": {"logsigmoid": 4}})  # fmt: skip


def hf_use_cache_toggled():
    model = _causal_lm(pad_token_id=0)
    ids = _ids(2, 10)
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding
    samples = [((), {"input_ids": ids, "attention_mask": mask, "use_cache": True}),
               ((), {"input_ids": ids, "attention_mask": mask, "use_cache": False})]  # fmt: skip
    return Workload("hf_use_cache_toggled", model, samples, model, "Llama called with use_cache on and off on a "
                    "left-padded batch", notes={"calls": {"embedding": 2}})  # fmt: skip


UNSEEN5_MODELS = {f.__name__: f for f in (
    hf_manual_decode_loop, hf_classifier_with_labels, hf_checkpointing_train_mode, hf_generate_custom_processors,
    hf_use_cache_toggled,
)}  # fmt: skip
