"""A weight-free model folder that provision writes itself (never downloaded): the config of a small Llama and a
byte-level tokenizer, five files of 5 KB. SGLang builds the model from `config.json` alone with random weights
(`--load-format dummy`), so the `sglang-serve` check and the SGLang baseline need no download.

Sized for tensor parallelism of 1, 2, 4 and 8: 8 attention heads and 8 KV heads, an intermediate size of 2816
(352 a shard at TP 8). The tokenizer is byte-level BPE with no merges (256 bytes, then `<unk>`, `<s>`, `</s>`:
vocab 259), declared with the generic fast-tokenizer class, and loads offline with the transformers SGLang 0.5.23 pins
(5.19.0; declaring `LlamaTokenizerFast` there changed the encoding)."""

from __future__ import annotations

import json
from pathlib import Path

from provision import atomic

SPECIALS = ("<unk>", "<s>", "</s>")
VOCAB = 256 + len(SPECIALS)
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "vocab_size": VOCAB,
    "bos_token_id": 257,
    "eos_token_id": 258,
    "torch_dtype": "bfloat16",
}
TOKENIZER_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "model_max_length": 4096,
    "clean_up_tokenization_spaces": False,
}


def _byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table, as the `ByteLevel` pre-tokenizer maps bytes: the symbol of byte 0..255."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    extra = 0
    symbols = {}
    for byte in range(256):
        if byte in printable:
            symbols[byte] = chr(byte)
        else:
            symbols[byte] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def tokenizer() -> dict[str, object]:
    """tokenizer.json in the format of HF's `tokenizers`: byte-level BPE without merges."""
    vocab = {symbol: i for i, symbol in enumerate(_byte_symbols())}
    vocab.update({special: 256 + i for i, special in enumerate(SPECIALS)})
    added = [
        {
            "id": 256 + i,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, s in enumerate(SPECIALS)
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


FILES = {
    "config.json": CONFIG,
    "generation_config.json": {"bos_token_id": 257, "eos_token_id": 258},
    "tokenizer_config.json": TOKENIZER_CONFIG,
    "special_tokens_map.json": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
}


def write(folder: Path) -> Path:
    """Write (or rewrite where it differs) the folder's files; return the folder. Each file is written atomically, so
    a server reading the folder while another process writes it sees whole files."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in {**FILES, "tokenizer.json": tokenizer()}.items():
        text = json.dumps(content, indent=1, ensure_ascii=False) + "\n"
        path = folder / name
        try:
            if path.read_text(encoding="utf-8") == text:
                continue
        except (OSError, UnicodeDecodeError):
            pass
        atomic.write_atomic(path, text, 0o644)
    return folder


def tp_size(gpus: int) -> int:
    """The tensor-parallel size the model shards to on `gpus` GPUs: the largest of 1, 2, 4 and 8 that fits."""
    return max([size for size in (1, 2, 4, 8) if size <= gpus] or [1])
