"""generate(): the same tokens and text as the C++ engine, and one batch for many prompts."""

import pytest

import pagoda
from conftest import PROMPTS

GREEDY = pagoda.SamplingParams(temperature=0, max_tokens=64)


def test_greedy_output_equals_the_cpp_programs(engine, cpp_greedy):
    cpp = cpp_greedy(PROMPTS, 64)
    got = engine.generate(PROMPTS, GREEDY)  # tokenized as pagoda-generate does: BOS as the model says
    assert [c.token_ids for c in got] == [r["generated_ids"] for r in cpp]
    assert [c.text for c in got] == [r["text"] for r in cpp]
    assert [c.finish_reason for c in got] == [r["finish_reason"] for r in cpp]


def test_text_and_ids_prompts_agree(engine):
    by_text = engine.generate(PROMPTS[0], GREEDY)
    by_ids = engine.generate([engine.tokenize(PROMPTS[0])], GREEDY)
    assert len(by_text) == len(by_ids) == 1
    assert by_text[0].token_ids == by_ids[0].token_ids
    assert by_text[0].prompt_tokens == len(engine.tokenize(PROMPTS[0]))


def test_a_batch_gives_each_prompt_its_own_output(engine):
    together = engine.generate(PROMPTS, GREEDY)
    alone = [engine.generate(p, GREEDY)[0] for p in PROMPTS]
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]


def test_stop_rules(engine):
    full = engine.generate(PROMPTS[0], GREEDY)[0]
    assert full.finish_reason in ("eos", "length")
    stop = full.text[10:14]
    cut = engine.generate(PROMPTS[0], pagoda.SamplingParams(temperature=0, max_tokens=64, stop=stop))[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.index(stop)]
    short = engine.generate(PROMPTS[0], pagoda.SamplingParams(temperature=0, max_tokens=5))[0]
    assert short.finish_reason == "length" and short.token_ids == full.token_ids[:5]


def test_sampling_is_seeded(engine):
    params = pagoda.SamplingParams(temperature=0.9, top_k=40, top_p=0.95, min_p=0.01, repetition_penalty=1.1,
                                   repetition_window=32, seed=7, max_tokens=48)
    first, second = engine.generate([PROMPTS[0], PROMPTS[0]], params)
    assert first.token_ids == second.token_ids
    other = engine.generate(PROMPTS[0], pagoda.SamplingParams(temperature=0.9, seed=8, max_tokens=48))[0]
    assert other.token_ids != first.token_ids


def test_tokenize_and_detokenize(engine):
    ids = engine.tokenize("Once upon a time")
    assert ids[0] == 1 and engine.add_bos  # stories260K's vocabulary puts BOS first
    assert engine.tokenize("Once upon a time", add_bos=False) == ids[1:]
    assert engine.detokenize(ids[1:]).strip() == "Once upon a time"
    assert engine.vocab_size == 512
    assert engine.eos_id in engine.eog_ids
    assert engine.model_lost is None


def test_logprobs_logit_bias_and_min_tokens(engine):
    scored = engine.generate(PROMPTS[0], pagoda.SamplingParams(temperature=0, max_tokens=8, logprobs=3,
                                                               prompt_logprobs=1))[0]
    assert len(scored.logprobs) == len(scored.token_ids) == 8
    for token, lp in zip(scored.token_ids, scored.logprobs):
        assert len(lp.top) == 3 and lp.top[0].token == token and lp.logprob == lp.top[0].logprob <= 0
    assert len(scored.prompt_logprobs) == scored.prompt_tokens - 1
    first = scored.token_ids[0]
    banned = engine.generate(PROMPTS[0], pagoda.SamplingParams(temperature=0, max_tokens=8, logit_bias={first: -100}))[0]
    assert banned.token_ids[0] != first
    streamed = [d for d in engine.stream(PROMPTS[0], pagoda.SamplingParams(temperature=0, max_tokens=8, logprobs=0))
                if d.token >= 0]
    assert [d.logprobs.logprob for d in streamed] == [lp.logprob for lp in scored.logprobs]
    eos = engine.eos_id
    late = engine.generate(PROMPTS[0], pagoda.SamplingParams(temperature=0, max_tokens=40, min_tokens=40))[0]
    assert eos not in late.token_ids[:-1] and len(late.token_ids) == 40


def test_a_disk_tier_outlives_the_engine_and_changes_no_output(model, tmp_path):
    prompts = [" ".join(PROMPTS) + " " + p for p in PROMPTS]
    with pagoda.Engine(model, threads=1, prefix_caching=False) as plain:
        want = [c.token_ids for c in plain.generate(prompts, GREEDY)]
    with pagoda.Engine(model, threads=1, kv_disk=tmp_path / "kv", kv_disk_size=64 << 20) as first:
        assert [c.token_ids for c in first.generate(prompts, GREEDY)] == want
    with pagoda.Engine(model, threads=1, kv_disk=tmp_path / "kv") as second:
        assert second.metrics().kv_disk_pages > 0
        assert [c.token_ids for c in second.generate(prompts, GREEDY)] == want
        m = second.metrics()
        assert m.kv_disk_hit_tokens > 0 and m.kv_disk_read_bytes > 0 and m.kv_disk_damaged == 0


def test_a_bad_disk_tier_setting_is_an_error(model, tmp_path):
    with pytest.raises(pagoda.Error, match="KV disk tier"):
        pagoda.Engine(model, kv_disk=tmp_path / "kv", kv_disk_size=10)
    with pytest.raises(pagoda.Error):
        pagoda.Engine(model, kv_disk=tmp_path / "kv", kv_disk_size=-1)
