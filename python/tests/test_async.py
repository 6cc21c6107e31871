"""AsyncEngine: streams and results handed to the event loop, which never blocks."""

import asyncio

import pytest

import pagoda
from conftest import PROMPTS, every_page_back, wait_until

GREEDY = pagoda.SamplingParams(temperature=0, max_tokens=96)


@pytest.fixture
def aengine(model):
    engine = pagoda.AsyncEngine(model, threads=1)
    yield engine
    engine.close()


@pytest.mark.asyncio
async def test_32_streams_finish_while_the_loop_keeps_ticking(aengine):
    ticks = 0
    seen = []  # the tick count at each delta

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def one(prompt):
        pieces = []
        async for delta in aengine.stream(prompt, GREEDY):
            pieces.append(delta.text)
            seen.append(ticks)
        return "".join(pieces)

    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(32)]
    tick_task = asyncio.create_task(ticker())
    texts = await asyncio.gather(*(one(p) for p in prompts))
    tick_task.cancel()
    expected = await aengine.generate(prompts, GREEDY)
    assert texts == [c.text for c in expected]
    # The ticker ran between the deltas: the loop was free while the engine worked.
    assert len(seen) > 32 and max(seen) > min(seen)


@pytest.mark.asyncio
async def test_await_results_match_the_sync_engine(aengine, model):
    got = await aengine.generate(PROMPTS, GREEDY)
    with pagoda.Engine(model, threads=1) as engine:
        assert [c.token_ids for c in got] == [c.token_ids for c in engine.generate(PROMPTS, GREEDY)]
    handle = aengine.submit(PROMPTS[0], GREEDY)
    completion = await handle.result()
    assert handle.done() and completion.token_ids == got[0].token_ids


@pytest.mark.asyncio
async def test_cancelling_the_task_cancels_the_request(aengine):
    long = pagoda.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    handle = aengine.submit(PROMPTS[0], long)
    task = asyncio.create_task(handle.result())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await asyncio.to_thread(handle._handle.result)).finish_reason == "cancelled"
    await asyncio.to_thread(every_page_back, aengine)


@pytest.mark.asyncio
async def test_cancelling_a_streaming_task_cancels_the_request(aengine):
    long = pagoda.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    first = asyncio.Event()

    async def consume():
        async for _ in aengine.stream(PROMPTS[0], long):
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    m = await asyncio.to_thread(wait_until, lambda: (m := aengine.metrics()).finished == 1 and m, "the request ends")
    assert m.generated_tokens < 400
    await asyncio.to_thread(every_page_back, aengine)


@pytest.mark.asyncio
async def test_async_errors(aengine):
    with pytest.raises(pagoda.Error, match="empty"):
        aengine.submit("", GREEDY)
    with pytest.raises(pagoda.Error, match="no-such-adapter"):
        await aengine.submit(PROMPTS[0], GREEDY, adapter="no-such-adapter").result()
    with pytest.raises(pagoda.Error, match="no-such-adapter"):
        async for _ in aengine.stream(PROMPTS[0], GREEDY, adapter="no-such-adapter"):
            pass


@pytest.mark.asyncio
async def test_closing_resolves_pending_requests(model):
    engine = pagoda.AsyncEngine(model, threads=1)
    long = pagoda.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    handles = [engine.submit(p, long) for p in PROMPTS]
    engine.close()
    reasons = {(await h.result()).finish_reason for h in handles}
    assert reasons <= {"cancelled", "length"} and "cancelled" in reasons
    engine.close()
