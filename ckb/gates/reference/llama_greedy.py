#!/usr/bin/env python3
"""OPTIONAL anchor tool: llama.cpp's greedy token ids for raw prompts (via the Python bindings
of the llama-cpp-python sdist, loaded against the libllama.so built by build-llama-cpp.sh).

Run through scripts/anchor/llama-greedy.sh (in a metainfer checkout) (it sets PYTHONPATH and LLAMA_CPP_LIB_PATH).
  llama_greedy.py MODEL N PROMPT                 -> prints the generated ids, comma-separated
  llama_greedy.py MODEL N --record OUT P1 P2 ... -> writes OUT: per prompt a JSON line, an ids line
The prompt is tokenized by llama.cpp with special-token parsing and without BOS (add_bos is
false for qwen2); no chat template is applied. Each step takes the argmax of the last logits
(greedy; ties -> lowest id). Generation stops after N tokens, or right after an end-of-generation
token (which is included). 2 threads, n_ctx 512, batch 512.
--record also evaluates each prompt + continuation as one batch and writes the steps where that
flips llama.cpp's own pick, and a `# near tie:` line: the larger of 0.1 and the largest margin at
such a flip (the gates accept a divergence below it).
"""
import json
import os
import sys

import numpy as np
import llama_cpp


def greedy(llm, prompt, n):
    toks = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    llm.reset()
    llm.eval(toks)
    out, margins = [], []
    vocab = llm._model.vocab
    while len(out) < n:
        # logits of the last evaluated token (logits_all=False: only that row is computed)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()
        tid = int(np.argmax(logits))
        top2 = np.partition(logits, -2)[-2:]
        margins.append(float(top2[1] - top2[0]))
        out.append(tid)
        if llama_cpp.llama_vocab_is_eog(vocab, tid):
            break
        llm.eval([tid])
    return toks, out, margins


def batch_flips(model, toks, ids):
    """Steps where llama.cpp, evaluating prompt + continuation in one batch, argmaxes another
    token than its step-by-step decode picked."""
    llm = batch_flips.llm = getattr(batch_flips, "llm", None) or llama_cpp.Llama(
        model_path=model, n_ctx=512, n_batch=512, n_threads=2, n_threads_batch=2,
        n_gpu_layers=0, logits_all=True, verbose=False)
    seq = list(toks) + list(ids)
    llm.reset()
    llm.eval(seq)
    rows = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(seq), llm.n_vocab()))
    return [i for i, t in enumerate(ids) if int(np.argmax(rows[len(toks) - 1 + i])) != t]


def host_cpu():
    """The cpu model and its widest SIMD (the anchor is built with -march=native)."""
    try:
        info = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return "unknown cpu"
    model = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "unknown cpu")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), [])
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model}, {isa}"


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    model, n = sys.argv[1], int(sys.argv[2])
    llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_batch=512, n_threads=2,
                          n_threads_batch=2, n_gpu_layers=0, logits_all=False, verbose=False)
    if sys.argv[3] == "--record":
        path, prompts = sys.argv[4], sys.argv[5:]
        with open(path, "w", encoding="utf-8") as f:
            f.write("# llama.cpp greedy ids (scripts/anchor/llama-greedy.sh, llama.cpp "
                    f"{llama_cpp.__version__} bindings / vendored llama.cpp), model {model.split('/')[-1]},\n")
            f.write(f"# model bytes: {os.path.getsize(model)} (the greedy_real gate runs on the file of this size)\n")
            f.write(f"# recorded on: {host_cpu()} (llama.cpp's float sums follow the ISA it was built for:\n")
            f.write("# an AVX-512 build and an AVX2 build of the same llama.cpp pick differently at near ties)\n")
            f.write(f"# {n} tokens max, no BOS, no chat template, argmax each step, stop after an EOG token\n")
            f.write("# (included). Format: '#' lines are comments; per case a JSON string line (the raw\n")
            f.write("# prompt) then the generated ids, comma-separated; '# prompt ids:' comments hold\n")
            f.write("# llama.cpp's tokenization of the prompt; '# top1-top2' comments hold llama.cpp's\n")
            f.write("# logit margin at each step (small margins = steps where another engine may diverge).\n")
            recorded = [(p,) + greedy(llm, p, n) for p in prompts]
            # llama.cpp's own resolution: evaluate prompt + continuation as one batch (another
            # code path than the step-by-step decode) and note where its argmax flips its own
            # incremental pick. An engine cannot be held to agree with llama.cpp at a margin
            # where llama.cpp does not agree with itself.
            flips = [batch_flips(model, toks, ids) for (_, toks, ids, _) in recorded]
            flip_margins = [margins[i] for (_, _, _, margins), fl in zip(recorded, flips) for i in fl]
            near_tie = max([0.1] + flip_margins)
            f.write(f"# near tie: {near_tie:.3f} (the larger of 0.1 and the largest margin at which llama.cpp's\n")
            f.write("# batch evaluation of a case flips its own step-by-step pick; an engine may diverge\n")
            f.write("# from llama.cpp at a step whose margin is below it)\n")
            for (p, toks, ids, margins), fl in zip(recorded, flips):
                f.write("# prompt ids: " + ",".join(map(str, toks)) + "\n")
                f.write("# top1-top2 logit margin per step: "
                        + " ".join(f"{m:.3f}" for m in margins) + "\n")
                if fl:
                    f.write("# llama.cpp batch evaluation flips its own pick at steps: "
                            + " ".join(map(str, fl)) + "\n")
                f.write(json.dumps(p, ensure_ascii=True) + "\n")
                f.write(",".join(map(str, ids)) + "\n")
                print(json.dumps(p), ids, file=sys.stderr)
        return
    _, ids, _ = greedy(llm, sys.argv[3], n)
    print(",".join(map(str, ids)))


if __name__ == "__main__":
    main()
