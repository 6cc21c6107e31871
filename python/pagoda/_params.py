"""SamplingParams: how a request samples and when it stops, in vLLM's shape."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from ._core import Error

_FLOATS = ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")
_INTS = ("top_k", "repetition_window", "min_tokens", "seed", "max_tokens")


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen and when a request stops.

    ``temperature`` to ``seed`` are pagoda's C++ ``SamplingParams`` (same names, same defaults:
    plain sampling at temperature 1 with every filter off); the rest are the C++ ``Request``'s stop
    rules and log-probabilities, named as in vLLM. Out-of-range values raise
    :class:`pagoda.Error` here, naming the field.
    """

    temperature: float = 1.0  #: 0 = greedy (argmax, lowest id on ties)
    top_k: int = 0  #: keep the k most likely tokens; 0 = off
    top_p: float = 1.0  #: keep the smallest set whose probability reaches p; 1 = off
    min_p: float = 0.0  #: drop tokens below min_p x the top probability; 0 = off
    repetition_penalty: float = 1.0  #: CTRL-style penalty on tokens already seen; 1 = off
    repetition_window: int = 64  #: how many of the latest tokens the penalty looks at
    presence_penalty: float = 0.0  #: OpenAI's, over the generated tokens, in [-2, 2]
    frequency_penalty: float = 0.0  #: OpenAI's, over the generated tokens, in [-2, 2]
    #: {token id: bias in [-100, 100]} added to its logit first (-100 bans it); or (id, bias) pairs
    logit_bias: Union[Mapping[int, float], Sequence[Tuple[int, float]]] = ()
    min_tokens: int = 0  #: no end-of-generation or stop token before this many tokens
    seed: int = 0  #: each request's generator is seeded with this
    max_tokens: int = 256  #: new tokens at most (C++ Request::max_new_tokens; 0 only to score a prompt)
    stop: Union[str, Sequence[str]] = ()  #: stop strings; the text is cut before one
    stop_token_ids: Sequence[int] = ()  #: besides the model's end-of-generation tokens
    ignore_eos: bool = False  #: go on past end-of-generation tokens
    logprobs: Optional[int] = None  #: each generated token's log-probability and this many top ones (<= 20)
    prompt_logprobs: Optional[int] = None  #: the same for the prompt's tokens (scoring a text)
    #: constrain the output to this grammar (llama.cpp's GBNF, start rule ``root``)
    grammar: Optional[str] = None
    #: or to JSON valid against this JSON Schema (a dict, or its JSON text)
    json_schema: Optional[Union[str, Mapping[str, Any]]] = None

    def __post_init__(self) -> None:
        for name in _FLOATS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise Error(f"SamplingParams.{name} must be a number, got {value!r}")
        for name in _INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise Error(f"SamplingParams.{name} must be an int, got {value!r}")
        if not 0 <= self.seed < 2**64:
            raise Error(f"SamplingParams.seed must be in [0, 2**64), got {self.seed}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 20):
                raise Error(f"SamplingParams.{name} must be None or an int in [0, 20], got {value!r}")
        least = 0 if self.prompt_logprobs is not None else 1
        if not least <= self.max_tokens < 2**31:
            raise Error(f"SamplingParams.max_tokens must be at least {least}, got {self.max_tokens}")
        for name in ("top_k", "repetition_window", "min_tokens"):
            if abs(getattr(self, name)) >= 2**31:
                raise Error(f"SamplingParams.{name} is out of range: {getattr(self, name)}")
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if not all(isinstance(s, str) for s in stop):
            raise Error(f"SamplingParams.stop must be a string or strings, got {self.stop!r}")
        ids = tuple(self.stop_token_ids)
        if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in ids):
            raise Error(f"SamplingParams.stop_token_ids must be token ids, got {self.stop_token_ids!r}")
        pairs = tuple(self.logit_bias.items() if isinstance(self.logit_bias, Mapping) else self.logit_bias)
        if not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], int) and not isinstance(p[0], bool)
                   and 0 <= p[0] < 2**31 and isinstance(p[1], (int, float)) for p in pairs):
            raise Error(f"SamplingParams.logit_bias must map token ids to numbers, got {self.logit_bias!r}")
        if self.grammar is not None and not isinstance(self.grammar, str):
            raise Error(f"SamplingParams.grammar must be GBNF text, got {self.grammar!r}")
        if self.json_schema is not None and not isinstance(self.json_schema, str):
            if not isinstance(self.json_schema, (Mapping, bool)):
                raise Error(f"SamplingParams.json_schema must be a JSON Schema (a dict or its text), got {self.json_schema!r}")
            _core.check_json_depth(self.json_schema, "SamplingParams.json_schema")
            try:
                object.__setattr__(self, "json_schema", json.dumps(self.json_schema, ensure_ascii=False))
            except (TypeError, ValueError) as e:
                raise Error(f"SamplingParams.json_schema is not JSON-serialisable: {e}") from None
        if self.grammar is not None and self.json_schema is not None:
            raise Error("SamplingParams: give a grammar or a json_schema, not both")
        object.__setattr__(self, "logit_bias", pairs)
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "stop_token_ids", ids)
        # The C++ struct, validated once (its ranges: temperature >= 0, top_p in (0, 1], ...).
        object.__setattr__(self, "_sampling", _core.SamplingParams(
            temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, min_p=self.min_p,
            repetition_penalty=self.repetition_penalty, repetition_window=self.repetition_window,
            presence_penalty=self.presence_penalty, frequency_penalty=self.frequency_penalty,
            logit_bias=list(pairs), min_tokens=self.min_tokens, seed=self.seed))

    def with_stops(self, stop: Sequence[str], stop_token_ids: Sequence[int]) -> SamplingParams:
        """These parameters with more stop strings and stop ids (a chat format's end of turn)."""
        return dataclasses.replace(self, stop=(*self.stop, *stop), stop_token_ids=(*self.stop_token_ids, *stop_token_ids))
