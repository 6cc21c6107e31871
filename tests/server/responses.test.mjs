// POST /v1/responses through the official openai client (client.responses.create, plain and
// streamed), on a random-weight model with Qwen's vocabulary and chat template: the stream's
// events add up to the unstreamed response, a tool round trip (function_call out,
// function_call_output back in), json_schema output in the schema's order, thinking as a
// reasoning item, the length cut as "incomplete", openai 6's zod helpers, and what a stateless
// server refuses as OpenAI's 400s.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import Ajv from 'ajv';
import OpenAI from 'openai';
import { zodResponsesFunction, zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { qwenModel, qwenSkip, startServer, stopServer } from './server_process.mjs';

const skip = qwenSkip;

const ajv = new Ajv({ strict: false, allErrors: true });

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 24 }, unit: { enum: ['celsius', 'fahrenheit'] } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

// The events of a streamed response, checked for the documented framing on the way.
async function streamed(client, body) {
  const events = [];
  for await (const event of await client.responses.create({ ...body, stream: true })) events.push(event);
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `${e.type} is event ${i}`));
  assert.deepEqual(events.slice(0, 2).map((e) => e.type), ['response.created', 'response.in_progress']);
  assert.equal(events[0].response.status, 'in_progress');
  assert.deepEqual(events[0].response.output, []);
  const last = events.at(-1);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  return { events, response: last.response, text: deltas(events, 'response.output_text.delta') };
}

function deltas(events, type) {
  return events.filter((e) => e.type === type).map((e) => e.delta).join('');
}

// A response's output without the ids, which are new for every response.
function withoutIds(output) {
  return output.map(({ id, call_id, ...rest }) => rest);
}

