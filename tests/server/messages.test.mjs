// pagoda-server driven by Anthropic's official client (@anthropic-ai/sdk) through /v1/messages,
// on a random-weight model with Qwen's vocabulary and chat template: plain and streamed
// messages, a tool_use → tool_result round trip, stop sequences, count_tokens, and the errors
// in Anthropic's shape. The model knows nothing, so assertions are about structure: calls are
// well-formed because decoding is constrained, and a stream adds up to the whole message.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import Ajv from 'ajv';
import Anthropic from '@anthropic-ai/sdk';

import { qwenModel, qwenSkip, SHARED, startServer, stopServer } from './server_process.mjs';

const skip = qwenSkip;

const ajv = new Ajv({ strict: false });
const model = 'pagoda-test';
const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 16 }, unit: { enum: ['celsius', 'fahrenheit'] } },
    required: ['unit', 'city'],
    additionalProperties: false,
  },
};
const validWeather = ajv.compile(weather.input_schema);
const hello = [{ role: 'user', content: 'Say hello.' }];

function text(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

function assertValidToolUse(block) {
  assert.equal(block.type, 'tool_use');
  assert.equal(block.name, 'get_weather');
  assert.match(block.id, /^toolu_[A-Za-z0-9]{24}$/);
  assert.ok(validWeather(block.input), `${JSON.stringify(block.input)}: ${ajv.errorsText(validWeather.errors)}`);
  assert.deepEqual(Object.keys(block.input), ['city', 'unit'], 'the input keeps the schema\'s property order');
}

describe('the Messages API through @anthropic-ai/sdk', { skip }, () => {
  let server;
  let client;
  before(async () => {
    const file = qwenModel('qwen-messages', { context: 4096, seed: 7 });
    server = await startServer(['-t', '2', '--served-model-name', model, '--api-key', 'sk-test'], { model: file });
    client = new Anthropic({ baseURL: server.url, apiKey: 'sk-test', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('a message has Anthropic\'s shape, usage and stop reason', async () => {
    const m = await client.messages.create({ model, max_tokens: 12, system: 'Be brief.', messages: hello, temperature: 0 });
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, model);
    assert.match(m.id, /^msg_/);
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
    assert.ok(m.usage.input_tokens > 0);
    assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 12);
    for (const block of m.content) assert.equal(block.type, 'text');
  });

  test('a streamed message adds up to the whole one', async () => {
    const request = { model, max_tokens: 24, messages: hello, temperature: 0 };
    const whole = await client.messages.create(request);
    const stream = client.messages.stream(request);
    let streamed = '';
    const kinds = [];
    stream.on('text', (piece) => { streamed += piece; });
    stream.on('streamEvent', (event) => kinds.push(event.type));
    const final = await stream.finalMessage();
    assert.equal(streamed, text(whole));
    assert.equal(text(final), text(whole));
    assert.equal(final.stop_reason, whole.stop_reason);
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(kinds[0], 'message_start');
    assert.deepEqual(kinds.slice(-2), ['message_delta', 'message_stop']);
  });

  test('a required tool gives a tool_use block, and its tool_result goes back', async () => {
    const first = await client.messages.create({
      model, max_tokens: 80, messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weather], tool_choice: { type: 'any' },
    });
    assert.equal(first.stop_reason, 'tool_use');
    const calls = first.content.filter((b) => b.type === 'tool_use');
    assert.ok(calls.length >= 1);
    calls.forEach(assertValidToolUse);

    const second = await client.messages.create({
      model, max_tokens: 16, tools: [weather], tool_choice: { type: 'none' },
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: calls.map((c) => ({ type: 'tool_result', tool_use_id: c.id, content: '21 degrees' })) },
      ],
    });
    assert.notEqual(second.stop_reason, 'tool_use');
    assert.ok(second.content.every((b) => b.type === 'text'));
  });

  test('a named tool streams as a tool_use block whose input parses', async () => {
    const stream = client.messages.stream({
      model, max_tokens: 80, messages: [{ role: 'user', content: 'Weather?' }],
      tools: [weather], tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
    });
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const calls = final.content.filter((b) => b.type === 'tool_use');
    assert.equal(calls.length, 1);
    assertValidToolUse(calls[0]);
  });

  test('a stop sequence ends the text before it and is reported', async () => {
    const request = { model, max_tokens: 40, messages: hello, temperature: 0 };
    const free = text(await client.messages.create(request));
    const chars = Array.from(free);
    assert.ok(chars.length >= 8, `the greedy reply is too short to cut: ${free}`);
    const stop = chars.slice(4, 6).join('');
    const cut = await client.messages.create({ ...request, stop_sequences: [stop] });
    assert.equal(cut.stop_reason, 'stop_sequence');
    assert.equal(cut.stop_sequence, stop);
    assert.equal(text(cut).trimEnd(), free.slice(0, free.indexOf(stop)).trimEnd());
  });

  test('a max_tokens beyond the context is bounded by the context, not refused', async () => {
    // 8192 is past the 4096 positions of this model (the SDK refuses unstreamed calls above about 21k).
    const m = await client.messages.create({ model, max_tokens: 8192, messages: hello, temperature: 0, top_k: 1 });
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
    assert.ok(m.usage.input_tokens + m.usage.output_tokens <= 4096);
  });

  test('count_tokens counts what create would read', async () => {
    const request = { model, system: 'Be brief.', messages: hello, tools: [weather] };
    const counted = await client.messages.countTokens(request);
    const created = await client.messages.create({ ...request, max_tokens: 1 });
    assert.equal(counted.input_tokens, created.usage.input_tokens);
    const bare = await client.messages.countTokens({ model, messages: hello });
    assert.ok(bare.input_tokens < counted.input_tokens, 'the tools are part of the prompt');
  });

  test('errors come in Anthropic\'s shape', async () => {
    await assert.rejects(client.messages.create({ model, messages: hello }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.error.type, 'error');
      assert.equal(e.error.error.type, 'invalid_request_error');
      assert.match(e.error.error.message, /max_tokens/);
      return true;
    });
    await assert.rejects(client.messages.create({
      model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }],
    }), (e) => e.status === 400 && /takes no images/.test(e.error.error.message));
    await assert.rejects(client.messages.create({ model: 'claude-none', max_tokens: 4, messages: hello }),
      (e) => e.status === 404 && e.error.error.type === 'not_found_error');
    const stranger = new Anthropic({ baseURL: server.url, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(stranger.messages.create({ model, max_tokens: 4, messages: hello }),
      (e) => e.status === 401 && e.error.error.type === 'authentication_error');
  });
});

