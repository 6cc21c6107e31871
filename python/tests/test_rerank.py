"""Engine.rerank: a reranker's scores, one per document in order, equal to embedding each pair as
rerank_tokens lays it out with pooling "rank"; the same awaited on AsyncEngine; a model that is
not a reranker, and bad arguments, refused clearly; embedding_only. The rerankers are a bert and a
qwen3 (Qwen3-Reranker's layout, whose scores are probabilities) written by pagoda-synth."""

import pathlib
import subprocess

import pytest

import pagoda

from conftest import BIN, SHARED, ticks_while

DOCUMENTS = ["the cat sat on the mat", "a dog ran in the park", "", "cats sit on mats"]


@pytest.fixture(scope="session")
def reranker_path(tmp_path_factory) -> str:
    synth = BIN / "pagoda-synth"
    if not synth.exists():
        pytest.skip(f"no pagoda-synth in {BIN} (build the programs, or set PAGODA_BIN)")
    path = pathlib.Path(tmp_path_factory.mktemp("rerank")) / "bert-rank.gguf"
    subprocess.run([str(synth), "-o", str(path), "--arch", "bert", "--pooling", "rank", "--dim", "64", "--heads", "4",
                    "--ffn", "128", "--layers", "2", "--vocab", "600", "--context", "128", "--seed", "3"],
                   check=True, capture_output=True)
    return str(path)


def open_reranker(path: str) -> pagoda.Engine:
    return pagoda.Engine(path, threads=1)


def test_a_decoder_is_not_a_reranker_and_says_so(engine):
    assert engine.embedding_only is False
    with pytest.raises(pagoda.Error, match="not a reranker"):
        engine.rerank("where is the cat", ["on the mat"])
    # "rank" is a pooling name; this model has no rank head for it.
    with pytest.raises(pagoda.Error, match="rank head"):
        engine.embed("the cat", pooling="rank")
    assert engine.metrics().kv_pages_used == 0


def test_bad_arguments_are_refused_before_anything_runs(engine):
    with pytest.raises(pagoda.Error, match="no documents"):
        engine.rerank("q", [])
    with pytest.raises(pagoda.Error, match="query .* is a str"):
        engine.rerank(5, ["a"])
    with pytest.raises(pagoda.Error, match="not one str"):
        engine.rerank("q", "a document")
    with pytest.raises(pagoda.Error, match="document 1 is a str"):
        engine.rerank("q", ["a", 2])
    with pytest.raises(pagoda.Error, match="'rank'"):
        engine.embed("x", pooling="max")  # the message lists every pooling


def test_scores_are_each_pairs_rank_embedding_in_document_order(reranker_path):
    with open_reranker(reranker_path) as e:
        assert e.embedding_only
        assert e.model_pooling == "rank"
        scores = e.rerank("where did the cat sit", DOCUMENTS)
        assert len(scores) == len(DOCUMENTS)
        assert all(isinstance(s, float) for s in scores)
        pairs = [e.rerank_tokens("where did the cat sit", d) for d in DOCUMENTS]
        assert [v[0] for v in e.embed(pairs, pooling="rank", normalize=False)] == scores
        # One document alone scores as it does among others.
        assert e.rerank("where did the cat sit", [DOCUMENTS[3]]) == [scores[3]]


def test_an_encoder_refuses_generation_and_a_too_long_pair(reranker_path):
    with open_reranker(reranker_path) as e:
        with pytest.raises(pagoda.Error, match="embedding model"):
            e.generate("Once upon a time")
        with pytest.raises(pagoda.Error, match="context length"):
            e.rerank("q", ["short", "word " * 400])
        assert e.metrics().kv_pages_used == 0


@pytest.mark.asyncio
async def test_async_rerank_gives_the_sync_scores_while_the_loop_keeps_running(reranker_path):
    with open_reranker(reranker_path) as e:
        want = e.rerank("where did the cat sit", DOCUMENTS * 8)
    aengine = pagoda.AsyncEngine(reranker_path, threads=1)
    try:
        scores, ticks = await ticks_while(aengine.rerank("where did the cat sit", DOCUMENTS * 8))
        assert scores == want
        assert ticks > 0, "the loop ran while the pairs were scored"
    finally:
        aengine.close()


def test_a_qwen3_reranker_gives_probabilities_and_still_generates(tmp_path):
    synth = BIN / "pagoda-synth"
    vocab = SHARED / "vocab" / "ggml-vocab-qwen2.gguf"
    if not synth.exists() or not vocab.exists():
        pytest.skip(f"needs {synth} and {vocab}")
    path = tmp_path / "qwen3-rerank.gguf"
    subprocess.run([str(synth), "-o", str(path), "--arch", "qwen3", "--pooling", "rank", "--vocab", str(vocab),
                    "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "128", "--layers", "2", "--tied",
                    "--context", "256"], check=True, capture_output=True)
    with pagoda.Engine(str(path), threads=1) as e:
        assert e.model_pooling == "rank"
        assert e.rerank_probabilities and not e.embedding_only
        scores = e.rerank("where did the cat sit", DOCUMENTS)
        assert all(0.0 < s < 1.0 for s in scores)
        pairs = [e.rerank_tokens("where did the cat sit", d) for d in DOCUMENTS]
        assert [v[0] for v in e.embed(pairs, pooling="rank", normalize=False)] == scores
        # The query's markup is text: the prompt's own turn ends stay the only ones.
        im_end = e.tokenize("<|im_end|>", parse_special=True)
        assert len(im_end) == 1
        assert e.rerank_tokens("q<|im_end|>", "d").count(im_end[0]) == e.rerank_tokens("q", "d").count(im_end[0]) == 2
        assert len(e.generate("Hello", pagoda.SamplingParams(max_tokens=3))[0].token_ids) == 3
