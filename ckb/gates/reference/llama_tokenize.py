#!/usr/bin/env python3
"""OPTIONAL anchor tool: token ids from llama.cpp's own tokenizer, for the llama-family gates.

Usage (from the repository root; llama.cpp built by scripts/anchor/build-llama-cpp.sh):
  B=target/anchor/build; export LLAMA_CPP_LIB_PATH=$B/bin
  export PYTHONPATH=$(cat $B/bindings-path.txt 2>/dev/null || echo target/anchor/llama_cpp_python-0.3.36)
  python3 ckb/gates/reference/llama_tokenize.py MODEL.gguf --text "hello world"   # print ids
  python3 ckb/gates/reference/llama_tokenize.py MODEL.gguf --cases OUT.txt         # write the gate file
Gate files (one case per 2 lines: the text as a JSON string; the ids comma-separated):
  python3 ckb/gates/reference/llama_tokenize.py ckb/gates/fixtures/tiny-llama.gguf \
      --cases ckb/gates/vectors/tokenizer_tiny_llama.txt
  python3 ckb/gates/reference/llama_tokenize.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --cases ckb/gates/vectors/tokenizer_llama.txt
  python3 ckb/gates/reference/llama_tokenize.py models/gemma-3-270m-q4_k_m.gguf --more gemma3 \
      --cases ckb/gates/vectors/tokenizer_gemma3.txt
  python3 ckb/gates/reference/llama_tokenize.py ckb/gates/fixtures/tiny-llama.gguf --pre llama-bpe \
      --more llama-bpe --cases ckb/gates/vectors/tokenizer_tiny_llama_llama-bpe.txt
Needs: numpy (the bindings import it), the llama-cpp-python sdist's llama_cpp/ package on
PYTHONPATH and LLAMA_CPP_LIB_PATH pointing at the dir holding libllama.so.

The model is loaded vocab-only. Each text is encoded with llama_tokenize(add_special=False,
parse_special=True): no BOS/EOS added, CONTROL and USER_DEFINED tokens written in the text are
matched as single ids (what the engine's `Tokenizer::encode(text, true)` must reproduce). Every
case is checked to round-trip through llama_detokenize(remove_special=False,
unparse_special=True), except texts holding U+2581, which SentencePiece vocabs decode as a space.
The texts are tokenizer_ref.py's CASES (read from that file's source, so HF `tokenizers` is not
needed here) followed by EXTRA_CASES below, and by MORE_CASES[name] for each `--more name`.
`--no-parse-special` encodes with parse_special=False instead (control tokens written in the text
are plain text; user-defined ones still match), for the same file format.
`--pre NAME` tokenizes with a copy of MODEL whose tokenizer.ggml.pre is NAME (written with gguf-py
by llama_ref.copy_gguf, every other KV and tensor as is; a deleted temp file unless --keep PATH;
needs numpy and gguf): e.g. the tiny fixture's vocab under Llama 3's "llama-bpe" pre-tokenizer
(llama.cpp LLAMA_VOCAB_PRE_TYPE_LLAMA3, ignore_merges; its add_bos default is overridden by the
file's tokenizer.ggml.add_bos_token=false, and no BOS is added here anyway). Deterministic.
"""
import argparse
import ast
import ctypes
import json
import os
import sys

import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))

# Added to tokenizer_ref.py's CASES: numbers, whitespace runs, emoji ZWJ sequences, the SmolLM2
# special tokens and chat format, contractions in other cases, and an empty text.
EXTRA_CASES = [
    "12345",
    "3.14159",
    "1,000,000",
    "12345678901234567890 and -42 and +7.5e+10",
    "\n\n\n",
    "\n",
    " ",
    "  ",
    "\t",
    "\t\t\tthree tabs",
    "a  \n  b\t\n\tc",
    "end with newline and spaces  \n  ",
    "family \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 rainbow \U0001F3F3\uFE0F\u200D\U0001F308 "
    "woman technologist \U0001F469\U0001F3FD\u200D\U0001F4BB",
    "\u00e9\u00e8\u00ea\u00eb \u00c9COLE \u00fc\u00f6\u00e4\u00df \u00f1 \u0105\u0119\u0142\u017c",
    "\u4e2d\u6587\u548cEnglish\u6df7\u5408mixed\u6587\u672c123",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 123 \u0664\u0665\u0666",
    "'S 'T 'RE 'VE 'M 'LL 'D vs 's 't 're 've 'm 'll 'd",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "x <|im_end|> y",
    "<repo_name>metainfer<file_sep>src/main.rs\nfn main() {}",
    "<jupyter_code>print(1)<jupyter_output>1<empty_output>",
    "",
]


