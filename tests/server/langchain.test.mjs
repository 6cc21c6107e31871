// LangChain's ChatOpenAI (@langchain/openai, unmodified) against /v1/chat/completions, on a
// random-weight model with Qwen's vocabulary and chat template: the model knows nothing, so the
// assertions are about structure. Bound tools with a required or named choice come back as
// parsed tool_calls with argument objects, withStructuredOutput returns objects that validate
// (by json_schema and by function calling), and streamed chunks concatenate to the whole.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

import { qwenModel, qwenSkip, startServer, stopServer } from './server_process.mjs';

const skip = qwenSkip;

// Small bounds keep the random model's arguments short (and the runs quick).
const addInput = z.object({ a: z.number().int().min(-100).max(100), b: z.number().int().min(-100).max(100) });
const weatherInput = z.object({ city: z.string().max(24), unit: z.enum(['celsius', 'fahrenheit']).optional() });
const add = tool(async ({ a, b }) => String(a + b), { name: 'add', description: 'Adds two integers', schema: addInput });
const weather = tool(async ({ city }) => `Sunny in ${city}`, { name: 'get_weather', description: 'The weather in a city', schema: weatherInput });
const inputs = { add: addInput, get_weather: weatherInput };

const person = z.object({
  name: z.string().max(12).describe('The full name'),
  age: z.number().int().min(0).max(120),
  role: z.enum(['admin', 'user', 'guest']),
  tags: z.array(z.string().max(6)).max(3),
  manager: z.object({ name: z.string().max(12) }).nullable(),
});

function assertValidToolCall(call, name) {
  if (name) assert.equal(call.name, name);
  assert.equal(call.type, 'tool_call');
  assert.match(call.id, /^call_/);
  assert.equal(typeof call.args, 'object');
  assert.ok(inputs[call.name]?.safeParse(call.args).success, JSON.stringify(call));
}

