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
