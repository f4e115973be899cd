#!/usr/bin/env python3
"""Reference renderings of a chat template as transformers renders chat templates (Jinja2
with trim_blocks and lstrip_blocks). Deterministic. SOURCE is either a family: its default
template (ckb/models/<family>.toml, `default_chat_template`: the template an engine uses when
the model file has none); or a GGUF file: its tokenizer.chat_template, rendered on CASES plus
FILE_CASES (multi-turn thinking and tool-response turns, which Qwen3's template rewrites,
template variables: a case's "kwargs", enable_thinking for Qwen3's, and function calling: the
tools offered, assistant turns with tool_calls, tool results with their tool_call_id). Messages
are written in OpenAI's form (a call's arguments a string of JSON) and rendered as vLLM and
llama.cpp hand them to templates (the arguments the object they hold), with transformers' tojson.

    python3 ckb/gates/reference/chat_template_ref.py gemma3 '<bos>' '<eos>' \\
        > ckb/gates/vectors/chat_template_gemma3.json
    python3 ckb/gates/reference/chat_template_ref.py ckb/gates/fixtures/tiny-qwen3.gguf \\
        '<|endoftext|>' '<|im_end|>' > ckb/gates/vectors/chat_template_qwen3.json
"""
import json
import sys
import tomllib

import jinja2

def call(id_, name, args):
    """An OpenAI tool call: the arguments a string of JSON."""
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


# An OpenAI function tool, its keys in the order clients send them (non-ASCII on purpose).
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city (\u00b0C or \u00b0F)",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}}


def for_template(m):
    """A message as vLLM and llama.cpp give it to a template: a call's arguments as the object."""
    if "tool_calls" not in m:
        return m
    calls = [c | {"function": c["function"] | {"arguments": json.loads(c["function"]["arguments"])}} for c in m["tool_calls"]]
    return m | {"tool_calls": calls}


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson filter (Jinja2's own sorts keys and escapes HTML)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


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
    ([("user", "weather in Paris?")], True, {"tools": [WEATHER]}),
    ([("user", "weather in Paris?"),
      {"role": "assistant", "content": "", "tool_calls": [call("call_1", "get_weather", {"city": "Paris", "unit": "c"})]},
      {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}], True, {"tools": [WEATHER]}),
    ([("user", "q"),
      {"role": "assistant", "content": "Checking both.", "tool_calls": [call("a", "get_weather", {"city": "Paris"}), call("b", "get_weather", {"city": "Oslo"})]}], False),
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
    env.filters["tojson"] = tojson
    t = env.from_string(template)
    out = {"bos_token": bos, "eos_token": eos, "cases": []}
    for msgs, agp, *kw in cases:
        kwargs = kw[0] if kw else {}
        messages = [m if isinstance(m, dict) else {"role": m[0], "content": m[1]} for m in msgs]
        text = t.render(messages=[for_template(m) for m in messages], add_generation_prompt=agp, bos_token=bos, eos_token=eos, **kwargs)
        case = {"messages": messages, "add_generation_prompt": agp}
        if kwargs:   # the template variables transformers' apply_chat_template(**kwargs) passes
            case["kwargs"] = kwargs
        out["cases"].append(case | {"expected": text})
    json.dump(out, sys.stdout, ensure_ascii=True, indent=1)
    print()


if __name__ == "__main__":
    main()
