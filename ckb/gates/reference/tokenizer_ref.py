#!/usr/bin/env python3
"""Independent tokenizer reference for qwen2 GGUF files, using HuggingFace `tokenizers`.

Builds a byte-level BPE from the GGUF's tokenizer.ggml.tokens / merges (qwen2 pre-tokenizer:
a Split on the qwen2 regex with behavior Isolated, then ByteLevel without prefix space and
without its own regex; no normalizer, as llama.cpp applies none) and registers the CONTROL and
USER_DEFINED tokens as added tokens, so they are matched inside text. No BOS is added
(add_bos_token is false for qwen2).

Usage:
  python3 tokenizer_ref.py MODEL.gguf --text "hello world"        # print ids
  python3 tokenizer_ref.py MODEL.gguf --cases OUT.txt              # write the gate file
Gate files (one case per 2 lines: the text as a JSON string; the ids comma-separated):
  python3 ckb/gates/reference/tokenizer_ref.py ckb/gates/fixtures/tiny-qwen2.gguf \
      --cases ckb/gates/vectors/tokenizer_tiny_qwen2.txt
  python3 ckb/gates/reference/tokenizer_ref.py models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --cases ckb/gates/vectors/tokenizer_qwen2.txt
Needs: gguf, tokenizers (pip install gguf tokenizers).
"""
import argparse
import json
import sys

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CASES = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "fn main() {\n\tlet x: Vec<u32> = (0..10).collect();\n\tprintln!(\"{:?}\", x);\n}",
    "import numpy as np\n",
    "// A function that reverses a string in Rust\nfn reverse(",
    "1234567",
    "3.14159 and 2,718,281 and 0x1F and 1e-6",
    "I'm sure they'll say it's fine, we've done it, you'd agree, I'M LOUD, THEY'LL",
    "don't won't can't shouldn't",
    "multiple   spaces    here",
    "trailing spaces   ",
    "   leading spaces",
    "line one\nline two\n\nline four\n\n\n",
    "windows\r\nline endings\r\n",
    "tabs\tand\t\tmore\ttabs",
    " \n \t \n",
    "你好，世界！今天天气很好。",
    "日本語のテキストとカタカナ",
    "한국어 문장입니다",
    "Emoji: 😀🎉👍🏽 and 🇫🇷 flags",
    "café naïve résumé Ångström façade",
    "Cafe\u0301 (decomposed accent)",
    "नमस्ते दुनिया",
    "مرحبا بالعالم",
    "Привет, мир! Ёлка",
    "Γειά σου Κόσμε",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite a haiku about compilers.<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text",
    "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "<|im_start|> not closed <|im_end",
    "SELECT * FROM users WHERE id = 42;",
    "<html><body class=\"main\">&nbsp;</body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "x+=1; y-=2; z**=3; a//=b",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "https://example.com/path?query=1&b=two#frag",
    "email@example.org, @mention #hashtag $100 50% ~tilde",
    "a",
    "!!!???...",
    "\u00a0non-breaking\u2009thin\u200bzero-width",
    "    indented with four spaces\n        and eight",
]


def load(path):
    r = gguf.GGUFReader(path)
    tokens = list(r.fields["tokenizer.ggml.tokens"].contents())
    types = list(r.fields["tokenizer.ggml.token_type"].contents())
    merges = [tuple(m.split(" ", 1)) for m in r.fields["tokenizer.ggml.merges"].contents()]
    model = r.fields["tokenizer.ggml.model"].contents()
    pre = r.fields["tokenizer.ggml.pre"].contents()
    if model != "gpt2" or pre != "qwen2":
        sys.exit(f"{path}: tokenizer {model}/{pre}, expected gpt2/qwen2")
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        sys.exit(f"{path}: duplicate token strings")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False,
                               byte_fallback=False, ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    CONTROL, USER = int(gguf.TokenType.CONTROL), int(gguf.TokenType.USER_DEFINED)
    added = [AddedToken(t, special=(ty == CONTROL), normalized=False, single_word=False,
                        lstrip=False, rstrip=False)
             for t, ty in zip(tokens, types) if ty in (CONTROL, USER)]
    tok.add_special_tokens(added)
    for a in added:   # the added tokens must keep their GGUF ids
        assert tok.token_to_id(a.content) == vocab[a.content], a.content
    return tok


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def main():
    ap = argparse.ArgumentParser(description="HF tokenizers reference for qwen2 GGUF tokenizers")
    ap.add_argument("model")
    ap.add_argument("--text", action="append", help="text to encode (repeatable)")
    ap.add_argument("--cases", metavar="OUT", help="write the gate case file")
    a = ap.parse_args()
    tok = load(a.model)
    for t in a.text or []:
        print(",".join(map(str, encode(tok, t))))
    if a.cases:
        name = a.model.replace("\\", "/").split("/")[-1]
        with open(a.cases, "w", encoding="utf-8") as f:
            f.write(f"# Tokenizer reference ids for {name}, made by ckb/gates/reference/tokenizer_ref.py\n")
            f.write("# (HF tokenizers byte-level BPE from the GGUF vocab/merges, qwen2 pre-tokenizer,\n")
            f.write("# CONTROL/USER_DEFINED tokens matched in text, no BOS, no normalizer).\n")
            f.write("# Format: '#' lines are comments; then per case 2 lines: the text as a JSON\n")
            f.write("# string (ASCII-escaped), then its token ids comma-separated.\n")
            for text in CASES:
                ids = encode(tok, text)
                back = tok.decode(ids, skip_special_tokens=False)
                if back != text:
                    sys.exit(f"reference round-trip failed for {text!r}: {back!r}")
                f.write(json.dumps(text, ensure_ascii=True) + "\n")
                f.write(",".join(map(str, ids)) + "\n")
        print(f"wrote {a.cases}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
