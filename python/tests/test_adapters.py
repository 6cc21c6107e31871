"""LoRA adapters from Python: loaded at start or later, the same output as the C++ programs."""

import pathlib

import pytest

import pagoda
from conftest import PROMPTS

GREEDY = pagoda.SamplingParams(temperature=0, max_tokens=48)


@pytest.fixture(scope="module")
def adapter(model, program, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("lora") / "stories-lora.gguf"
    program("pagoda-synth", "--lora-for", model, "--rank", "4", "--alpha", "16", "--seed", "5", "-o", str(path))
    return str(path)


def test_adapter_output_equals_the_cpp_programs(model, adapter, cpp_greedy):
    cpp = cpp_greedy(PROMPTS[:2], 48, "--lora", f"tales={adapter}", "--adapter", "tales")
    with pagoda.Engine(model, threads=1, adapters={"tales": adapter}) as engine:
        got = engine.generate(PROMPTS[:2], GREEDY, adapter="tales")
        base = engine.generate(PROMPTS[:2], GREEDY)
    assert [c.token_ids for c in got] == [r["generated_ids"] for r in cpp]
    assert [c.token_ids for c in got] != [c.token_ids for c in base]


def test_load_and_unload(engine, adapter):
    engine.load_adapter("a", pathlib.Path(adapter), 0.5)
    with pytest.raises(pagoda.Error, match="'a'|already"):
        engine.load_adapter("a", adapter)
    assert engine.generate(PROMPTS[0], GREEDY, adapter="a")[0].finish_reason in ("eos", "length")
    engine.unload_adapter("a")
    with pytest.raises(pagoda.Error, match="a"):
        engine.generate(PROMPTS[0], GREEDY, adapter="a")
    with pytest.raises(pagoda.Error):
        engine.unload_adapter("a")
    assert engine.metrics().adapter_swaps >= 1


def test_a_bad_adapter_file_is_refused(engine, tmp_path, model):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf")
    with pytest.raises(pagoda.Error, match="junk.gguf"):
        engine.load_adapter("junk", junk)
    with pytest.raises(pagoda.Error):
        pagoda.Engine(model, threads=1, adapters={"junk": str(junk)})
