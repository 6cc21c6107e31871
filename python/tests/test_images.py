"""Images in requests (``Engine(mmproj=...)``, ``images=``, ``image_url`` parts in chat) on a tiny
LLaVA-style pair pagoda-synth writes: an image gives the same tokens as bytes or as a path, at a
marker or at a position, in every kind of call; another image gives other tokens; bad images,
missing files and engines without a projector are refused saying why."""

import asyncio
import base64
import random
import struct
import zlib

import pytest

import pagoda
from conftest import every_page_back

PROMPT = "A picture: <__image__> What is in it?"
GREEDY = pagoda.SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, logprobs=0)
ROWS = 16  # the tiny projector's rows for any image: 56 pixels a side in 14-pixel patches


def png(width: int, height: int, seed: int) -> bytes:
    """A PNG of smooth RGB pixels drawn from `seed` (smooth, so resizing has something to average)."""
    rng = random.Random(seed)
    r0, g0, b0 = (rng.randrange(200) for _ in range(3))
    rows = b"".join(b"\0" + bytes(v for x in range(width) for v in ((r0 + 3 * x) % 256, (g0 + 5 * y) % 256,
                                                                   (b0 + x * y) % 256)) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def data_url(image: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(image).decode()


def logprobs(completion) -> list:
    return [lp.logprob for lp in completion.logprobs]


@pytest.fixture(scope="session")
def llava(program, tmp_path_factory):
    """A random Llama 96 wide and a random CLIP projector (LLaVA's MLP) into it."""
    folder = tmp_path_factory.mktemp("llava")
    model, mmproj = folder / "lm.gguf", folder / "mmproj.gguf"
    program("pagoda-synth", "--dim", "96", "--layers", "2", "--heads", "8", "--kv-heads", "2", "--ffn", "160",
            "--vocab", "1000", "--context", "256", "--seed", "5", "-o", str(model))
    program("pagoda-synth", "--mmproj", "llava", "--seed", "9", "-o", str(mmproj))
    return str(model), str(mmproj)


@pytest.fixture(scope="module")
def vision(llava):
    model, mmproj = llava
    with pagoda.Engine(model, mmproj=mmproj, threads=1) as engine:
        assert engine.takes_images
        yield engine


def test_an_image_as_bytes_or_as_a_path_gives_the_same_tokens(vision, tmp_path):
    image = png(40, 30, 1)
    path = tmp_path / "a.png"
    path.write_bytes(image)
    by_bytes = vision.submit(PROMPT, GREEDY, images=[image]).result()
    by_path = vision.submit(PROMPT, GREEDY, images=[path]).result()
    by_str = vision.generate(PROMPT, GREEDY, images=[str(path)])[0]
    assert by_bytes.token_ids == by_path.token_ids == by_str.token_ids
    assert logprobs(by_bytes) == logprobs(by_path) == logprobs(by_str)
    # The image's rows are prompt tokens, between the text before its marker and the text after.
    text = len(vision.tokenize("A picture: ")) + len(vision.tokenize(" What is in it?", add_bos=False))
    assert by_bytes.prompt_tokens == text + ROWS


def test_another_image_gives_another_answer(vision):
    first = vision.submit(PROMPT, GREEDY, images=[png(40, 30, 1)]).result()
    second = vision.submit(PROMPT, GREEDY, images=[png(40, 30, 2)]).result()
    assert first.prompt_tokens == second.prompt_tokens  # the same layout: only the pixels differ
    assert logprobs(first)[0] != logprobs(second)[0]


def test_a_marker_of_ones_own_a_position_in_ids_a_stream_and_a_batch_place_it_alike(vision):
    image = png(33, 47, 3)
    want = vision.submit(PROMPT, GREEDY, images=[image]).result()
    marked = vision.submit("A picture: [img] What is in it?", GREEDY, images=[image], image_marker="[img]").result()
    before = vision.tokenize("A picture: ")
    ids = before + vision.tokenize(" What is in it?", add_bos=False)
    positioned = vision.submit(ids, GREEDY, images=[(image, len(before))]).result()
    streamed = [d.token for d in vision.stream(PROMPT, GREEDY, images=[image]) if d.token >= 0]
    batch = vision.generate([PROMPT, "Another: <__image__>"], GREEDY, images=[image])
    assert marked.token_ids == positioned.token_ids == streamed == batch[0].token_ids == want.token_ids
    assert logprobs(marked) == logprobs(positioned) == logprobs(want)


def test_the_async_engine_takes_images(llava, vision):
    model, mmproj = llava
    image = png(40, 30, 5)

    async def run():
        async with pagoda.AsyncEngine(model, mmproj=mmproj, threads=1) as engine:
            done = await engine.generate(PROMPT, GREEDY, images=[image])
            streamed = [d.token async for d in engine.stream(PROMPT, GREEDY, images=[image]) if d.token >= 0]
            return done[0].token_ids, streamed

    want = vision.submit(PROMPT, GREEDY, images=[image]).result().token_ids
    assert asyncio.run(run()) == (want, want)


def test_a_chat_image_url_part_stands_where_the_part_is(vision):
    image = png(40, 30, 6)
    parts = [{"type": "text", "text": "A picture: "}, {"type": "image_url", "image_url": {"url": data_url(image)}},
             {"type": "text", "text": " What is in it?"}]
    messages = [{"role": "user", "content": parts}]
    assert vision.chat_format[0] == "plain"  # no template: the conversation is the user's text
    assert vision.apply_chat_template(messages) == PROMPT
    reply = vision.chat(messages, GREEDY)
    _, stop_ids, stop_strings = vision.chat_format
    direct = vision.submit(PROMPT, GREEDY.with_stops(stop_strings, stop_ids), images=[image]).result()
    assert reply.prompt_tokens == direct.prompt_tokens
    assert reply.token_ids == direct.token_ids
    assert logprobs(reply) == logprobs(direct)
    # Typed text is never an image: the chat's marker is drawn at random, not "<__image__>".
    typed = [{"role": "user", "content": [{"type": "text", "text": "<__image__>"}, parts[1]]}]
    assert vision.chat(typed, GREEDY).prompt_tokens == len(vision.tokenize("<__image__>")) + ROWS


def test_bad_images_are_refused_saying_what_is_wrong(vision, tmp_path):
    image = png(40, 30, 7)
    with pytest.raises(pagoda.Error, match="image 0"):
        vision.submit(PROMPT, GREEDY, images=[image[: len(image) // 2]])
    with pytest.raises(pagoda.Error, match="GIF"):
        vision.submit(PROMPT, GREEDY, images=[b"GIF89a\x01\x00\x01\x00"])
    with pytest.raises(pagoda.Error, match="2 image markers"):
        vision.submit(PROMPT + " <__image__>", GREEDY, images=[image])
    missing = tmp_path / "no-such.png"
    with pytest.raises(FileNotFoundError, match="no-such.png"):
        vision.submit(PROMPT, GREEDY, images=[missing])
    with pytest.raises(pagoda.Error, match="a list of images"):
        vision.submit(PROMPT, GREEDY, images=image)
    with pytest.raises(pagoda.Error, match=r"images\[0\] is an image file's bytes or its path"):
        vision.submit(PROMPT, GREEDY, images=[42])
    remote = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]
    with pytest.raises(pagoda.Error, match="fetches no images"):
        vision.chat(remote, GREEDY)
    every_page_back(vision)  # nothing refused was queued


def test_an_engine_without_a_projector_refuses_images(llava):
    model, _ = llava
    with pagoda.Engine(model, threads=1) as engine:
        assert not engine.takes_images
        with pytest.raises(pagoda.Error, match="takes no images"):
            engine.submit(PROMPT, GREEDY, images=[png(40, 30, 8)])
        parts = [{"type": "image_url", "image_url": {"url": data_url(png(40, 30, 8))}}]
        with pytest.raises(pagoda.Error, match="takes no images"):
            engine.chat([{"role": "user", "content": parts}], GREEDY)
