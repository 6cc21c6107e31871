"""pagoda from Python: a batch, a stream, and concurrent async streams on one engine.

    PYTHONPATH=build/release/python python3 python/examples/quickstart.py ../shared/models/stories260K/stories260K.gguf
"""

import asyncio
import sys

import pagoda


def main(model: str) -> None:
    params = pagoda.SamplingParams(temperature=0.8, top_p=0.95, seed=42, max_tokens=48)
    with pagoda.Engine(model, threads=2) as engine:
        # Every prompt in one continuous batch.
        for c in engine.generate(["Once upon a time", "The little dog"], params):
            print(f"[{c.finish_reason}] {c.text!r}")
        # Tokens as they are made; leaving the loop early would cancel the request.
        for delta in engine.stream("Lily wanted to", params):
            print(delta.text, end="", flush=True)
        print()
        print(engine.metrics())

    async def story(aengine: pagoda.AsyncEngine, prompt: str) -> str:
        return "".join([delta.text async for delta in aengine.stream(prompt, params)])

    async def many() -> None:
        async with await pagoda.AsyncEngine.load(model, threads=2) as aengine:
            stories = await asyncio.gather(*(story(aengine, f"Story {i}:") for i in range(8)))
            print(f"{len(stories)} concurrent streams, {sum(map(len, stories))} characters")

    asyncio.run(many())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: quickstart.py MODEL.gguf")
    main(sys.argv[1])
