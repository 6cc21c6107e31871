"""stream(): the deltas add up to generate()'s output, and leaving the loop cancels the request."""

import pytest

import pagoda
from conftest import PROMPTS, every_page_back, wait_until


def test_concatenated_stream_equals_generate(engine):
    for params in (pagoda.SamplingParams(temperature=0, max_tokens=80),
                   pagoda.SamplingParams(temperature=0.8, seed=3, max_tokens=80)):
        for prompt in PROMPTS:
            deltas = list(engine.stream(prompt, params))
            whole = engine.generate(prompt, params)[0]
            assert "".join(d.text for d in deltas) == whole.text
            assert [d.token for d in deltas if d.token >= 0] == whole.token_ids


def test_text_held_back_for_a_stop_string_comes_out_at_the_end(engine):
    greedy = pagoda.SamplingParams(temperature=0, max_tokens=40)
    text = engine.generate(PROMPTS[0], greedy)[0].text
    # A stop string that never appears: the stream holds back its length - 1 bytes until the end.
    params = pagoda.SamplingParams(temperature=0, max_tokens=40, stop=["@@@@@@@@"])
    deltas = list(engine.stream(PROMPTS[0], params))
    assert "".join(d.text for d in deltas) == text
    assert deltas[-1].token == -1 and deltas[-1].text == text[-7:]


def leave_by_break(stream):
    for _ in stream:
        break


def leave_by_close(stream):
    next(stream)
    stream.close()


@pytest.mark.parametrize("leave", [leave_by_break, leave_by_close])
def test_leaving_a_stream_cancels_its_request_and_frees_its_pages(engine, leave):
    long = pagoda.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    background = [engine.submit(p, long) for p in PROMPTS]  # a few hundred steps of work
    before = engine.metrics()
    leave(engine.stream("Once upon a time there was", long))
    # The stream's request ends within a step or two, while the background requests still run
    # (had it not been cancelled, it would have ended after them: it started later, as long).
    m = wait_until(lambda: (m := engine.metrics()).finished > before.finished and m, "the stream's request ends")
    assert m.finished == before.finished + 1
    assert not any(h.done() for h in background)
    assert all(h.result().finish_reason == "length" for h in background)
    every_page_back(engine)


def test_a_failed_stream_raises(engine):
    stream = engine.stream(PROMPTS[0], adapter="nobody-loaded-this")
    with pytest.raises(pagoda.Error, match="nobody-loaded-this"):
        next(stream)
