"""Fixtures: stories260K from ../shared (the tests skip, saying why, without it), engines on it, and
the C++ programs (PAGODA_BIN) the tests compare against."""

import asyncio
import json
import os
import pathlib
import subprocess
import time

import pytest

import pagoda

HERE = pathlib.Path(__file__).resolve().parent
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED", HERE.parents[2] / "shared"))
MODEL = SHARED / "models" / "stories260K" / "stories260K.gguf"
BIN = pathlib.Path(os.environ.get("PAGODA_BIN", HERE.parents[1] / "build" / "release" / "examples"))

PROMPTS = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a big", "Tom and Sue went"]


@pytest.fixture(scope="session")
def model() -> str:
    if not MODEL.exists():
        pytest.skip(f"no stories260K at {MODEL} (the tests look in ../shared beside the checkout)")
    return str(MODEL)


@pytest.fixture
def engine(model):
    with pagoda.Engine(model, threads=1) as e:
        yield e


@pytest.fixture(scope="session")
def program():
    """Runs one of the C++ programs and returns its stdout."""
    def run(name: str, *args: str) -> str:
        path = BIN / name
        if not path.exists():
            pytest.skip(f"no {name} in {BIN} (build the programs, or set PAGODA_BIN)")
        return subprocess.run([str(path), *args], check=True, capture_output=True, text=True).stdout
    return run


@pytest.fixture(scope="session")
def cpp_greedy(model, program):
    """pagoda-generate's greedy output (JSON lines) for prompts, with its flags."""
    def run(prompts, max_tokens: int, *flags: str):
        lines = "".join(json.dumps({"prompt": p}) + "\n" for p in prompts)
        path = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"pagoda-py-prompts-{os.getpid()}.jsonl"
        path.write_text(lines)
        try:
            out = program("pagoda-generate", "-m", model, "--prompts", str(path), "--temp", "0", "-n", str(max_tokens),
                          "-t", "1", *flags)
        finally:
            path.unlink()
        return [json.loads(line) for line in out.splitlines()]
    return run


def wait_until(condition, what: str, deadline_s: float = 60.0):
    """Polls a condition of the engine's state (metrics settle a step after an event); the
    deadline only turns a hang into a failure."""
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.005)


def every_page_back(engine) -> None:
    """Waits until nothing runs or waits, then checks every KV page is free or cached."""
    m = wait_until(lambda: (m := engine.metrics()).kv_pages_used == 0 and m.running == 0 and m.queued == 0 and m,
                   "every request is done and its pages are back")
    assert m.kv_pages_free + m.kv_pages_cached == m.kv_pages_total


async def ticks_while(awaitable):
    """Awaits `awaitable` beside a task that counts the event loop's turns; returns its result and
    the count (more than 0 when the loop kept running while it waited)."""
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        return await awaitable, ticks
    finally:
        task.cancel()