describe('the Responses API', { skip }, () => {
  let server;
  let client;
  before(async () => {
    const model = qwenModel('qwen-vocab', { context: 4096, seed: 5 });
    server = await startServer(['-t', '2'], { model });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  const greedy = { temperature: 0, seed: 1 };

  test('a response: one message item, its output_text, the usage and the settings it ran with', async () => {
    const r = await client.responses.create({ input: 'Tell me a story.', max_output_tokens: 16, ...greedy });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_[A-Za-z0-9]+$/);
    assert.ok(['completed', 'incomplete'].includes(r.status));
    assert.equal(r.output.length, 1);
    const [message] = r.output;
    assert.equal(message.type, 'message');
    assert.equal(message.role, 'assistant');
    assert.match(message.id, /^msg_/);
    assert.equal(message.content[0].type, 'output_text');
    assert.equal(r.output_text, message.content[0].text);
    assert.ok(r.output_text.length > 0);
    assert.ok(r.usage.input_tokens > 0);
    assert.ok(r.usage.output_tokens > 0 && r.usage.output_tokens <= 16);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    assert.equal(r.store, false);
    assert.equal(r.previous_response_id, null);
    assert.equal(r.max_output_tokens, 16);
    assert.equal(r.temperature, 0);
    assert.deepEqual(r.text, { format: { type: 'text' } });
    const again = await client.responses.create({ input: 'Tell me a story.', max_output_tokens: 16, ...greedy });
    assert.equal(again.output_text, r.output_text, 'greedy is deterministic');
    // Agent frameworks send an empty tool list with "auto": no tools, the same reply.
    const idle = await client.responses.create({ input: 'Tell me a story.', max_output_tokens: 16, tools: [], tool_choice: 'auto', ...greedy });
    assert.equal(idle.output_text, r.output_text);
  });

  test('a streamed response adds up to the unstreamed one', async () => {
    const body = { input: [{ role: 'user', content: 'Once upon a time' }], max_output_tokens: 24, ...greedy };
    const whole = await client.responses.create(body);
    const { events, response, text } = await streamed(client, body);
    assert.equal(text, whole.output_text);
    assert.deepEqual(withoutIds(response.output), withoutIds(whole.output));
    assert.equal(response.status, whole.status);
    assert.deepEqual(response.usage, whole.usage);
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(2, 4), ['response.output_item.added', 'response.content_part.added']);
    assert.deepEqual(types.slice(-4, -1), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done']);
    assert.equal(events.find((e) => e.type === 'response.output_text.done').text, whole.output_text);
  });

  test('instructions lead the prompt and come back in the response', async () => {
    const plain = await client.responses.create({ input: 'Hi', max_output_tokens: 2, ...greedy });
    const told = await client.responses.create({ input: 'Hi', instructions: 'Answer in French.', max_output_tokens: 2, ...greedy });
    assert.equal(told.instructions, 'Answer in French.');
    assert.equal(plain.instructions, null);
    assert.ok(told.usage.input_tokens > plain.usage.input_tokens);
  });

  test('a tool round trip: a function_call item, then its output sent back', async () => {
    const validate = ajv.compile(weather.parameters);
    for (const seed of [1, 2, 3]) {
      const question = { role: 'user', content: 'What is the weather in Paris?' };
      const r = await client.responses.create({
        input: [question], tools: [weather], tool_choice: 'required', parallel_tool_calls: false, seed, temperature: 1,
        max_output_tokens: 100,
      });
      const calls = r.output.filter((item) => item.type === 'function_call');
      assert.equal(calls.length, 1, JSON.stringify(r.output));
      const [call] = calls;
      assert.equal(call.name, 'get_weather');
      assert.equal(call.status, 'completed');
      assert.match(call.id, /^fc_/);
      assert.equal(typeof call.call_id, 'string');
      const args = JSON.parse(call.arguments);
      assert.ok(validate(args), `${call.arguments}: ${ajv.errorsText(validate.errors)}`);
      assert.equal(r.tool_choice, 'required');
      assert.equal(r.tools[0].name, 'get_weather');

      const next = await client.responses.create({
        input: [question, call, { type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21}' }],
        tools: [weather], seed, temperature: 1, max_output_tokens: 12,
      });
      assert.ok(['completed', 'incomplete'].includes(next.status));
      assert.ok(next.usage.input_tokens > r.usage.input_tokens, 'the call and its output are in the prompt');
    }
  });

  test('allowed_tools narrows the tools a required call may name', async () => {
    const clock = { type: 'function', name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } };
    for (const seed of [1, 2, 3]) {
      const r = await client.responses.create({
        input: 'Weather?', tools: [clock, weather], seed, temperature: 1, max_output_tokens: 100,
        tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'get_weather' }] },
      });
      const calls = r.output.filter((item) => item.type === 'function_call');
      assert.ok(calls.length >= 1, JSON.stringify(r.output));
      for (const call of calls) assert.equal(call.name, 'get_weather');
    }
  });

  test('a streamed call arrives as function_call_arguments events and equals the unstreamed one', async () => {
    const body = {
      input: 'Weather in Rome?', tools: [weather], tool_choice: { type: 'function', name: 'get_weather' }, seed: 7,
      temperature: 1, max_output_tokens: 100,
    };
    const whole = await client.responses.create(body);
    const { events, response } = await streamed(client, body);
    const added = events.filter((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
    assert.ok(added.length >= 1);
    assert.equal(added[0].item.arguments, '');
    const args = deltas(events.filter((e) => e.output_index === added[0].output_index), 'response.function_call_arguments.delta');
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    assert.equal(args, done.arguments);
    const call = response.output.find((item) => item.type === 'function_call');
    assert.equal(call.arguments, args);
    assert.deepEqual(withoutIds(response.output), withoutIds(whole.output));
  });

  test('text.format json_schema: output_text validates, its properties in the schema\'s order', async () => {
    const schema = {
      type: 'object',
      properties: {
        zeta: { type: 'integer', minimum: 0, maximum: 99 },
        reasoning: { type: 'string', maxLength: 16 },
        answer: { type: 'object', properties: { value: { type: 'integer' }, unit: { enum: ['m', 's'] } }, required: ['unit', 'value'], additionalProperties: false },
      },
      required: ['answer', 'zeta', 'reasoning'],
      additionalProperties: false,
    };
    const validate = ajv.compile(schema);
    for (const seed of [1, 2, 3, 4]) {
      const r = await client.responses.create({
        input: 'Answer in JSON.', seed, temperature: 1, max_output_tokens: 120,
        text: { format: { type: 'json_schema', name: 'ordered', schema, strict: true } },
      });
      const value = JSON.parse(r.output_text);
      assert.ok(validate(value), `${r.output_text}: ${ajv.errorsText(validate.errors)}`);
      assert.deepEqual(Object.keys(value), ['zeta', 'reasoning', 'answer'], r.output_text);
      assert.deepEqual(Object.keys(value.answer), ['value', 'unit'], r.output_text);
      assert.deepEqual(Object.keys(r.text.format.schema.properties), ['zeta', 'reasoning', 'answer']);
    }
  });

  test('tools beside text.format: each reply is a valid call or an answer in the format', async () => {
    // As agent frameworks send a structured final output with tools ("auto").
    const schema = { type: 'object', properties: { done: { type: 'boolean' }, note: { type: 'string', maxLength: 12 } }, required: ['done', 'note'], additionalProperties: false };
    const validateAnswer = ajv.compile(schema);
    const validateArgs = ajv.compile(weather.parameters);
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const r = await client.responses.create({
        input: 'Weather in Oslo, then report.', tools: [weather], seed, temperature: 1, max_output_tokens: 100,
        text: { format: { type: 'json_schema', name: 'report', schema, strict: true } },
      });
      const calls = r.output.filter((item) => item.type === 'function_call');
      if (calls.length) {
        for (const call of calls) assert.ok(validateArgs(JSON.parse(call.arguments)), call.arguments);
        assert.equal(r.output_text, '');
      } else {
        assert.ok(validateAnswer(JSON.parse(r.output_text)), r.output_text);
      }
    }
  });

  test('thinking is a reasoning item before the message, whole and streamed', async () => {
    // Qwen's template thinks in <think> blocks; a grammar (llama-server's field) makes the model write one.
    const grammar = 'root ::= "<think>" [a-z ]{1,16} "</think>" "\\n\\n" [a-z]{1,8}';
    const body = { input: 'Think first.', seed: 8, temperature: 1, max_output_tokens: 40, grammar };
    const whole = await client.responses.create(body);
    assert.deepEqual(whole.output.map((item) => item.type), ['reasoning', 'message']);
    assert.match(whole.output[0].content[0].text, /^[a-z ]{1,16}$/);
    assert.match(whole.output_text, /^[a-z]{1,8}$/);
    const { events, response, text } = await streamed(client, body);
    assert.equal(deltas(events, 'response.reasoning_text.delta'), whole.output[0].content[0].text);
    assert.equal(text, whole.output_text);
    assert.deepEqual(withoutIds(response.output), withoutIds(whole.output));
  });

  test('the client\'s stream helper assembles the same response from the events', async () => {
    // responses.stream() keeps a snapshot built from output_item, content_part and delta
    // events, and fails on any event naming an item or part it was not told about.
    const bodies = [
      { input: 'Think first.', seed: 8, temperature: 1, max_output_tokens: 40, grammar: 'root ::= "<think>" [a-z ]{1,16} "</think>" "\\n\\n" [a-z]{1,8}' },
      { input: 'Weather in Oslo?', seed: 5, temperature: 1, max_output_tokens: 100, tools: [weather], tool_choice: 'required' },
    ];
    for (const body of bodies) {
      const whole = await client.responses.create(body);
      let text = '';
      const stream = client.responses.stream(body);
      stream.on('response.output_text.delta', (e) => { text += e.delta; });
      const final = await stream.finalResponse();
      assert.equal(text, whole.output_text);
      const parts = final.output.filter((item) => item.type === 'message').flatMap((item) => item.content);
      assert.equal(parts.map((part) => part.text).join(''), whole.output_text);
      // The helper adds its own `parsed` fields (text.format and strict tools parsed), not sent.
      const unparsed = final.output.map(({ parsed_arguments, ...item }) => (
        item.content ? { ...item, content: item.content.map(({ parsed, ...part }) => part) } : item));
      assert.deepEqual(withoutIds(unparsed), withoutIds(whole.output));
    }
  });

  test('openai 6\'s zod helpers: responses.parse() gives a validated object and parsed call arguments', async () => {
    const Person = z.object({ name: z.string().max(10), age: z.number().int().min(0).max(120), tags: z.array(z.enum(['a', 'b'])).max(2) });
    for (const seed of [1, 2, 3]) {
      const body = { input: 'Describe a person.', seed, temperature: 1, max_output_tokens: 80, text: { format: zodTextFormat(Person, 'person') } };
      const whole = await client.responses.parse(body);
      assert.ok(Person.safeParse(whole.output_parsed).success, whole.output_text);
      const streamed = await client.responses.stream(body).finalResponse();
      assert.deepEqual(streamed.output_parsed, whole.output_parsed);

      const call = await client.responses.parse({
        input: 'Make a person.', seed, temperature: 1, max_output_tokens: 80, tool_choice: 'required',
        tools: [zodResponsesFunction({ name: 'person', parameters: Person })],
      });
      const fc = call.output.find((item) => item.type === 'function_call');
      assert.equal(fc.name, 'person');
      assert.ok(Person.safeParse(fc.parsed_arguments).success, fc.arguments);
    }
  });

  test('a reply cut by max_output_tokens is incomplete, whole and streamed', async () => {
    const body = { input: 'Write a long story.', max_output_tokens: 3, ...greedy };
    const r = await client.responses.create(body);
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.usage.output_tokens, 3);
    const { events, response } = await streamed(client, body);
    assert.equal(events.at(-1).type, 'response.incomplete');
    assert.equal(response.status, 'incomplete');
    // A budget sized for a hosted model is bounded by the context (4,096 here), not refused (a
    // short grammar ends the reply soon).
    const big = await client.responses.create({ input: 'Hi', max_output_tokens: 100000, grammar: 'root ::= [a-z]{1,4}', ...greedy });
    assert.equal(big.status, 'completed');
    assert.equal(big.max_output_tokens, 100000);
    assert.ok(big.usage.total_tokens <= 4096);
  });

  test('what a stateless text server cannot do is a 400 in OpenAI\'s error shape', async () => {
    const cases = [
      [{ input: 'x', previous_response_id: 'resp_123' }, /^previous_response_id is not supported: this server does not store responses/],
      [{ input: 'x', conversation: 'conv_1' }, /'conversation' is not supported/],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, /'input\[0\]\.content\[0\]' is an input_image by file_id/],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,aGk=' }] }] }, /this model takes no images/],
      [{ input: 'x', tools: [{ type: 'web_search' }] }, /'tools\[0\]' is a 'web_search' tool/],
      [{ input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, /'input\[0\]\.call_id' must be a string/],
      [{ input: 'x', text: { format: { type: 'json_schema', name: 'a' } } }, /'text\.format\.schema'/],
    ];
    for (const [body, message] of cases) {
      await assert.rejects(client.responses.create({ max_output_tokens: 4, ...body }), (e) => {
        assert.equal(e.status, 400, JSON.stringify(body));
        assert.match(e.error.message, message);
        assert.equal(e.error.type, 'invalid_request_error');
        return true;
      });
    }
    // A stream refused before it starts is the same JSON error, not an event stream.
    const res = await fetch(`${server.url}/v1/responses`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ input: 'x', stream: true, previous_response_id: 'resp_1' }),
    });
    assert.equal(res.status, 400);
    const error = await res.json();
    assert.deepEqual(Object.keys(error.error).sort(), ['code', 'message', 'param', 'type']);
  });
});
