"""Engine.embed: a float32 numpy array of one row per input, of the model's hidden size, unit length
unless asked otherwise, the same for the same input however it is batched; pooling "none" as one
array of rows per input; and clear errors for bad input."""

import math

import numpy
import pytest

import pagoda

from conftest import ticks_while


def norm(v):
    return math.sqrt(sum(float(x) * float(x) for x in v))


def test_one_text_gives_one_unit_vector_of_the_hidden_size(engine):
    vectors = engine.embed("Once upon a time")
    assert isinstance(vectors, numpy.ndarray)
    assert vectors.dtype == numpy.float32
    assert vectors.shape == (1, engine.embedding_size)
    [v] = vectors
    assert len(v) == engine.embedding_size > 0
    assert norm(v) == pytest.approx(1.0, abs=1e-5)
    assert engine.model_pooling == "last"  # stories260K's GGUF names no pooling


def test_the_same_input_gives_the_same_vector_alone_and_batched(engine):
    text = "The little dog ran to the park."
    [alone] = engine.embed(text)
    batch = engine.embed([text, "Lily wanted to play.", engine.tokenize(text), text])
    assert batch.shape == (4, engine.embedding_size)
    assert numpy.array_equal(batch[0], alone)
    assert numpy.array_equal(batch[2], alone)  # the text's ids are the text
    assert numpy.array_equal(batch[3], alone)
    assert not numpy.array_equal(batch[1], alone)


def test_poolings_differ_and_normalize_off_keeps_the_raw_length(engine):
    text = "Tom and Sue went to the sea."
    [mean] = engine.embed(text, pooling="mean")
    [last] = engine.embed(text, pooling="last")
    [model] = engine.embed(text)
    assert not numpy.array_equal(mean, last)
    assert numpy.array_equal(model, last)
    [raw] = engine.embed(text, pooling="last", normalize=False)
    assert abs(norm(raw) - 1.0) > 1e-3
    assert [float(x) / norm(raw) for x in raw] == pytest.approx(last.tolist(), abs=1e-6)


def test_pooling_none_gives_every_tokens_row_and_its_last_is_last_pooling(engine):
    texts = ["Tom and Sue went to the sea.", "Lily"]
    rows = engine.embed(texts, pooling="none")
    assert isinstance(rows, list) and len(rows) == 2
    for text, r in zip(texts, rows):
        assert r.shape == (len(engine.tokenize(text)), engine.embedding_size)
        assert all(norm(row) == pytest.approx(1.0, abs=1e-5) for row in r)
        # The last position's row is what last pooling takes, and every row the mean averages.
        assert numpy.array_equal(r[-1], engine.embed(text, pooling="last")[0])
        raw = engine.embed(text, pooling="none", normalize=False)[0]
        mean = raw.astype(numpy.float64).mean(axis=0)
        mean /= numpy.linalg.norm(mean)
        assert numpy.allclose(mean, engine.embed(text, pooling="mean")[0], atol=1e-6)


def test_bad_input_is_refused_with_a_clear_error(engine):
    with pytest.raises(pagoda.Error, match="no inputs"):
        engine.embed([])
    with pytest.raises(pagoda.Error, match="input 1: the prompt is empty"):
        engine.embed(["fine", ""])
    with pytest.raises(pagoda.Error, match="context length"):
        engine.embed([[5] * (engine.context_length + 1)])
    with pytest.raises(pagoda.Error, match="outside the vocabulary"):
        engine.embed([[1, engine.vocab_size]])
    with pytest.raises(pagoda.Error, match="pooling must be"):
        engine.embed("fine", pooling="max")
    with pytest.raises(pagoda.Error, match="str or a list of token ids"):
        engine.embed([3.5])
    assert engine.metrics().kv_pages_used == 0


@pytest.mark.asyncio
async def test_async_embed_gives_the_sync_vectors_while_the_loop_keeps_running(model, engine):
    aengine = pagoda.AsyncEngine(model, threads=1)
    try:
        texts = ["Once upon a time", "Lily wanted to play.", "The little dog ran to the park."] * 8
        vectors, ticks = await ticks_while(aengine.embed(texts, pooling="mean"))
        assert numpy.array_equal(vectors, engine.embed(texts, pooling="mean"))
        assert ticks > 0, "the loop ran while the inputs were computed"
    finally:
        aengine.close()