# Extra case sets, by name (--more): texts aimed at one vocab's special and user-defined tokens.
MORE_CASES = {
    # gemma3 (SentencePiece): turn markers, the control tokens, user-defined runs of spaces / tabs /
    # newlines and HTML tags, byte fallback, the literal U+2581, text that spells byte tokens.
    "gemma3": [
        "<start_of_turn>user\nWrite a poem about the sea.<end_of_turn>\n<start_of_turn>model\n",
        "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<eos>",
        "<start_of_turn><end_of_turn><start_of_turn>",
        "x<end_of_turn>y <end_of_turn> z",
        "<start_of_turn user",
        "<pad><unk><mask>[multimodal]<unused0><unused99><start_of_image><end_of_image>",
        "<table><tr><td>1</td><td>2</td></tr></table> <h1>Title</h1><strong>bold</strong><em>it</em>",
        "<0x41><0x0A> literal byte-token text",
        "a\u2581b \u2581\u2581 \u2581 lower one eighth blocks",
        " x",
        "  x",
        "x ",
        "x  ",
        " " * 40 + "forty spaces",
        "\t" * 35 + "tabs",
        "\n" * 33,
        "a\n\n\n\nb\n \n\tc \t \n",
        "\r\n\r\n\r",
        "\x00\x01\x7f control chars \x1b[0m",
        "\U00010348 gothic \U0001D400 math bold \U0010FFFD private",
        "\u0915\u094d\u0937 \u0e01\u0e33 \u05e9\u05dc\u05d5\u05dd \u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0",
        "\u4e2d\u6587 English \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \U0001F600",
        "\U0001F9D1\U0001F3FF\u200D\U0001F91D\u200D\U0001F9D1\U0001F3FB \U0001F1EF\U0001F1F5 \u2764\ufe0f\u200d\U0001F525",
        "for (int i = 0; i < n; ++i) {\n\t\tsum += a[i] * b[i];\n\t}\n",
        "    def __init__(self, x: int = 0) -> None:\n        self.x = x  # comment\n",
        "0 00 000 0000 12345678901234567890 3.14159e-10 -0.5 1_000_000 0xDEADBEEF",
        "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "Mixed\u00a0NBSP\u3000ideographic\u2028line sep\u00ad soft hyphen",
    ],
    # llama-bpe (Llama 3's pre-tokenizer, LLAMA_VOCAB_PRE_TYPE_LLAMA3): where its regex differs from
    # the smollm / gpt2-style ones: digit runs split in groups of 1..3 (not one per digit),
    # contractions matched in any case, one non-letter glued to the letters after it, punctuation
    # runs that swallow the newlines after them, whitespace runs before newlines; words that are
    # whole vocab tokens (ignore_merges looks them up before merging; on the tiny fixture's vocab
    # merges reach every token, so there it changes no ids).
    "llama-bpe": [
        "1234567",
        "3.14159",
        "year 2024!",
        "1 12 123 1234 12345 123456 1234567",
        "v1.2.34 - 0.001 - 1e10 - 99999 - 2024-01-31",
        "I'LL",
        "DON'T",
        "it'S",
        "WE'RE THEY'VE I'M HE'D SHE'S it'Ll you'Re",
        "x'y 'quoted' can't'",
        "a\n\nb",
        "x \n \n y",
        "  \n\n  leading",
        "line1\r\nline2\r\n\r\nline3",
        "trailing   ",
        "   ",
        "tabs\t\t\n\tend\n",
        "foo();\n\nbar}\n\n]\n",
        "\treturn x;\n\tif y {\n",
        "obj.get(a_id).com user\u2019s $var @user #tag",
        "\u2014dash \u00abquote\u00bb \u00bfque?",
        "return",
        " function",
        "the",
        # whole tokens of Llama 3's vocab that its merges alone would split (ignore_merges shows
        # on that vocab: vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf of the bindings sdist)
        " vi\u1ec7c h\u1ee3p nhi\u1ec1u \u0111i\u1ec1u Vi\u1ec7t \u0627\u06cc\u0631\u0627\u0646 \u0445\u0430\u0440\u0430\u043a\u0442\u0435\u0440",
        "mektedir",
        ".:.:.:.:.:.:.:.:",
    ],
}


def base_cases():
    """tokenizer_ref.py's CASES list, taken from its source without importing it."""
    path = os.path.join(HERE, "tokenizer_ref.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CASES" for t in node.targets):
            return list(ast.literal_eval(node.value))
    sys.exit(f"{path}: no CASES list")


@llama_cpp.llama_log_callback
def _quiet(level, text, user_data):
    pass


