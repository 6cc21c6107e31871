"""pagoda: an in-process LLM serving engine for CPUs (continuous batching, paged KV cache,
prefix caching, many LoRA adapters in one batch), from Python.

    import pagoda
    with pagoda.Engine("stories260K.gguf", threads=2) as engine:
        params = pagoda.SamplingParams(temperature=0, max_tokens=64)
        for c in engine.generate(["Once upon a time", "The cat"], params):
            print(c.text)

Every refused request raises :class:`pagoda.Error`; every blocking call releases the GIL.
"""

import atexit

from ._async_engine import AsyncEngine, AsyncHandle
from ._chat import ChatCompletion, ToolCall
from ._core import Completion, Delta, Error, Handle, Metrics, TokenLogprob, TokenLogprobs
from ._engine import Engine, close_all
from ._params import SamplingParams

__all__ = ["AsyncEngine", "AsyncHandle", "ChatCompletion", "Completion", "Delta", "Engine", "Error", "Handle", "Metrics",
           "SamplingParams", "TokenLogprob", "TokenLogprobs", "ToolCall"]

# Engines still open at exit are closed while the interpreter can still run their callbacks'
# clean-up (the engine's threads take the GIL to drop Python objects).
atexit.register(close_all)
