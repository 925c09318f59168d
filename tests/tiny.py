"""Tiny random decoder models and a word-level tokenizer for fast tests (no downloads)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from leap.core.modeling.model import LeapModel, wrap_model

VOCAB = 97
WORDS = ["<unk>", "<s>", "</s>", "<eos>"] + [f"w{i}" for i in range(4, VOCAB)]


def tiny_hf_model(kind: str = "llama", *, layers: int = 6, vocab: int = VOCAB, eos_token_id: int | None = 3,
                  seed: int = 0, init: float = 0.2):
    """A random Llama / Qwen2 / Mistral causal LM (``qwen2-window`` and ``mistral`` with an 8-token sliding window) with a large init so logits are well separated."""
    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        initializer_range=init, eos_token_id=eos_token_id, bos_token_id=None, pad_token_id=None,
        tie_word_embeddings=False,
    )
    if kind == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(**common))
    elif kind == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM

        model = Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=False))
    elif kind == "qwen2-window":  # sliding window of 8 on the upper half of the layers, full attention below
        from transformers import Qwen2Config, Qwen2ForCausalLM

        model = Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=True, sliding_window=8,
                                             max_window_layers=layers // 2))
    elif kind == "mistral":  # sliding window of 8 on every layer
        from transformers import MistralConfig, MistralForCausalLM

        model = MistralForCausalLM(MistralConfig(**common, sliding_window=8))
    else:
        raise ValueError(kind)
    model.generation_config.eos_token_id = eos_token_id
    return model.eval().to(device_for_tests())


def device_for_tests() -> torch.device:
    """Where the tiny models live: ``LEAP_TEST_DEVICE`` (default ``cpu``); ``cuda`` runs the suite's
    tiny-model tests on a GPU (how the device checks were run on a lent GPU machine)."""
    return torch.device(os.environ.get("LEAP_TEST_DEVICE", "cpu"))


def tiny_tokenizer(with_eos: bool = True):
    """A whitespace word-level tokenizer over ``WORDS`` (ids 0..96); ``<eos>`` is id 3."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    extra = {"eos_token": "<eos>"} if with_eos else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", **extra)


def tiny_model(kind: str = "llama", **kwargs) -> LeapModel:
    with_eos = kwargs.get("eos_token_id", 3) is not None
    return wrap_model(tiny_hf_model(kind, **kwargs), tiny_tokenizer(with_eos), name=f"tiny-{kind}")


def save_tiny_model(folder: Path, kind: str = "llama", **kwargs) -> Path:
    """Write a tiny model and its tokenizer in Hugging Face layout (for loader and CLI tests)."""
    tiny_hf_model(kind, **kwargs).save_pretrained(folder)
    tiny_tokenizer(kwargs.get("eos_token_id", 3) is not None).save_pretrained(folder)
    return folder


#: two logits closer than this are a float32 tie: a product's summation order (which differs with the number of rows a
#: forward carries, in every BLAS) can order them either way, so greedy identity cannot be asked of them
FLOAT_TIE = 1e-5


def same_or_float_tie(model: LeapModel, prompt: list[int], got: list[int], ref: list[int]) -> bool:
    """Whether greedy output ``got`` is ``ref`` (plain decoding of ``prompt`` alone), or first departs from it at a
    float32 tie: where the model's logits (one full forward over the prompt and ``ref``'s tokens before that position)
    of ``ref``'s token and ``got``'s are both within :data:`FLOAT_TIE` of the best. Any other departure - a wrong token
    accepted, a stop too early or too late - is False. Only for the tests that compare decodings whose forwards carry
    different numbers of rows (batches: one row against several)."""
    if got == ref:
        return True
    i = next((j for j, (a, b) in enumerate(zip(got, ref)) if a != b), None)
    if i is None:  # one is a prefix of the other: a stop (EOS or a budget) that the other did not make
        return False
    ids = torch.tensor([list(prompt) + list(ref[:i])], device=model.device)
    with torch.inference_mode():
        logits = model.hf_model(input_ids=ids).logits[0, -1].float()
    best = logits.max()
    return bool(best - logits[ref[i]] < FLOAT_TIE and best - logits[got[i]] < FLOAT_TIE)


def _gguf_permute(weight, heads: int):
    """``convert_hf_to_gguf.py``'s permutation of Llama's q/k rows (llama.cpp's rope rotates adjacent pairs)."""
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def save_tiny_gguf(model: LeapModel, path: Path) -> Path:
    """Write a tiny Llama ``model`` as a float32 GGUF that llama.cpp loads in milliseconds (tensors named and q/k
    permuted as ``convert_hf_to_gguf.py`` does; a tokenizer of placeholder tokens, since the runner feeds ids):
    fast tests of the llama.cpp runner and the KV handoff without the default model."""
    import gguf
    import numpy as np

    config, hf = model.config, model.hf_model
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(float(getattr(config, "rope_theta", None)
                                    or config.rope_parameters["rope_theta"]))
    writer.add_rope_dimension_count(config.hidden_size // heads)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<t{i}>" for i in range(config.vocab_size)])
    writer.add_token_scores([0.0] * config.vocab_size)
    writer.add_token_types([gguf.TokenType.NORMAL] * config.vocab_size)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(3)
    state = {k: v.detach().float().cpu() for k, v in hf.state_dict().items()}
    tensors = {"token_embd.weight": state["model.embed_tokens.weight"], "output_norm.weight": state["model.norm.weight"],
               "output.weight": state["lm_head.weight"]}
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        tensors.update({
            f"blk.{i}.attn_norm.weight": state[p + "input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": _gguf_permute(state[p + "self_attn.q_proj.weight"], heads),
            f"blk.{i}.attn_k.weight": _gguf_permute(state[p + "self_attn.k_proj.weight"], kv_heads),
            f"blk.{i}.attn_v.weight": state[p + "self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": state[p + "self_attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": state[p + "post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate.weight": state[p + "mlp.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": state[p + "mlp.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": state[p + "mlp.down_proj.weight"]})
    for name, tensor in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(tensor.numpy(), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