class Vocab:
    def __init__(self, path):
        llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        params.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(path.encode("utf-8"), params)
        if not self.model:
            sys.exit(f"{path}: llama.cpp could not load the vocab")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)

    def encode(self, text, parse_special=True):
        b = text.encode("utf-8")
        cap = len(b) + 8
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, b, len(b), buf, cap, False, parse_special)
        if n < 0:
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.vocab, b, len(b), buf, cap, False, parse_special)
        assert n >= 0, text
        return [int(buf[i]) for i in range(n)]

    def decode(self, ids):
        arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
        cap = 16 * len(ids) + 16
        out = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), out, cap, False, True)
        assert n >= 0, ids
        return out.raw[:n].decode("utf-8", errors="replace")

    def pieces(self, ids):
        """The ids' pieces (llama_token_to_piece, special tokens rendered) joined: the text without
        llama_detokenize's clean-up of spaces before punctuation (clean_spaces, on by default for
        BPE pre-tokenizers such as llama-bpe)."""
        out = b""
        for t in ids:
            buf = ctypes.create_string_buffer(256)
            n = llama_cpp.llama_token_to_piece(self.vocab, t, buf, 256, 0, True)
            assert 0 <= n <= 256, t
            out += buf.raw[:n]
        return out.decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser(description="llama.cpp tokenizer reference ids (vocab-only load)")
    ap.add_argument("model")
    ap.add_argument("--text", action="append", help="text to encode (repeatable)")
    ap.add_argument("--cases", metavar="OUT", help="write the gate case file")
    ap.add_argument("--more", action="append", choices=sorted(MORE_CASES), help="append a named case set (repeatable)")
    ap.add_argument("--no-parse-special", dest="parse_special", action="store_false",
                    help="encode with parse_special=false (control tokens in the text are plain text)")
    ap.add_argument("--pre", metavar="NAME", help="use a copy of MODEL with tokenizer.ggml.pre = NAME")
    ap.add_argument("--keep", metavar="PATH", help="with --pre: keep the copy here (else a temp file)")
    a = ap.parse_args()
    if a.pre:
        import tempfile
        sys.path.insert(0, HERE)
        import llama_ref  # numpy + gguf: only for the copy
        if a.keep:
            path = a.keep
        else:
            fd, path = tempfile.mkstemp(suffix=".gguf", prefix="pre-")
            os.close(fd)
        try:
            llama_ref.copy_gguf(a.model, path, kv_set={"tokenizer.ggml.pre": a.pre})
            v = Vocab(path)
        finally:
            if not a.keep:
                os.remove(path)
    else:
        v = Vocab(a.model)
    ps = a.parse_special
    for t in a.text or []:
        print(",".join(map(str, v.encode(t, ps))))
    if a.cases:
        name = a.model.replace("\\", "/").split("/")[-1]
        cases = base_cases() + [c for c in EXTRA_CASES] + [c for m in a.more or [] for c in MORE_CASES[m]]
        seen = set()
        cases = [c for c in cases if not (c in seen or seen.add(c))]
        with open(a.cases, "w", encoding="utf-8", newline="\n") as f:
            if a.pre:
                f.write(f"# Tokenizer reference ids for {name} with tokenizer.ggml.pre set to {json.dumps(a.pre)}\n")
                f.write("# (a gguf-py copy, every other KV and tensor as is), made by ckb/gates/reference/llama_tokenize.py\n")
                more = "".join(f" --more {m}" for m in a.more or [])
                f.write(f"# (options: --pre {a.pre}{more})\n")
            else:
                f.write(f"# Tokenizer reference ids for {name}, made by ckb/gates/reference/llama_tokenize.py\n")
            f.write(f"# (llama.cpp's own tokenizer: llama_tokenize, add_special=false, parse_special={str(ps).lower()},\n")
            f.write(f"# vocab-only load; llama.cpp of the llama-cpp-python {llama_cpp.__version__} sdist; no BOS).\n")
            f.write("# Format: '#' lines are comments; then per case 2 lines: the text as a JSON\n")
            f.write("# string (ASCII-escaped), then its token ids comma-separated.\n")
            for text in cases:
                ids = v.encode(text, ps)
                back = v.decode(ids)
                if back != text and "\u2581" not in text and v.pieces(ids) != text:
                    sys.exit(f"llama.cpp round-trip failed for {text!r}: {back!r}")
                f.write(json.dumps(text, ensure_ascii=True) + "\n")
                f.write(",".join(map(str, ids)) + "\n")
        print(f"wrote {a.cases}: {len(cases)} cases")


if __name__ == "__main__":
    main()
