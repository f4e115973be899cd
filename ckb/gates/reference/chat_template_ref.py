#!/usr/bin/env python3
"""Reference renderings of a chat template as transformers renders chat templates (Jinja2
with trim_blocks and lstrip_blocks). Deterministic. SOURCE is either a family: its default
template (ckb/models/<family>.toml, `default_chat_template`: the template an engine uses when
the model file has none); or a GGUF file: its tokenizer.chat_template, rendered on CASES plus
FILE_CASES (multi-turn thinking and tool-response turns, which Qwen3's template rewrites, and
template variables: a case's "kwargs", enable_thinking for Qwen3's).

    python3 ckb/gates/reference/chat_template_ref.py gemma3 '<bos>' '<eos>' \\
        > ckb/gates/vectors/chat_template_gemma3.json
    python3 ckb/gates/reference/chat_template_ref.py ckb/gates/fixtures/tiny-qwen3.gguf \\
        '<|endoftext|>' '<|im_end|>' > ckb/gates/vectors/chat_template_qwen3.json
"""
import json
import sys
import tomllib

import jinja2

CASES = [
    ([("user", "hi")], True),
    ([("user", "hi")], False),
    ([("system", "You are a coder."), ("user", "Write hello world in C.")], True),
    ([("user", "hi"), ("assistant", "Hello! How can I help?"), ("user", "2+2?")], True),
    ([("system", "sys"), ("user", "a"), ("assistant", "  b  "), ("user", "c")], True),
    ([("user", "unicode \u2713 \u65e5\u672c \"quotes\" <b>html</b> {{ not template }} \n\n newlines  ")], True),
]

FILE_CASES = [
    ([("user", "q"), ("assistant", "<think>\nplan it\n</think>\n\nthe answer")], False),
    ([("user", "q"), ("assistant", "<think>\nplan it\n</think>\n\nthe answer"), ("user", "and then?")], True),
    ([("system", "sys"), ("user", "a"), ("system", "mid system"), ("assistant", ""), ("user", "b")], True),
    ([("user", "call"), ("assistant", "x"), ("tool", "result1"), ("tool", "result2"), ("user", "ok")], True),
    ([("user", "call"), ("assistant", "x"), ("tool", "result1"), ("assistant", "<think>\nr\n</think>\ndone")], False),
    ([("user", "<tool_response>\nlooks like one\n</tool_response>")], True),
    ([("user", "q")], True, {"enable_thinking": False}),
    ([("user", "q")], True, {"enable_thinking": True}),
]


def main():
    source, bos, eos = sys.argv[1], sys.argv[2], sys.argv[3]
    cases = CASES
    if source.endswith(".gguf"):
        import gguf
        template = gguf.GGUFReader(source).fields["tokenizer.chat_template"].contents()
        cases = CASES + FILE_CASES
    else:
        with open(f"ckb/models/{source}.toml", "rb") as f:
            template = tomllib.load(f)["default_chat_template"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    t = env.from_string(template)
    out = {"bos_token": bos, "eos_token": eos, "cases": []}
    for msgs, agp, *kw in cases:
        kwargs = kw[0] if kw else {}
        messages = [{"role": r, "content": c} for r, c in msgs]
        text = t.render(messages=messages, add_generation_prompt=agp, bos_token=bos, eos_token=eos, **kwargs)
        case = {"messages": messages, "add_generation_prompt": agp}
        if kwargs:   # the template variables transformers' apply_chat_template(**kwargs) passes
            case["kwargs"] = kwargs
        out["cases"].append(case | {"expected": text})
    json.dump(out, sys.stdout, ensure_ascii=True, indent=1)
    print()


if __name__ == "__main__":
    main()
