#!/usr/bin/env python3
"""Reference renderings of a family's default chat template (ckb/models/<family>.toml,
`default_chat_template`: the template an engine uses when the model file has none), as
transformers renders chat templates (Jinja2 with trim_blocks and lstrip_blocks). Deterministic.

    python3 ckb/gates/reference/chat_template_ref.py gemma3 '<bos>' '<eos>' \\
        > ckb/gates/vectors/chat_template_gemma3.json
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


def main():
    family, bos, eos = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(f"ckb/models/{family}.toml", "rb") as f:
        template = tomllib.load(f)["default_chat_template"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    t = env.from_string(template)
    out = {"bos_token": bos, "eos_token": eos, "cases": []}
    for msgs, agp in CASES:
        messages = [{"role": r, "content": c} for r, c in msgs]
        text = t.render(messages=messages, add_generation_prompt=agp, bos_token=bos, eos_token=eos)
        out["cases"].append({"messages": messages, "add_generation_prompt": agp, "expected": text})
    json.dump(out, sys.stdout, ensure_ascii=True, indent=1)
    print()


if __name__ == "__main__":
    main()
