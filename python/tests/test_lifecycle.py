"""Opening, closing and refusing: close() twice, pending requests resolved, pagoda.Error for bad input."""

import pytest

import pagoda
from conftest import PROMPTS

GREEDY = pagoda.SamplingParams(temperature=0, max_tokens=16)


def test_close_twice_and_use_after_close(model):
    engine = pagoda.Engine(model, threads=1)
    long = pagoda.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    handles = [engine.submit(p, long) for p in PROMPTS]
    stream = engine.stream(PROMPTS[0], long)
    engine.close()
    engine.close()
    assert engine.closed
    reasons = {h.result(timeout=60).finish_reason for h in handles}
    assert reasons <= {"cancelled", "length"} and "cancelled" in reasons
    assert all(isinstance(d, pagoda.Delta) for d in stream)  # the stream ends
    for call in (lambda: engine.submit(PROMPTS[0]), lambda: engine.generate(PROMPTS[0]), engine.metrics,
                 lambda: engine.tokenize("x")):
        with pytest.raises(pagoda.Error, match="closed"):
            call()


def test_context_manager_closes(model):
    with pagoda.Engine(model, threads=1) as engine:
        assert engine.generate(PROMPTS[0], GREEDY)[0].token_ids
    assert engine.closed


@pytest.mark.parametrize("kwargs, message", [
    ({"kv_cache_type": "f8"}, "kv_cache_type"),
    ({"n_ctx": 0}, "n_ctx"),
    ({"threads": -1}, "threads"),
    ({"preemption": "later"}, "preemption"),
    ({"max_running": "many"}, "bad engine setting"),
])
def test_bad_settings(model, kwargs, message):
    with pytest.raises(pagoda.Error, match=message):
        pagoda.Engine(model, **kwargs)


def test_a_missing_model():
    with pytest.raises(pagoda.Error, match="no-such-model.gguf"):
        pagoda.Engine("/nonexistent/no-such-model.gguf")


def test_n_ctx_sizes_the_kv_cache(model):
    with pagoda.Engine(model, threads=1, n_ctx=100) as engine:
        assert engine.metrics().kv_pages_total == 7  # 100 tokens in pages of 16
        with pytest.raises(pagoda.Error, match="KV pages"):
            engine.submit(PROMPTS[0], pagoda.SamplingParams(max_tokens=200))


@pytest.mark.parametrize("prompt, params, message", [
    ("", None, "empty"),
    ([], None, "empty"),
    ([1, 100000], None, "outside the vocabulary"),
    (3.5, None, "a prompt is"),
    (PROMPTS[0], pagoda.SamplingParams(max_tokens=100000), "context length"),
    (PROMPTS[0], {"temperature": 0}, "SamplingParams"),
])
def test_bad_requests(engine, prompt, params, message):
    with pytest.raises(pagoda.Error, match=message):
        engine.submit(prompt, params)
    assert engine.metrics().queued == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"top_p": 0.0}, "top_p"),
    ({"temperature": -1}, "temperature"),
    ({"seed": -1}, "seed"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"top_k": "ten"}, "top_k"),
    ({"stop": [1]}, "stop"),
    ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"logit_bias": {1: 500}}, "logit_bias"),
    ({"logit_bias": {"a": 1}}, "logit_bias"),
    ({"min_tokens": -1}, "min_tokens"),
    ({"logprobs": 21}, "logprobs"),
])
def test_bad_sampling_params(kwargs, message):
    with pytest.raises(pagoda.Error, match=message):
        pagoda.SamplingParams(**kwargs)


def test_sampling_params_mirror_the_cpp_fields():
    params = pagoda.SamplingParams()
    assert (params.temperature, params.top_k, params.top_p, params.min_p, params.repetition_penalty,
            params.repetition_window, params.presence_penalty, params.frequency_penalty, params.logit_bias,
            params.min_tokens, params.seed) == (1.0, 0, 1.0, 0.0, 1.0, 64, 0.0, 0.0, (), 0, 0)
    assert params.stop == () and pagoda.SamplingParams(stop="x").stop == ("x",)
    assert pagoda.SamplingParams(logit_bias={5: -100}).logit_bias == ((5, -100),)
