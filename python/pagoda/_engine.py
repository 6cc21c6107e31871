"""Engine: a model loaded once, serving requests from any number of Python threads."""

from __future__ import annotations

import os
import weakref
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy

from . import _core
from ._chat import ChatCompletion, Message, chat_completion, prepare_chat, reply_text
from ._core import Completion, Delta, Error, Handle, Metrics
from ._params import SamplingParams

Prompt = Union[str, Sequence[int]]
AdapterSpec = Union[str, "os.PathLike[str]", Tuple[Union[str, "os.PathLike[str]"], float]]
#: An image: its file's bytes (PNG, JPEG or WebP), or the file's path.
Image = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]
#: An image, or with a prompt of token ids an (image, position) pair: before the token at position.
ImageSpec = Union[Image, Tuple[Image, int]]

#: What stands for each image in a text prompt unless ``image_marker=`` says otherwise.
IMAGE_MARKER = "<__image__>"

_open_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()


def close_all() -> None:
    """Closes every engine still open; run at interpreter exit, before Python tears down."""
    for engine in list(_open_engines):
        engine.close()


class Engine:
    """A model and its serving engine: continuous batching over a paged KV cache.

    Every blocking call (loading, waiting for results, streaming, closing) releases the GIL, so
    other Python threads run meanwhile and may submit to the same engine. Use it as a context
    manager, or call :meth:`close`; every pending request then finishes as ``"cancelled"``.

    Args:
        model: a GGUF file or a llama2.c checkpoint.
        mmproj: the model's vision projector (llama.cpp's mmproj GGUF, LLaVA-style), so that
            requests may hold images (``images=``, and ``image_url`` parts in :meth:`chat`).
        n_ctx: the KV cache's capacity in tokens, shared by all running requests (llama.cpp's
            meaning); None sizes it by ``kv_bytes``. A request's own limit is the model's context
            length (:attr:`context_length`).
        threads: compute threads; 0 = all cores.
        kv_cache_type: "f32", "f16", "bf16" or "q8_0".
        prefix_caching: share KV pages between requests with the same prefix.
        kv_disk: a directory where prefix KV pages are also kept as files, so a prefix evicted from
            memory or computed before a restart is read back instead of computed again; None: none.
        kv_disk_size: the files' total size in bytes (least recently used dropped first).
        kv_events: publish the prefix cache's block events as vLLM does (msgpack over ZeroMQ PUB)
            at this endpoint, e.g. ``"tcp://*:5557"``; ``kv_events_replay`` and ``kv_events_topic``
            as vLLM's replay endpoint and topic.
        adapters: LoRA adapters to load, ``{name: path}`` or ``{name: (path, scale)}``.
        tokenizer: a llama2.c checkpoint's tokenizer.bin.
        use_mmap, kv_bytes, tokens_per_page, max_tokens_per_step, max_entries_per_step, max_running,
        prefill_chunk, preemption ("recompute" or "swap"), max_resident_adapters, adapter_run_cap,
        mixed_adapter_batches, kv_prefault: the C++ ``EngineConfig`` fields of the same names.

    Raises:
        pagoda.Error: a bad model file, adapter or setting.
    """

    def __init__(self, model: Union[str, "os.PathLike[str]"], *, n_ctx: Optional[int] = None, threads: int = 0,
                 kv_cache_type: str = "f16", prefix_caching: bool = True,
                 mmproj: Optional[Union[str, "os.PathLike[str]"]] = None,
                 adapters: Optional[Mapping[str, AdapterSpec]] = None, tokenizer: Union[str, "os.PathLike[str]"] = "",
                 use_mmap: bool = True, kv_bytes: int = 512 << 20, tokens_per_page: int = 16,
                 max_tokens_per_step: int = 512, max_entries_per_step: int = 256, max_running: int = 256,
                 prefill_chunk: int = 256, preemption: str = "recompute", max_resident_adapters: int = 8,
                 adapter_run_cap: int = 32, mixed_adapter_batches: bool = True, kv_prefault: bool = False,
                 kv_disk: Optional[Union[str, "os.PathLike[str]"]] = None, kv_disk_size: int = 8 << 30,
                 kv_events: Optional[str] = None, kv_events_replay: Optional[str] = None,
                 kv_events_topic: str = "") -> None:
        if n_ctx is not None and (not isinstance(n_ctx, int) or n_ctx < 1):
            raise Error(f"n_ctx must be a positive number of tokens, got {n_ctx!r}")
        if not isinstance(tokens_per_page, int) or tokens_per_page < 1:
            raise Error(f"tokens_per_page must be positive, got {tokens_per_page!r}")
        kv_pages = 0 if n_ctx is None else -(-n_ctx // tokens_per_page)
        try:
            self._core = _core.Engine(
                model=os.fspath(model), tokenizer=os.fspath(tokenizer),
                mmproj="" if mmproj is None else os.fspath(mmproj), use_mmap=use_mmap, threads=threads,
                kv_pages=kv_pages, kv_bytes=kv_bytes, tokens_per_page=tokens_per_page, kv_cache_type=kv_cache_type,
                max_tokens_per_step=max_tokens_per_step, max_entries_per_step=max_entries_per_step,
                max_running=max_running, prefill_chunk=prefill_chunk, preemption=preemption,
                max_resident_adapters=max_resident_adapters, adapter_run_cap=adapter_run_cap,
                mixed_adapter_batches=mixed_adapter_batches, prefix_caching=prefix_caching, kv_prefault=kv_prefault,
                kv_disk="" if kv_disk is None else os.fspath(kv_disk), kv_disk_size=kv_disk_size,
                kv_events=kv_events or "", kv_events_replay=kv_events_replay or "", kv_events_topic=kv_events_topic)
        except TypeError as e:  # a setting of the wrong type
            raise Error(f"bad engine setting: {e}") from None
        _open_engines.add(self)
        try:
            for name, spec in (adapters or {}).items():
                path, scale = spec if isinstance(spec, tuple) else (spec, 1.0)
                self.load_adapter(name, path, scale)
        except BaseException:
            self.close()
            raise

    # ---- lifetime ----

    def close(self) -> None:
        """Cancels what is pending (every request finishes), stops the engine and frees the model.
        Idempotent; any later call but ``close`` raises :class:`pagoda.Error`."""
        self._core.close()

    @property
    def closed(self) -> bool:
        return self._core.closed

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests ----

    def submit(self, prompt: Prompt, params: Optional[SamplingParams] = None, *, adapter: Optional[str] = None,
               priority: int = 0, prefix_cache: bool = True, parse_special: bool = False,
               on_token: Optional[Callable[[Delta], None]] = None, images: Optional[Sequence[ImageSpec]] = None,
               image_marker: str = IMAGE_MARKER) -> Handle:
        """Queues one request and returns at once.

        ``prompt`` is text (tokenized with BOS when the model wants it) or token ids, used as given.
        ``images`` (an engine with ``mmproj``): each an image file's bytes (PNG, JPEG or WebP) or
        its path, read here; with a text prompt each goes where the next ``image_marker`` stands
        (the text holds the marker once per image), with token ids give (image, position) pairs.
        Each image's rows count as prompt tokens.
        ``on_token`` is called on the engine's scheduler thread (holding the GIL) with each
        :class:`Delta`: keep it short. If it raises, that request alone ends, and its handle's
        :meth:`Handle.result` raises the same exception.

        Raises:
            pagoda.Error: the engine refuses the request (empty prompt, ids outside the vocabulary,
                too long for the context or the KV cache, an image that does not decode, images that
                do not match the markers, images on an engine without ``mmproj``, closed engine);
                nothing is queued.
            OSError: an image path that cannot be read (FileNotFoundError names it).
        """
        return self._submit(prompt, params, adapter=adapter, priority=priority, prefix_cache=prefix_cache,
                            parse_special=parse_special, stream=False, on_token=on_token, images=images,
                            image_marker=image_marker)

    def generate(self, prompts: Union[Prompt, Iterable[Prompt]], params: Optional[SamplingParams] = None, *,
                 adapter: Optional[str] = None, priority: int = 0, prefix_cache: bool = True,
                 images: Optional[Sequence[ImageSpec]] = None, image_marker: str = IMAGE_MARKER) -> list[Completion]:
        """Runs every prompt in one continuous batch (all are submitted at once) and returns their
        completions in order. One prompt (a str, or a list of ids) gives a list of one. ``images``
        (read once) go with every prompt, as :meth:`submit` places them.

        Raises:
            pagoda.Error: a request was refused; the others are cancelled.
        """
        batch = [prompts] if _is_one_prompt(prompts) else list(prompts)  # type: ignore[arg-type]
        loaded = _read_images(images)
        handles: list[Handle] = []
        try:
            for prompt in batch:
                handles.append(self.submit(prompt, params, adapter=adapter, priority=priority,
                                           prefix_cache=prefix_cache, images=loaded, image_marker=image_marker))
            return [h.result() for h in handles]
        finally:
            for h in handles:
                h.cancel()

    def embed(self, inputs: Union[Prompt, Iterable[Prompt]], *, pooling: str = "model",
              normalize: bool = True) -> Union[numpy.ndarray, list[numpy.ndarray]]:
        """Embeddings of every input (a str, or a list of token ids used as given), in order, as a
        float32 numpy array of shape (inputs, :attr:`embedding_size`); one input gives one row.
        Each is the model's final hidden state after its output norm, pooled, computed as a
        prompt-only request batched with the engine's other work (the GIL is released while it
        runs). With pooling "none", a list of one (tokens, embedding_size) array per input instead.

        Args:
            pooling: "model" (the GGUF's pooling_type; "last" when it has none, as llama-server
                and vLLM do for decoder models), "mean", "cls" (the first position), "last",
                "none" (every position's row), or "rank" (a reranker's score of an input laid out
                as :meth:`rerank_tokens` lays a pair out: one column, never normalized).
            normalize: scale each vector (with "none", each row) to unit length (OpenAI's
                embeddings are).

        Raises:
            pagoda.Error: no inputs, an empty one, ids outside the vocabulary, an input longer
                than the context length (nothing is computed then), or a closed engine.
        """
        batch = [inputs] if _is_one_prompt(inputs) else list(inputs)  # type: ignore[arg-type]
        items: list[Union[str, list[int]]] = []
        for i, prompt in enumerate(batch):
            if isinstance(prompt, str):
                items.append(prompt)
            elif _is_id_list(prompt):
                ids = list(prompt)
                if not all(-2**31 <= t < 2**31 for t in ids):
                    raise Error(f"bad request: input {i}: a token id is outside the vocabulary")
                items.append(ids)
            else:
                raise Error(f"an input to embed is a str or a list of token ids, got {type(prompt).__name__}")
        if not isinstance(pooling, str):
            raise Error(f"pooling must be a str, got {type(pooling).__name__}")
        return self._core.embed(items, pooling, bool(normalize))

    def rerank(self, query: str, documents: Iterable[str]) -> list[float]:
        """Relevance scores of ``documents`` to ``query`` from a reranker (a model whose pooling is
        "rank": bge-reranker, jina-reranker, Qwen3-Reranker), one per document in document order;
        higher is more relevant. An encoder's are its raw outputs (logits): apply a sigmoid for a
        value in (0, 1); a decoder reranker's are P("yes") already (see
        :attr:`rerank_probabilities`). Each pair is one prompt-only request, laid out as
        :meth:`rerank_tokens` lays it out, batched with the engine's other work (the GIL is
        released while it runs).

        Raises:
            pagoda.Error: no documents, a model that is not a reranker, a pair longer than the
                context length (nothing is computed then), or a closed engine.
        """
        if not isinstance(query, str):
            raise Error(f"the query to rerank against is a str, got {type(query).__name__}")
        if isinstance(documents, str):
            raise Error("documents is a list of str, not one str")
        docs = list(documents)
        for i, d in enumerate(docs):
            if not isinstance(d, str):
                raise Error(f"document {i} is a str, got {type(d).__name__}")
        return self._core.rerank(query, docs)

    def rerank_tokens(self, query: str, document: str) -> list[int]:
        """The token ids :meth:`rerank` feeds for one pair, laid out as llama-server does (BERT:
        [CLS] query [SEP] document [SEP]; a decoder reranker: its own rerank prompt, the query and
        the document as plain text); their count is the pair's share of usage."""
        return self._core.rerank_tokens(query, document)

    @property
    def rerank_probabilities(self) -> bool:
        """Whether :meth:`rerank` gives probabilities (a decoder reranker's P("yes")) rather than
        an encoder reranker's raw logits."""
        return self._core.rerank_probabilities()

    @property
    def takes_images(self) -> bool:
        """Whether requests may hold images: the engine was given a vision projector (``mmproj``)."""
        return self._core.takes_images()

    @property
    def embedding_only(self) -> bool:
        """Whether the model computes embeddings or scores only (an encoder such as bert): a
        request to generate text from it raises :class:`pagoda.Error`."""
        return self._core.embedding_only()

    @property
    def embedding_size(self) -> int:
        """The length of an embedding: the model's hidden size."""
        return self._core.embedding_size()

    @property
    def model_pooling(self) -> str:
        """What ``pooling="model"`` means for this model: "mean", "cls", "last", or "rank" for a
        reranker (raises :class:`pagoda.Error` when the GGUF names a pooling pagoda cannot give)."""
        return self._core.model_pooling()

    def stream(self, prompt: Prompt, params: Optional[SamplingParams] = None, *, adapter: Optional[str] = None,
               priority: int = 0, prefix_cache: bool = True, parse_special: bool = False,
               images: Optional[Sequence[ImageSpec]] = None, image_marker: str = IMAGE_MARKER) -> Iterator[Delta]:
        """Yields the request's output as it is made: each :class:`Delta` holds a token and the text
        it completes (whole UTF-8 characters; the last may have token -1 and only release text held
        back for a stop string). The deltas' texts joined are the completion's text. Leaving the
        loop early, or ``close()`` on the iterator, cancels the request. ``images`` as :meth:`submit`.

        Raises:
            pagoda.Error: the request is refused (at once, or when it fails, e.g. an unknown adapter).
        """
        handle = self._submit(prompt, params, adapter=adapter, priority=priority, prefix_cache=prefix_cache,
                              parse_special=parse_special, stream=True, on_token=None, images=images,
                              image_marker=image_marker)
        return _deltas(handle)

    def chat(self, messages: Sequence[Message], params: Optional[SamplingParams] = None, *,
             tools: Optional[Sequence[object]] = None, tool_choice: Optional[object] = None,
             parallel_tool_calls: Optional[bool] = None, chat_template_kwargs: Optional[Mapping[str, object]] = None,
             adapter: Optional[str] = None, special_in_content: bool = False) -> ChatCompletion:
        """Replies to a conversation in OpenAI's message shape (``[{"role": "user", "content":
        "..."}]``, assistant ``tool_calls`` and ``tool`` turns too), laid out by the model's chat
        template and stopping at its end of turn.

        ``tools``, ``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or ``{"type":
        "function", "function": {"name": ...}}``) and ``parallel_tool_calls`` are OpenAI's: the
        template is shown the tools, and a call is constrained to the layout the model writes
        calls in with arguments valid against the tool's ``parameters`` (the whole reply with
        "required" or a named function; from the layout's opening tag with "auto").
        ``chat_template_kwargs`` are extra template variables (``{"enable_thinking": False}``).

        With ``mmproj``, a message's content may be a list of ``{"type": "text", "text": ...}`` and
        ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` parts, read as
        pagoda-server reads them: each image goes where its part stands (nothing is fetched: a
        remote URL is refused).

        Text in the messages, tools and kwargs is always text: a user who writes "<|im_end|>" or
        "</s>" gets those characters, not the control token (only the template's own control
        tokens are parsed). ``special_in_content=True`` parses them in the messages too, for
        trusted callers that rely on it.

        Raises:
            pagoda.Error: a malformed message or tool, a template that fails on the conversation,
                tools together with a grammar or json_schema in ``params``, or an image that is
                not a data URL, does not decode, or is sent to an engine without ``mmproj``.
        """
        prepared = prepare_chat(self, messages, params, tools=tools, tool_choice=tool_choice,
                                parallel_tool_calls=parallel_tool_calls, chat_template_kwargs=chat_template_kwargs,
                                special_in_content=special_in_content)
        handle = self._submit(prepared.prompt_ids, prepared.params, adapter=adapter, priority=0, prefix_cache=True,
                              parse_special=True, stream=prepared.shape is not None, on_token=None,
                              grammar=prepared.grammar, grammar_triggers=prepared.triggers, images=prepared.images)
        if prepared.shape is None:
            return chat_completion(prepared, handle.result(), None)
        deltas = list(_deltas(handle))
        return chat_completion(prepared, handle.result(), reply_text(self, deltas, prepared.params.stop_token_ids))

    def _submit(self, prompt: Prompt, params: Optional[SamplingParams], *, adapter: Optional[str], priority: int,
                prefix_cache: bool, parse_special: bool, stream: bool,
                on_token: Optional[Callable[[Delta], None]], grammar: str = "",
                grammar_triggers: Sequence[str] = (), images: Optional[Sequence[ImageSpec]] = None,
                image_marker: str = IMAGE_MARKER) -> Handle:
        params = SamplingParams() if params is None else params
        if not isinstance(params, SamplingParams):
            raise Error(f"params must be a pagoda.SamplingParams, got {type(params).__name__}")
        if on_token is not None and not callable(on_token):
            raise Error(f"on_token must be callable, got {type(on_token).__name__}")
        if isinstance(prompt, str):
            text, ids = prompt, []
        elif _is_id_list(prompt):
            text, ids = "", list(prompt)
            if not ids:
                raise Error("bad request: the prompt is empty")
            if not all(-2**31 <= i < 2**31 for i in ids):
                raise Error("bad request: a prompt token id is outside the vocabulary")
        else:
            raise Error(f"a prompt is a str or a list of token ids, got {type(prompt).__name__}")
        if adapter is not None and not isinstance(adapter, str):
            raise Error(f"adapter must be a name (str), got {type(adapter).__name__}")
        if not isinstance(image_marker, str):
            raise Error(f"image_marker must be a str, got {type(image_marker).__name__}")
        loaded = _read_images(images)
        return self._core.submit(
            prompt=text, prompt_ids=ids, sampling=params._sampling, max_tokens=params.max_tokens,
            stop=list(params.stop), stop_token_ids=list(params.stop_token_ids), ignore_eos=params.ignore_eos,
            logprobs=_off_is_minus_one(params.logprobs), prompt_logprobs=_off_is_minus_one(params.prompt_logprobs),
            adapter=adapter or "", priority=priority, prefix_cache=prefix_cache, parse_special=parse_special,
            stream=stream, on_token=on_token, grammar=grammar or (params.grammar or ""),
            json_schema=params.json_schema or "", grammar_triggers=list(grammar_triggers), images=loaded,
            image_marker=image_marker)

    # ---- adapters, tokenizer, chat layout, metrics ----

    def load_adapter(self, name: str, path: Union[str, "os.PathLike[str]"], scale: float = 1.0) -> None:
        """Registers a LoRA adapter (llama.cpp's GGUF format) under ``name``; requests name it in
        ``adapter=``. Raises :class:`pagoda.Error` for a bad file, a mismatch or a name in use."""
        self._core.load_adapter(name, os.fspath(path), scale)

    def unload_adapter(self, name: str) -> None:
        """Unregisters an adapter: running requests finish on it, waiting ones fail."""
        self._core.unload_adapter(name)

    def tokenize(self, text: str, add_bos: Optional[bool] = None, parse_special: bool = False) -> list[int]:
        """Token ids of ``text``; ``add_bos`` defaults to what the model wants."""
        return self._core.tokenize(text, self._core.add_bos() if add_bos is None else add_bos, parse_special)

    def token_text(self, token: int) -> bytes:
        """The bytes a token stands for inside a text (a byte token's one byte may be part of a
        UTF-8 character, hence bytes)."""
        return self._core.token_text(token)

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (an incomplete UTF-8 character at the end becomes U+FFFD)."""
        return self._core.detokenize(list(ids))

    def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True, *,
                            tools: Optional[Sequence[object]] = None,
                            chat_template_kwargs: Optional[Mapping[str, object]] = None,
                            return_spans: bool = False,
                            special_in_content: bool = False) -> Union[str, Tuple[str, list[Tuple[int, int]]]]:
        """The conversation laid out by the model's chat template (as transformers renders it), with
        ``tools`` shown to it, ending where the assistant's reply begins.

        With ``return_spans``, ``(prompt, data_spans)``: the (start, end) offsets of the prompt's
        text copied from the messages, tools and kwargs, where :meth:`chat` parses no control
        tokens (none with ``special_in_content``). Tokenizing the text alone with
        ``parse_special=True`` would also turn control-token text a user wrote into control
        tokens. An image part (with ``mmproj``) shows as ``"<__image__>"``, where :meth:`submit`
        would place an image."""
        prepared = prepare_chat(self, messages, None, tools=tools, chat_template_kwargs=chat_template_kwargs,
                                add_generation_prompt=add_generation_prompt, constrain=False,
                                special_in_content=special_in_content, image_marker=IMAGE_MARKER)
        return (prepared.prompt, prepared.data_spans) if return_spans else prepared.prompt

    @property
    def chat_format(self) -> Tuple[str, list[int], list[str]]:
        """(family, end-of-turn token ids, end-of-turn stop strings) of the model's chat template."""
        return self._core.chat_format()

    def metrics(self) -> Metrics:
        """A snapshot of the engine's counters: requests, KV pages, tokens, adapters."""
        return self._core.metrics()

    @property
    def model_lost(self) -> Optional[str]:
        """Why the engine can no longer serve its model (its mapped file was truncated), or None."""
        return self._core.model_lost()

    @property
    def context_length(self) -> int:
        return self._core.context_length()

    @property
    def vocab_size(self) -> int:
        return self._core.vocab_size()

    @property
    def eos_id(self) -> int:
        return self._core.eos_id()

    @property
    def eog_ids(self) -> list[int]:
        """The tokens that end generation (EOS, EOT, <|im_end|>, ...)."""
        return self._core.eog_ids()

    @property
    def add_bos(self) -> bool:
        return self._core.add_bos()

    @property
    def chat_template(self) -> Optional[str]:
        """The GGUF's tokenizer.chat_template, if it has one."""
        return self._core.chat_template()

    @property
    def special_tokens(self) -> dict[str, int]:
        """The control and user-defined tokens, by spelling."""
        return self._core.special_tokens()


def _deltas(handle: Handle) -> Iterator[Delta]:
    try:
        while (delta := handle.next_delta()) is not None:
            yield delta
        handle.result()  # raises the error of a request that failed
    finally:
        handle.cancel()  # nothing once it has finished


def _read_images(images: Optional[Sequence[ImageSpec]]) -> list[Tuple[bytes, int]]:
    """Each image's bytes (a path's file read) and its position (-1: at the next marker)."""
    if images is None:
        return []
    if isinstance(images, (str, bytes, bytearray, memoryview, os.PathLike)):
        raise Error("images is a list of images (bytes or paths), not one image")
    loaded: list[Tuple[bytes, int]] = []
    for i, item in enumerate(images):
        position = -1
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[1], int) or isinstance(item[1], bool):
                raise Error(f"images[{i}] is an image or an (image, position) pair, got a tuple of {len(item)}")
            item, position = item
            if not -2**31 <= position < 2**31:
                raise Error(f"images[{i}]'s position {position} is outside the prompt")
        if isinstance(item, (bytes, bytearray, memoryview)):
            loaded.append((bytes(item), position))
        elif isinstance(item, (str, os.PathLike)):
            with open(item, "rb") as f:  # a missing file is FileNotFoundError naming it
                loaded.append((f.read(), position))
        else:
            raise Error(f"images[{i}] is an image file's bytes or its path, got {type(item).__name__}")
    return loaded


def _off_is_minus_one(k: Optional[int]) -> int:
    return -1 if k is None else k


def _is_id_list(prompt: object) -> bool:
    return isinstance(prompt, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt)


def _is_one_prompt(prompts: object) -> bool:
    return isinstance(prompts, str) or (_is_id_list(prompts) and len(prompts) > 0)  # type: ignore[arg-type]
