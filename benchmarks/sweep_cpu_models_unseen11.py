"""transformers usage patterns for cpu_sweep.py that the other sweep files leave out, from tiny configs (random
init, no downloads): BART beam search returning a dict with scores and several sequences per prompt, ``generate()``
run in a worker thread feeding a streamer the main thread reads, T5 with every attention map and hidden state
returned as a ModelOutput, and a BERT whose forward a user's code calls with ``output_hidden_states`` and pools.

Each program states what a user expects of its rows where it can (``modules``, ``calls``: cpu_sweep.py checks them).
"""

from __future__ import annotations

import queue
import threading

import torch
from sweep_cpu_models import SIZES, _ids
from sweep_cpu_models_unseen9 import SEQ2SEQ, _causal
from workload import Workload


def _bart_beam_dict():
    import transformers

    cfg = transformers.BartConfig(**SEQ2SEQ, max_position_embeddings=64, pad_token_id=1, eos_token_id=2,
                                  decoder_start_token_id=2, forced_eos_token_id=None)  # fmt: skip
    model = transformers.BartForConditionalGeneration(cfg).eval()
    ids = _ids(2, 9)

    def run():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                             num_beams=3, num_return_sequences=2, return_dict_in_generate=True, output_scores=True,
                             length_penalty=0.8, do_sample=False)  # fmt: skip
        return out.sequences, out.sequences_scores, torch.stack(out.scores)

    return Workload("hf_bart_beam_dict", run, None, model, "BART generate(): beam search (3 beams, 2 sequences a "
                    "prompt) with return_dict_in_generate and output_scores")  # fmt: skip


def _streamer_thread():
    from transformers.generation.streamers import BaseStreamer

    model = _causal("llama", num_key_value_heads=2)
    ids = _ids(1, 6)

    class QueueStreamer(BaseStreamer):
        def __init__(self):
            self.tokens = queue.Queue()

        def put(self, value):
            self.tokens.put(value.clone())

        def end(self):
            self.tokens.put(None)

    def run():
        streamer, failed = QueueStreamer(), []

        def generate():
            try:
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                               do_sample=False, pad_token_id=0, streamer=streamer)  # fmt: skip
            except BaseException as exc:  # handed to the reading thread, which would otherwise wait forever
                failed.append(exc)
                streamer.end()

        worker = threading.Thread(target=generate)
        worker.start()
        pieces = []
        while (piece := streamer.tokens.get()) is not None:
            pieces.append(piece.flatten())
        worker.join()
        if failed:
            raise failed[0]
        return torch.cat(pieces)

    return Workload("hf_generate_streamer_thread", run, None, model, "Llama generate() in a worker thread with a "
                    "streamer whose tokens the main thread reads from a queue (as TextIteratorStreamer is used)",
                    notes={"modules": {"embedding": {"model.embed_tokens"}}})  # fmt: skip


def _t5_everything():
    import transformers

    cfg = transformers.T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    model.config._attn_implementation = "eager"
    kwargs = {"input_ids": _ids(), "decoder_input_ids": _ids(2, 5), "output_attentions": True,
              "output_hidden_states": True, "return_dict": True, "use_cache": False}  # fmt: skip

    def run(**kw):
        out = model(**kw)
        return (out.logits, *out.encoder_attentions, *out.decoder_attentions, *out.cross_attentions,
                *out.encoder_hidden_states, *out.decoder_hidden_states)  # fmt: skip

    return Workload("hf_t5_all_outputs", run, [((), kwargs)], model, "T5 with output_attentions and "
                    "output_hidden_states (eager attention) read from the ModelOutput: encoder, decoder and "
                    "cross attention maps; the shared Embedding is called as encoder.embed_tokens and "
                    "decoder.embed_tokens",
                    notes={"modules": {"embedding": {"encoder.embed_tokens", "decoder.embed_tokens",
                    "encoder.block.0.layer.0.SelfAttention.relative_attention_bias",
                    "decoder.block.0.layer.0.SelfAttention.relative_attention_bias"}}})  # fmt: skip


def _bert_pooled_layers():
    import transformers

    cfg = transformers.BertConfig(**{k: v for k, v in SIZES.items()}, type_vocab_size=2)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 11:] = 0

    def run(input_ids, attention_mask):
        hidden = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
        weights = attention_mask.unsqueeze(-1).float()
        layers = torch.stack(hidden[-2:]).mean(0)  # the last two layers, mean-pooled over the real tokens
        return torch.nn.functional.normalize((layers * weights).sum(1) / weights.sum(1), dim=-1)

    return Workload("hf_bert_pooled_layers", run, [((_ids(), mask), {})], model, "BERT with padding, "
                    "output_hidden_states, the user's mean pooling of the last two layers and normalize",
                    notes={"calls": {"normalize": 1}})  # fmt: skip


UNSEEN11_MODELS = {"hf_bart_beam_dict": _bart_beam_dict, "hf_generate_streamer_thread": _streamer_thread,
                   "hf_t5_all_outputs": _t5_everything, "hf_bert_pooled_layers": _bert_pooled_layers}  # fmt: skip