const r1 = path.join(SHARED ?? '', 'templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
const skipThinking = skip || (!fs.existsSync(r1) ? `${r1} is absent` : false);

describe('thinking blocks through @anthropic-ai/sdk', { skip: skipThinking }, () => {
  let server;
  let client;
  before(async () => {
    // DeepSeek-R1's template opens <think> in the prompt: the reply starts in its thinking.
    const file = qwenModel('qwen-thinking', { context: 2048, seed: 9 });
    server = await startServer(['-t', '2', '--served-model-name', model, '--chat-template-file', r1], { model: file });
    client = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('a reply that thinks gives a thinking block, streamed as thinking deltas', async () => {
    const request = { model, max_tokens: 16, messages: hello, temperature: 0 };
    const whole = await client.messages.create(request);
    assert.equal(whole.content[0].type, 'thinking');
    assert.ok(whole.content[0].thinking.length > 0);
    assert.equal(typeof whole.content[0].signature, 'string');
    let thinking = '';
    const stream = client.messages.stream(request);
    stream.on('thinking', (piece) => { thinking += piece; });
    const final = await stream.finalMessage();
    assert.equal(thinking, whole.content[0].thinking);
    assert.deepEqual(final.content, whole.content);

    // The thinking block goes back in the next turn (as the assistant's reasoning), and is read.
    const next = await client.messages.create({
      model, max_tokens: 4, messages: [...hello, { role: 'assistant', content: whole.content }, { role: 'user', content: 'And?' }],
    });
    assert.ok(next.usage.input_tokens > 0);
  });
});
