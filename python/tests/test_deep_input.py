"""Deeply nested input (a JSON Schema dict or text, a GBNF grammar, tools, messages, chat template
kwargs) raises pagoda.Error naming the limit, never RecursionError or a crash, also on a thread
with a 256 KB stack; input under the limit still works."""

import threading

import pytest

import pagoda

DEEP = 100_000
LIMIT = "nested deeper than 128 levels"


def nested_dict(depth: int, leaf: object) -> object:
    """{"type": "object", "properties": {"a": ...}} `depth` times around `leaf`, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = {"type": "object", "properties": {"a": value}}
    return value


def nested_list(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def on_small_stack(fn) -> BaseException:
    """What fn raised on a thread with a 256 KB stack (None if it returned)."""
    raised: list = [None]

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 -- handed back to the test
            raised[0] = e

    old = threading.stack_size(256 * 1024)
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    return raised[0]


def expect_refused(fn, match: str = LIMIT):
    with pytest.raises(pagoda.Error, match=match):
        fn()
    e = on_small_stack(fn)
    assert isinstance(e, pagoda.Error) and match in str(e), repr(e)


def test_a_deep_json_schema_dict_is_refused():
    deep = nested_dict(DEEP, {})
    expect_refused(lambda: pagoda.SamplingParams(json_schema=deep))
    expect_refused(lambda: pagoda.SamplingParams(json_schema={"anyOf": nested_list(DEEP)}))


def test_a_cyclic_schema_dict_is_refused():
    cyclic: dict = {"type": "object"}
    cyclic["properties"] = {"a": cyclic, "b": cyclic}
    expect_refused(lambda: pagoda.SamplingParams(json_schema=cyclic))


def test_deep_schema_and_grammar_text_are_refused_by_the_engine(engine):
    deep_text = '{"items": ' * DEEP + "{}" + "}" * DEEP
    expect_refused(lambda: engine.generate("Once", pagoda.SamplingParams(json_schema=deep_text)),
                   "json schema: JSON " + LIMIT)
    expect_refused(lambda: engine.generate("Once", pagoda.SamplingParams(grammar="root ::= " + "(" * 50_000 + '"a"' + ")" * 50_000)),
                   "nested deeper than 128 levels of parentheses")


def test_deep_chat_fields_are_refused(engine):
    hi = [{"role": "user", "content": "hi"}]
    expect_refused(lambda: engine.apply_chat_template(hi, chat_template_kwargs={"x": nested_list(DEEP)}), "the chat: JSON " + LIMIT)
    tools = [{"type": "function", "function": {"name": "f", "parameters": nested_dict(DEEP, {})}}]
    expect_refused(lambda: engine.apply_chat_template(hi, tools=tools), "the chat: JSON " + LIMIT)
    deep_content = [{"role": "user", "content": [{"type": "text", "text": "hi", "x": nested_list(DEEP)}]}]
    expect_refused(lambda: engine.apply_chat_template(deep_content), "the chat: JSON " + LIMIT)
    # The same body as text, past the Python check, is refused by the engine's own bounded parse.
    body = '{"messages": [{"role": "user", "content": ' + "[" * DEEP + "]" * DEEP + "}]}"
    expect_refused(lambda: engine._core.prepare_chat(body, True, False, False), "the chat: JSON " + LIMIT)


def test_a_schema_under_the_limit_still_constrains(engine):
    schema = nested_dict(40, {"type": "integer", "minimum": 0, "maximum": 9})
    level = schema
    while "properties" in level:
        level["required"] = ["a"]
        level = level["properties"]["a"]
    params = pagoda.SamplingParams(temperature=1, seed=3, max_tokens=400, json_schema=schema)
    text = engine.generate("Once", params)[0].text
    assert "".join(text.split()).startswith('{"a":{"a":{"a":'), text
