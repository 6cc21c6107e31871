"""Chat: a conversation laid out by the model's chat template (its Jinja template, as
transformers renders it, or its family's layout), and the reply split into content, thinking and
tool calls as OpenAI's chat API returns them. Shared by Engine and AsyncEngine."""

from __future__ import annotations

import dataclasses
import json
import secrets
import string
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Tuple

from . import _core
from ._core import Completion, Delta, Error
from ._params import SamplingParams

if TYPE_CHECKING:
    from ._engine import Engine

Message = Mapping[str, Any]

_ID_ALPHABET = string.ascii_letters + string.digits


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """A function call the reply made: ``arguments`` is the JSON text of an object that validates
    against the tool's ``parameters``."""

    id: str
    name: str
    arguments: str


@dataclasses.dataclass(frozen=True)
class ChatCompletion:
    """A chat reply: its ``content``, its thinking (``reasoning``, for templates with <think>
    blocks), its ``tool_calls``, and the underlying :class:`Completion` (token ids, logprobs,
    timings), whose attributes it also answers to."""

    content: str
    reasoning: str
    tool_calls: Tuple[ToolCall, ...]
    finish_reason: str  #: "stop", "length" or "tool_calls", as OpenAI's
    completion: Completion

    @property
    def text(self) -> str:
        return self.content

    def __getattr__(self, name: str) -> Any:
        return getattr(self.completion, name)


@dataclasses.dataclass(frozen=True)
class PreparedChat:
    prompt: str
    #: (start, end) str offsets of the prompt's text copied from the messages, tools and kwargs
    data_spans: list[Tuple[int, int]]
    #: the prompt's token ids: control tokens parsed only outside data_spans
    prompt_ids: list[int]
    #: the image parts' file bytes, each with the index in prompt_ids of the token it goes before
    images: list[Tuple[bytes, int]]
    params: SamplingParams
    grammar: str
    triggers: list[str]
    shape: Optional[_core.ReplyShape]


def _body(messages: Sequence[Message], tools: Optional[Sequence[object]], tool_choice: Optional[object],
          parallel_tool_calls: Optional[bool], chat_template_kwargs: Optional[Mapping[str, Any]]) -> str:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise Error("messages must be a list of {'role': ..., 'content': ...} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise Error(f"message {i} needs a str 'role', got {m!r}")
        if "content" in m and m["content"] is not None and not isinstance(m["content"], (str, list)):
            raise Error(f"message {i}'s 'content' must be a str or a list of content parts, got {m['content']!r}")
        if "content" not in m and not m.get("tool_calls"):
            raise Error(f"message {i} needs a 'content'")
    body: dict[str, Any] = {"messages": list(messages)}
    if tools is not None:
        body["tools"] = list(tools)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if parallel_tool_calls is not None:
        body["parallel_tool_calls"] = parallel_tool_calls
    if chat_template_kwargs is not None:
        body["chat_template_kwargs"] = dict(chat_template_kwargs)
    _core.check_json_depth(body, "the chat")
    try:
        return json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise Error(f"the chat is not JSON-serialisable: {e}") from None


def prepare_chat(engine: Engine, messages: Sequence[Message], params: Optional[SamplingParams], *,
                 tools: Optional[Sequence[object]] = None, tool_choice: Optional[object] = None,
                 parallel_tool_calls: Optional[bool] = None, chat_template_kwargs: Optional[Mapping[str, Any]] = None,
                 add_generation_prompt: bool = True, constrain: bool = True, special_in_content: bool = False,
                 image_marker: str = "") -> PreparedChat:
    """The conversation laid out by the model's template and tokenized (control-token text in the
    messages stays text unless ``special_in_content``), its images (OpenAI ``image_url`` parts
    with data URLs) placed in the ids, ``params`` with its end of turn added to the stops, and
    (with ``constrain``) the grammar tool calls are constrained by. Each image part stands in the
    prompt's text as ``image_marker``, or as a marker drawn at random when it is empty, so that no
    text in a message can stand for an image."""
    body = _body(messages, tools, tool_choice, parallel_tool_calls, chat_template_kwargs)
    prompt, spans, ids, images, grammar, triggers, shape = engine._core.prepare_chat(
        body, add_generation_prompt, constrain, bool(special_in_content), image_marker)
    base = SamplingParams() if params is None else params
    if grammar and (base.grammar is not None or base.json_schema is not None):
        raise Error("a grammar or json_schema cannot be combined with tools")
    _, stop_ids, stop_strings = engine.chat_format
    return PreparedChat(prompt, [tuple(s) for s in spans], list(ids), list(images),
                        base.with_stops(stop_strings, stop_ids), grammar, list(triggers), shape)


def reply_text(engine: Engine, deltas: Iterable[Delta], ending: Iterable[int]) -> str:
    """The reply as the splitter reads it: the deltas' text, with the control tokens a tool-call
    layout begins with ([TOOL_CALLS], <|python_tag|>) spelled out, and no ending token."""
    ending_ids = set(ending) | set(engine._core.eog_ids())
    spelled = {i: piece for piece, i in engine._core.special_tokens().items() if i not in ending_ids}
    return "".join(spelled.get(d.token, "") if not d.text and d.token >= 0 else d.text for d in deltas)


def chat_completion(prepared: PreparedChat, completion: Completion, reply: Optional[str]) -> ChatCompletion:
    """The reply split by its shape (the whole text as content when it has none)."""
    finish = {"eos": "stop", "stop": "stop"}.get(completion.finish_reason, completion.finish_reason)
    if prepared.shape is None or reply is None:
        return ChatCompletion(completion.text, "", (), finish, completion)
    content, reasoning, calls = _core.split_reply(prepared.shape, reply)
    tool_calls = tuple(ToolCall(i or "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24)), n, a)
                       for i, n, a in calls)
    return ChatCompletion(content, reasoning, tool_calls, "tool_calls" if tool_calls else finish, completion)
