"""Types of pagoda's C++ extension (python/pagoda_module.cpp). Use the pagoda package."""

import asyncio
from typing import Callable, Optional, Union

import numpy

class Error(RuntimeError):
    """Every request, model, adapter or setting pagoda refuses; the message says what was wrong."""

class SamplingParams:
    def __init__(self, *, temperature: float, top_k: int, top_p: float, min_p: float, repetition_penalty: float,
                 repetition_window: int, presence_penalty: float, frequency_penalty: float,
                 logit_bias: list[tuple[int, float]], min_tokens: int, seed: int) -> None: ...

class TokenLogprob:
    """A token and its log-probability."""
    @property
    def token(self) -> int: ...
    @property
    def logprob(self) -> float: ...

class TokenLogprobs:
    """A token's log-probability (log-softmax of the raw logits, whatever the sampling) and its
    step's most likely tokens."""
    @property
    def logprob(self) -> float: ...
    @property
    def top(self) -> list[TokenLogprob]:
        """Most likely first (ties: the lower id first)."""

class Delta:
    """A piece of a streamed request's output."""
    @property
    def token(self) -> int:
        """The token id, or -1 when the piece only releases text held back for a stop string."""
    @property
    def text(self) -> str:
        """The text it completes: whole UTF-8 characters, possibly empty."""
    @property
    def logprobs(self) -> Optional[TokenLogprobs]:
        """With SamplingParams.logprobs set, for a token."""

class Completion:
    """A finished request."""
    @property
    def token_ids(self) -> list[int]:
        """The generated ids, ending with the stop or EOS id if one ended it."""
    @property
    def text(self) -> str:
        """Their text, without a stop token, cut before a stop string."""
    @property
    def logprobs(self) -> list[TokenLogprobs]:
        """One per token id, with SamplingParams.logprobs set."""
    @property
    def prompt_logprobs(self) -> list[TokenLogprobs]:
        """Entry i is prompt token i + 1's, with SamplingParams.prompt_logprobs set."""
    @property
    def finish_reason(self) -> str:
        """"eos", "length", "stop" or "cancelled"."""
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def time_to_first_token_s(self) -> float: ...
    @property
    def time_per_output_token_s(self) -> float:
        """Mean gap between tokens after the first."""
    @property
    def preemptions(self) -> int: ...

class Metrics:
    """A snapshot of the engine's counters (see pagoda::EngineMetrics)."""
    queued: int
    running: int
    preempted: int
    finished: int
    kv_pages_used: int
    kv_pages_cached: int
    kv_pages_free: int
    kv_pages_total: int
    prefix_hit_tokens: int
    prefix_queried_tokens: int
    generated_tokens: int
    tokens_per_second: float
    adapters_resident: int
    adapter_swaps: int
    adapter_swap_seconds: float

class Handle:
    """A submitted request."""
    @property
    def id(self) -> int: ...
    def cancel(self) -> None:
        """Asks the engine to stop the request; safe at any moment, more than once."""
    def done(self) -> bool:
        """Whether the request has finished."""
    def result(self, timeout: Optional[float] = None) -> Completion:
        """Waits (GIL released) for the completion. Raises TimeoutError after ``timeout`` seconds,
        pagoda.Error for a failed request, or what its on_token callback raised."""
    def next_delta(self) -> Optional[Delta]:
        """A streamed request's next delta, or None once it has ended."""
    def forward_to(self, loop: asyncio.AbstractEventLoop, sink: Callable[[Optional[list[Delta]]], object]) -> None:
        """Hands the request's deltas (in batches) and then None to ``sink`` on ``loop``."""

class Engine:
    def __init__(self, *, model: str, tokenizer: str, mmproj: str, use_mmap: bool, threads: int, kv_pages: int, kv_bytes: int,
                 tokens_per_page: int, kv_cache_type: str, max_tokens_per_step: int, max_entries_per_step: int,
                 max_running: int, prefill_chunk: int, preemption: str, max_resident_adapters: int,
                 adapter_run_cap: int, mixed_adapter_batches: bool, prefix_caching: bool, kv_prefault: bool) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def submit(self, *, prompt: str, prompt_ids: list[int], sampling: SamplingParams, max_tokens: int, stop: list[str],
               stop_token_ids: list[int], ignore_eos: bool, logprobs: int, prompt_logprobs: int, adapter: str, priority: int, prefix_cache: bool,
               parse_special: bool, stream: bool, on_token: Optional[Callable[[Delta], None]], grammar: str = "",
               json_schema: str = "", grammar_triggers: list[str] = ..., images: list[tuple[bytes, int]] = ...,
               image_marker: str = "<__image__>") -> Handle:
        """``images``: (file bytes, position) pairs, as pagoda::RequestImage (-1: at the next image_marker)."""
    def embed(self, inputs: list[Union[str, list[int]]], pooling: str,
              normalize: bool) -> Union[numpy.ndarray, list[numpy.ndarray]]: ...
    def rerank(self, query: str, documents: list[str]) -> list[float]: ...
    def rerank_tokens(self, query: str, document: str) -> list[int]: ...
    def takes_images(self) -> bool: ...
    def embedding_only(self) -> bool: ...
    def rerank_probabilities(self) -> bool: ...
    def model_pooling(self) -> str: ...
    def embedding_size(self) -> int: ...
    def metrics(self) -> Metrics: ...
    def model_lost(self) -> Optional[str]: ...
    def load_adapter(self, name: str, path: str, scale: float) -> None: ...
    def unload_adapter(self, name: str) -> None: ...
    def tokenize(self, text: str, add_bos: bool, parse_special: bool) -> list[int]: ...
    def token_text(self, id: int) -> bytes: ...
    def detokenize(self, ids: list[int]) -> str: ...
    def context_length(self) -> int: ...
    def vocab_size(self) -> int: ...
    def eos_id(self) -> int: ...
    def eog_ids(self) -> list[int]: ...
    def add_bos(self) -> bool: ...
    def chat_template(self) -> Optional[str]: ...
    def special_tokens(self) -> dict[str, int]: ...
    def chat_format(self) -> tuple[str, list[int], list[str]]: ...
    def prepare_chat(self, body: str, add_generation_prompt: bool, constrain: bool, special_in_content: bool,
                     image_marker: str = "") -> tuple[str, list[tuple[int, int]], list[int], list[tuple[bytes, int]], str,
                                                 list[str], Optional[ReplyShape]]:
        """An OpenAI chat body (JSON) → (prompt, its data spans as str offsets, its token ids, its
        images as (file bytes, position in the ids), tool-call grammar, its triggers, the reply's
        shape). Images stand in the prompt as image_marker; "" draws a random marker."""

class ReplyShape:
    """What a chat reply may hold besides text (thinking, tool calls)."""

def check_json_depth(value: object, what: str) -> None:
    """Raises pagoda.Error when dicts/lists/tuples in value nest deeper than the engine's JSON bound (128)."""

def split_reply(shape: ReplyShape, reply: str) -> tuple[str, str, list[tuple[str, str, str]]]:
    """(content, reasoning, [(id, name, arguments)]) of a whole reply."""
