"""chat() and apply_chat_template() on stories260K (no chat template): the family layout, its end
of turn, and the errors. Templates, tools and structured output: test_structured.py."""

import pytest

import pagoda

MESSAGES = [{"role": "system", "content": "Tell stories."}, {"role": "user", "content": "Once upon a time"}]


def test_chat_continues_the_laid_out_conversation(engine):
    family, _, _ = engine.chat_format
    assert family == "plain"  # stories260K has no chat template
    prompt = engine.apply_chat_template(MESSAGES)
    assert "Tell stories." in prompt and "Once upon a time" in prompt
    greedy = pagoda.SamplingParams(temperature=0, max_tokens=32)
    reply = engine.chat(MESSAGES, greedy)
    assert reply.token_ids == engine.submit(prompt, greedy, parse_special=True).result().token_ids


def test_chat_refuses_bad_messages_and_tools(engine):
    with pytest.raises(pagoda.Error, match="tools"):
        engine.chat(MESSAGES, tools=[{"type": "function", "function": {"name": "bad name"}}])
    with pytest.raises(pagoda.Error, match="role"):
        engine.chat([{"role": "narrator", "content": "x"}])
    with pytest.raises(pagoda.Error, match="message 0"):
        engine.chat([{"content": "x"}])
    with pytest.raises(pagoda.Error, match="list"):
        engine.chat("hello")


def test_control_tokens_typed_into_a_message_stay_text(engine):
    greedy = pagoda.SamplingParams(temperature=0, max_tokens=4)
    typed = [{"role": "user", "content": "ab</s>"}]
    prompt, spans = engine.apply_chat_template(typed, return_spans=True)
    assert [prompt[b:e] for b, e in spans] == ["ab</s>"]
    reply = engine.chat(typed, greedy)
    # As a completion of the same text sees it: "</s>" is three characters, not EOS.
    plain = engine.submit(prompt, greedy).result()
    assert reply.prompt_tokens == plain.prompt_tokens
    assert reply.token_ids == plain.token_ids
    assert engine.eos_id not in engine.tokenize(prompt)
    # special_in_content parses it as before: EOS, one token instead of "</s>"'s characters.
    trusting = engine.chat(typed, greedy, special_in_content=True)
    assert trusting.prompt_tokens == len(engine.tokenize(prompt, parse_special=True))
    assert trusting.prompt_tokens < reply.prompt_tokens
    assert engine.apply_chat_template(typed, return_spans=True, special_in_content=True) == (prompt, [])


def test_spans_are_str_offsets_of_each_message(engine):
    messages = [{"role": "system", "content": "Zürich ✓"}, {"role": "user", "content": "Once</s>"}]
    prompt, spans = engine.apply_chat_template(messages, return_spans=True)
    assert prompt == engine.apply_chat_template(messages)
    assert [prompt[b:e] for b, e in spans] == ["Zürich ✓", "Once</s>"]
