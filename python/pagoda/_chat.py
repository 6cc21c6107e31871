"""Chat messages to a prompt in the model's chat format, shared by Engine and AsyncEngine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Sequence, Tuple

from ._core import Error
from ._params import SamplingParams

if TYPE_CHECKING:
    from ._engine import Engine

Message = Mapping[str, str]


def chat_prompt(engine: Engine, messages: Sequence[Message], params: Optional[SamplingParams],
                tools: Optional[Sequence[object]],
                add_generation_prompt: bool = True) -> Tuple[str, SamplingParams]:
    """The conversation laid out by the model's template, and ``params`` with its end of turn
    added to the stops."""
    if tools:
        raise Error("tools are not supported: pagoda's chat templates lay out text turns only "
                    "(describe the tools in a system message instead)")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise Error("messages must be a list of {'role': ..., 'content': ...} dicts")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise Error(f"message {i} needs a str 'role' and a str 'content', got {m!r}")
        turns.append((m["role"], m["content"]))
    prompt = engine._core.apply_chat_template(turns, add_generation_prompt)
    _, stop_ids, stop_strings = engine.chat_format
    base = SamplingParams() if params is None else params
    return prompt, base.with_stops(stop_strings, stop_ids)
