// pagoda-server's POST /apply-template (llama-server's): a chat body rendered with the chat
// template (here given with --chat-template-file) and answered as {"prompt", "data_spans"}, with
// tool calls, tool turns, content as a list of parts, tools and chat_template_kwargs reaching the
// template (arguments and tools with their keys in the order sent) and the byte ranges the
// template copied from them as data spans; malformed bodies and a template that raises are 400s.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { scratch, startServer, stopServer } from './server_process.mjs';

// A small ChatML-like template that prints every variable it is given.
const TEMPLATE = `{%- if messages[0].role == 'nobody' %}{{ raise_exception('no such role') }}{% endif -%}
{%- for m in messages -%}
<|{{ m.role }}|>{{ m.content if m.content is not none else '-' }}
{%- for c in m.tool_calls or [] %}[call {{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}
{%- if m.tool_call_id is defined %}(for {{ m.tool_call_id }} from {{ m.name }}){% endif %}
{% endfor -%}
{%- if tools is defined %}tools: {{ tools | map(attribute='function.name') | join(', ') }} {{ tools[0] | tojson }}
{% endif -%}
{%- if enable_thinking is defined %}thinking: {{ enable_thinking }}
{% endif -%}
{%- if add_generation_prompt %}<|assistant|>{% endif %}`;

describe('pagoda-server /apply-template', () => {
  let server;
  before(async () => {
    const file = path.join(scratch, 'apply-template.jinja');
    fs.writeFileSync(file, TEMPLATE);
    server = await startServer(['--chat-template-file', file]);
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  const post = (body) =>
    fetch(`${server.url}/apply-template`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

  test('a plain conversation, with the generation prompt by default', async () => {
    const res = await post({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] });
    assert.equal(res.status, 200);
    // (the expected prompts are jinja2's renderings: trim_blocks eats the newline after each {% endif %})
    // The roles are template text (a known role is), the contents data.
    assert.deepEqual(await res.json(), { prompt: '<|system|>Be brief.<|user|>Hi<|assistant|>', data_spans: [[10, 19], [27, 29]] });
  });

  test('tool calls, tool turns, content parts, tools and kwargs reach the template', async () => {
    const res = await post({
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Weather in ' }, { type: 'text', text: 'Paris?' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris', days: 2 } } }] },
        { role: 'tool', tool_call_id: 'call_1', name: 'get_weather', content: '21 C' },
      ],
      // keys in the order transformers' users write them, not sorted: the template prints them so
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      chat_template_kwargs: { enable_thinking: false },
      add_generation_prompt: false,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      prompt:
        '<|user|>Weather in Paris?' +
        '<|assistant|>-[call call_1 get_weather {"city": "Paris", "days": 2}]' +
        '<|tool|>21 C(for call_1 from get_weather)' +
        'tools: get_weather {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}\n' +
        'thinking: False\n',
      // content, call id, name, arguments (tojson of data is data whole), tool result, its call
      // id and name, the tool's name, the tool; the kwarg is a boolean, printed as template text
      data_spans: [[8, 25], [45, 51], [52, 63], [64, 92], [101, 105], [110, 116], [122, 133], [141, 152], [153, 288]],
    });
  });

  test('malformed bodies and a raising template are 400s naming the problem', async () => {
    const notJson = await fetch(`${server.url}/apply-template`, { method: 'POST', body: '{"messages": [' });
    assert.equal(notJson.status, 400);
    const noRole = await post({ messages: [{ content: 'x' }] });
    assert.equal(noRole.status, 400);
    assert.match((await noRole.json()).error.message, /messages\[0\]/);
    const badKwargs = await post({ messages: [{ role: 'user', content: 'x' }], chat_template_kwargs: [1] });
    assert.equal(badKwargs.status, 400);
    const raised = await post({ messages: [{ role: 'nobody', content: 'x' }] });
    assert.equal(raised.status, 400);
    assert.match((await raised.json()).error.message, /no such role/);
  });
});