describe('LangChain\'s ChatOpenAI', { skip }, () => {
  let server;
  let chat;
  // Every request body LangChain sent, to check what went over the wire.
  const sent = [];
  before(async () => {
    const file = qwenModel('qwen-vocab', { context: 4096, seed: 5 });
    server = await startServer(['-t', '2'], { model: file });
    const model = (await (await fetch(`${server.url}/v1/models`)).json()).data[0].id;
    // `seed` is a call option in LangChain, not a constructor field: modelKwargs puts it in every body.
    chat = ({ seed, ...options } = {}) => new ChatOpenAI({
      configuration: {
        baseURL: `${server.url}/v1`,
        fetch: (url, init) => {
          sent.push(JSON.parse(init.body));
          return fetch(url, init);
        },
      },
      apiKey: 'unused',
      model,
      temperature: 0,
      maxTokens: 80,
      maxRetries: 0,
      modelKwargs: seed === undefined ? {} : { seed },
      ...options,
    });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('bindTools with a required or named choice returns parsed tool_calls', async () => {
    for (const seed of [1, 2, 3]) {
      const required = await chat({ temperature: 1, seed }).bindTools([add, weather], { tool_choice: 'required' }).invoke('Weather in Paris, or 2 + 2?');
      assert.ok(required.tool_calls.length >= 1);
      assert.deepEqual(required.invalid_tool_calls, []);
      required.tool_calls.forEach((c) => assertValidToolCall(c));
      assert.equal(required.response_metadata.finish_reason, 'tool_calls');

      const named = await chat({ temperature: 1, seed }).bindTools([add, weather], { tool_choice: 'get_weather' }).invoke('2 + 2?');
      assert.ok(named.tool_calls.length >= 1);
      named.tool_calls.forEach((c) => assertValidToolCall(c, 'get_weather'));
      assert.deepEqual(sent.at(-1).tool_choice, { type: 'function', function: { name: 'get_weather' } });
    }
  });

  test('strict tools without parallel calls give exactly one call', async () => {
    for (const seed of [4, 5, 6]) {
      const m = await chat({ temperature: 1, seed }).bindTools([add, weather], { tool_choice: 'required', strict: true, parallel_tool_calls: false }).invoke('Add 1 and 2');
      assert.equal(m.tool_calls.length, 1);
      assertValidToolCall(m.tool_calls[0]);
      const body = sent.at(-1);
      assert.equal(body.parallel_tool_calls, false);
      assert.ok(body.tools.every((t) => t.function.strict === true));
    }
  });

  test('a tool round trip: the ToolMessage goes back and the model answers', async () => {
    const bound = chat({ temperature: 1, seed: 7 }).bindTools([add], { tool_choice: 'add' });
    const messages = [new SystemMessage('Use the add tool.'), new HumanMessage('What is 2 + 3?')];
    const call = await bound.invoke(messages);
    assert.ok(call.tool_calls.length >= 1);
    messages.push(call);
    for (const c of call.tool_calls) messages.push(await add.invoke(c));
    assert.ok(messages.at(-1) instanceof ToolMessage);
    const answer = await chat({ temperature: 1, seed: 8 }).bindTools([add], { tool_choice: 'none' }).invoke(messages);
    assert.equal(answer.tool_calls.length, 0);
    assert.equal(typeof answer.content, 'string');
    assert.ok(answer.content.length > 0);
    const body = sent.at(-1);
    assert.deepEqual(body.messages.map((m) => m.role), ['system', 'user', 'assistant', ...call.tool_calls.map(() => 'tool')]);
    assert.equal(body.messages[2].tool_calls.length, call.tool_calls.length);
  });

  test('a hand-written tool history is accepted', async () => {
    const messages = [
      new HumanMessage('What is 2 + 3?'),
      new AIMessage({ content: '', tool_calls: [{ id: 'call_1', name: 'add', args: { a: 2, b: 3 }, type: 'tool_call' }] }),
      new ToolMessage({ tool_call_id: 'call_1', content: '5' }),
    ];
    const m = await chat().bindTools([add]).invoke(messages);
    assert.equal(m.getType(), 'ai');
  });

  for (const method of ['jsonSchema', 'functionCalling']) {
    test(`withStructuredOutput by ${method} returns objects that validate, on every seed`, async () => {
      const seen = new Set();
      for (const seed of [1, 2, 3, 4]) {
        const structured = chat({ temperature: 1, seed, maxTokens: 150 }).withStructuredOutput(person, { method, name: 'person' });
        const value = await structured.invoke('Describe a person as JSON.');
        assert.ok(person.safeParse(value).success, JSON.stringify(value));
        // In the schema's order, whether it came as the content or as a call's arguments.
        assert.deepEqual(Object.keys(value), Object.keys(person.shape));
        const body = sent.at(-1);
        assert.equal(body.seed, seed);
        seen.add(JSON.stringify(value));
        if (method === 'jsonSchema') assert.equal(body.response_format.type, 'json_schema');
        else assert.deepEqual(body.tool_choice, { type: 'function', function: { name: 'person' } });
      }
      assert.ok(seen.size > 1, 'the seeds give different objects');
    });
  }

  test('withStructuredOutput with zod\'s string formats and records returns objects that validate', async () => {
    // zod 4 writes a format and a pattern for z.email(), z.uuid(), z.iso.*, and propertyNames for records.
    const contact = z.object({
      email: z.email(),
      id: z.uuid(),
      born: z.iso.date(),
      seen: z.iso.datetime(),
      scores: z.record(z.string(), z.number().int().min(0).max(9)),
      prefs: z.record(z.enum(['mail', 'sms']), z.boolean()),
    });
    for (const method of ['jsonSchema', 'functionCalling']) {
      for (const seed of [1, 2]) {
        const value = await chat({ temperature: 1, seed, maxTokens: 300 }).withStructuredOutput(contact, { method }).invoke('A contact.');
        assert.ok(contact.safeParse(value).success, JSON.stringify(value));
      }
    }
  });

  test('withStructuredOutput with includeRaw gives the message and the parsed object', async () => {
    const structured = chat({ temperature: 1, seed: 9, maxTokens: 150 }).withStructuredOutput(person, { method: 'functionCalling', includeRaw: true });
    const { raw, parsed } = await structured.invoke('A person.');
    assert.ok(person.safeParse(parsed).success, JSON.stringify(parsed));
    assert.deepEqual(raw.tool_calls[0].args, parsed);
  });

  test('streamed chunks concatenate to invoke()\'s content, usage included', async () => {
    for (const [seed, prompt] of [[1, 'Hello'], [2, 'Tell me about the sea.']]) {
      const model = chat({ seed, maxTokens: 40 });
      const whole = await model.invoke(prompt);
      let text = '';
      let merged;
      for await (const chunk of await model.stream(prompt)) {
        text += chunk.content;
        merged = merged ? merged.concat(chunk) : chunk;
      }
      assert.ok(whole.content.length > 0);
      assert.equal(text, whole.content);
      assert.equal(sent.at(-1).stream_options?.include_usage, true);
      assert.deepEqual(merged.usage_metadata?.input_tokens, whole.usage_metadata.input_tokens);
      assert.deepEqual(merged.usage_metadata?.output_tokens, whole.usage_metadata.output_tokens);
    }
  });

  test('streamed tool-call chunks merge into invoke()\'s calls', async () => {
    for (const seed of [11, 12]) {
      const bound = chat({ temperature: 1, seed }).bindTools([add, weather], { tool_choice: 'required' });
      const whole = await bound.invoke('Add 1 and 2');
      let merged;
      for await (const chunk of await bound.stream('Add 1 and 2')) merged = merged ? merged.concat(chunk) : chunk;
      assert.equal(sent.at(-1).seed, seed);
      const strip = (calls) => calls.map((c) => ({ name: c.name, args: c.args }));
      assert.deepEqual(strip(merged.tool_calls), strip(whole.tool_calls));
      merged.tool_calls.forEach((c) => assertValidToolCall(c));
    }
  });
});
