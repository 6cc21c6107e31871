"""The GIL: released while the engine works, taken back by callbacks, whose exceptions reach
their request's caller and end only that request."""

import threading

import pytest

import pagoda
from conftest import PROMPTS

LONG = pagoda.SamplingParams(temperature=0, max_tokens=300, ignore_eos=True)


def test_a_python_thread_keeps_counting_during_generate(engine):
    before = engine.metrics().generated_tokens
    total = len(PROMPTS) * LONG.max_tokens
    generating = True
    seen = []  # generated_tokens as the other thread saw it while generate() ran

    def count():
        while generating:
            seen.append(engine.metrics().generated_tokens - before)

    counter = threading.Thread(target=count)
    counter.start()
    engine.generate(PROMPTS, LONG)
    generating = False
    counter.join()
    # Had generate() held the GIL while it waited, the thread could only have run while the
    # requests were being submitted, before the engine got far.
    assert any(total // 2 <= n < total for n in seen)


def test_an_exception_in_a_callback_reaches_the_caller_and_ends_only_its_request(engine):
    class Boom(Exception):
        pass

    calls = []

    def on_token(delta):
        calls.append(delta.token)
        if len(calls) == 3:
            raise Boom("the third token")

    greedy = pagoda.SamplingParams(temperature=0, max_tokens=32)
    bad = engine.submit(PROMPTS[0], greedy, on_token=on_token)
    good = engine.submit(PROMPTS[1], greedy)
    with pytest.raises(Boom, match="the third token"):
        bad.result()
    assert len(calls) == 3  # never called again
    assert good.result().token_ids == engine.generate(PROMPTS[1], greedy)[0].token_ids


def test_callbacks_see_every_token_while_the_caller_waits(engine):
    deltas = []
    greedy = pagoda.SamplingParams(temperature=0, max_tokens=40)
    # The callback takes the GIL on the engine's thread: had result() kept it, this would time out.
    completion = engine.submit(PROMPTS[2], greedy, on_token=deltas.append).result(timeout=60)
    assert [d.token for d in deltas if d.token >= 0] == completion.token_ids
    assert "".join(d.text for d in deltas) == completion.text


def test_threads_share_one_engine(engine):
    greedy = pagoda.SamplingParams(temperature=0, max_tokens=48)
    expected = [c.token_ids for c in engine.generate(PROMPTS, greedy)]
    results = [None] * len(PROMPTS)

    def run(i):
        results[i] = engine.generate(PROMPTS[i], greedy)[0].token_ids

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected
