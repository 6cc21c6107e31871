"""AsyncEngine: the Engine for asyncio, with awaitable results and ``async for`` streams."""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Any, AsyncIterator, Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy

from ._chat import ChatCompletion, Message, chat_completion, prepare_chat, reply_text
from ._core import Completion, Delta, Handle, Metrics
from ._engine import IMAGE_MARKER, Engine, ImageSpec, Prompt, _is_one_prompt, _read_images
from ._params import SamplingParams


def _resolve(finished: asyncio.Future, item: None) -> None:
    if not finished.done():  # a cancelled wait leaves it cancelled
        finished.set_result(None)


class AsyncHandle:
    """A request submitted from a coroutine: ``await handle.result()``, ``cancel()``, ``done()``."""

    def __init__(self, handle: Handle, loop: asyncio.AbstractEventLoop) -> None:
        self._handle = handle
        self._finished = loop.create_future()
        # A thread of the binding's waits for the request (GIL released) and hands its end to the
        # loop with call_soon_threadsafe: nothing polls, and the loop never blocks.
        handle.forward_to(loop, functools.partial(_resolve, self._finished))

    @property
    def id(self) -> int:
        return self._handle.id

    def cancel(self) -> None:
        """Asks the engine to stop the request; its result is then ``"cancelled"``."""
        self._handle.cancel()

    def done(self) -> bool:
        return self._handle.done()

    async def result(self) -> Completion:
        """The completion. Cancelling the awaiting task cancels the request.

        Raises:
            pagoda.Error: the request failed (unknown adapter, lost model).
        """
        try:
            await asyncio.shield(self._finished)
        except asyncio.CancelledError:
            self._handle.cancel()
            raise
        return self._handle.result()


class AsyncEngine:
    """An :class:`Engine` for asyncio: the same arguments, the same behaviour, and coroutines.

    Loading runs in the loop's default executor, so ``await AsyncEngine.load(...)`` keeps the loop
    running; the constructor itself blocks while it loads.
    """

    def __init__(self, model: Union[str, "os.PathLike[str]"], **config: Any) -> None:
        self.engine = Engine(model, **config)

    @classmethod
    async def load(cls, model: Union[str, "os.PathLike[str]"], **config: Any) -> AsyncEngine:
        """Loads the model on a worker thread (the GIL is released while it reads the file)."""
        return await asyncio.get_running_loop().run_in_executor(None, lambda: cls(model, **config))

    def close(self) -> None:
        """Cancels what is pending and stops the engine. Idempotent."""
        self.engine.close()

    async def __aenter__(self) -> AsyncEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def submit(self, prompt: Prompt, params: Optional[SamplingParams] = None, *, adapter: Optional[str] = None,
               priority: int = 0, prefix_cache: bool = True, parse_special: bool = False,
               images: Optional[Sequence[ImageSpec]] = None, image_marker: str = IMAGE_MARKER) -> AsyncHandle:
        """Queues a request (call it from a coroutine); ``images`` as :meth:`Engine.submit`. Raises
        :class:`pagoda.Error` at once for a refused request."""
        loop = asyncio.get_running_loop()
        return AsyncHandle(self.engine._submit(prompt, params, adapter=adapter, priority=priority,
                                               prefix_cache=prefix_cache, parse_special=parse_special,
                                               stream=False, on_token=None, images=images,
                                               image_marker=image_marker), loop)

    async def generate(self, prompts: Union[Prompt, Iterable[Prompt]], params: Optional[SamplingParams] = None, *,
                       adapter: Optional[str] = None, priority: int = 0, prefix_cache: bool = True,
                       images: Optional[Sequence[ImageSpec]] = None,
                       image_marker: str = IMAGE_MARKER) -> list[Completion]:
        """Every prompt in one continuous batch, each with ``images``; their completions in order.
        Cancelling the task cancels them all."""
        batch = [prompts] if _is_one_prompt(prompts) else list(prompts)  # type: ignore[arg-type]
        loaded = _read_images(images)
        handles: list[AsyncHandle] = []
        try:
            for prompt in batch:
                handles.append(self.submit(prompt, params, adapter=adapter, priority=priority,
                                           prefix_cache=prefix_cache, images=loaded, image_marker=image_marker))
            return [await h.result() for h in handles]
        finally:
            for h in handles:
                h.cancel()

    async def stream(self, prompt: Prompt, params: Optional[SamplingParams] = None, *,
                     adapter: Optional[str] = None, priority: int = 0, prefix_cache: bool = True,
                     parse_special: bool = False, images: Optional[Sequence[ImageSpec]] = None,
                     image_marker: str = IMAGE_MARKER) -> AsyncIterator[Delta]:
        """``async for delta in engine.stream(...)``: the deltas of :meth:`Engine.stream`, handed to
        this loop as they are made. Leaving the loop, closing the iterator or cancelling the task
        cancels the request."""
        loop = asyncio.get_running_loop()
        handle = self.engine._submit(prompt, params, adapter=adapter, priority=priority, prefix_cache=prefix_cache,
                                     parse_special=parse_special, stream=True, on_token=None, images=images,
                                     image_marker=image_marker)
        deltas: asyncio.Queue[Optional[list[Delta]]] = asyncio.Queue()
        handle.forward_to(loop, deltas.put_nowait)
        try:
            while (batch := await deltas.get()) is not None:
                for delta in batch:
                    yield delta
            handle.result()  # raises the error of a request that failed
        finally:
            handle.cancel()

    async def chat(self, messages: Sequence[Message], params: Optional[SamplingParams] = None, *,
                   tools: Optional[Sequence[object]] = None, tool_choice: Optional[object] = None,
                   parallel_tool_calls: Optional[bool] = None,
                   chat_template_kwargs: Optional[Mapping[str, object]] = None,
                   adapter: Optional[str] = None, special_in_content: bool = False) -> ChatCompletion:
        """:meth:`Engine.chat`, awaited."""
        prepared = prepare_chat(self.engine, messages, params, tools=tools, tool_choice=tool_choice,
                                parallel_tool_calls=parallel_tool_calls, chat_template_kwargs=chat_template_kwargs,
                                special_in_content=special_in_content)
        loop = asyncio.get_running_loop()
        handle = self.engine._submit(prepared.prompt_ids, prepared.params, adapter=adapter, priority=0, prefix_cache=True,
                                     parse_special=True, stream=prepared.shape is not None, on_token=None,
                                     grammar=prepared.grammar, grammar_triggers=prepared.triggers,
                                     images=prepared.images)
        try:
            if prepared.shape is None:
                return chat_completion(prepared, await AsyncHandle(handle, loop).result(), None)
            deltas: asyncio.Queue[Optional[list[Delta]]] = asyncio.Queue()
            handle.forward_to(loop, deltas.put_nowait)
            received: list[Delta] = []
            while (batch := await deltas.get()) is not None:
                received.extend(batch)
            completion = handle.result()
            return chat_completion(prepared, completion, reply_text(self.engine, received, prepared.params.stop_token_ids))
        finally:
            handle.cancel()

    async def embed(self, inputs: Union[Prompt, Iterable[Prompt]], *, pooling: str = "model",
                    normalize: bool = True) -> Union[numpy.ndarray, list[numpy.ndarray]]:
        """:meth:`Engine.embed` on a worker thread, so the loop keeps running while the inputs are
        computed (as prompt-only requests batched with the engine's other work). Cancelling the
        awaiting task does not stop requests already submitted: they are short, and finish."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.engine.embed(inputs, pooling=pooling, normalize=normalize))

    async def rerank(self, query: str, documents: Iterable[str]) -> list[float]:
        """:meth:`Engine.rerank` on a worker thread, so the loop keeps running while the pairs are
        scored. Cancelling the awaiting task does not stop requests already submitted: they are
        short, and finish."""
        docs = list(documents) if not isinstance(documents, str) else documents
        return await asyncio.get_running_loop().run_in_executor(None, lambda: self.engine.rerank(query, docs))

    def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True, *,
                            tools: Optional[Sequence[object]] = None,
                            chat_template_kwargs: Optional[Mapping[str, object]] = None,
                            return_spans: bool = False,
                            special_in_content: bool = False) -> Union[str, Tuple[str, list[Tuple[int, int]]]]:
        return self.engine.apply_chat_template(messages, add_generation_prompt, tools=tools,
                                               chat_template_kwargs=chat_template_kwargs, return_spans=return_spans,
                                               special_in_content=special_in_content)

    def tokenize(self, text: str, add_bos: Optional[bool] = None, parse_special: bool = False) -> list[int]:
        return self.engine.tokenize(text, add_bos, parse_special)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.engine.detokenize(ids)

    def load_adapter(self, name: str, path: Union[str, "os.PathLike[str]"], scale: float = 1.0) -> None:
        self.engine.load_adapter(name, path, scale)

    def unload_adapter(self, name: str) -> None:
        self.engine.unload_adapter(name)

    def metrics(self) -> Metrics:
        return self.engine.metrics()
