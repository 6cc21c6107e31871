// Vercel's AI SDK (`ai` with @ai-sdk/openai-compatible, unmodified) against /v1/chat/completions,
// on a random-weight model with Qwen's vocabulary and chat template: the model knows nothing, so
// the assertions are about structure. Every call whose decoding is constrained (a required or
// named tool, a schema) succeeds and validates against its zod schema, tool results go back to
// the model and a final answer comes back, and streamed output equals the whole.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, Output, stepCountIs, streamObject, streamText, tool } from 'ai';
import { z } from 'zod';

import { qwenModel, qwenSkip, startServer, stopServer } from './server_process.mjs';

const skip = qwenSkip;

// Small bounds keep the random model's arguments short (and the runs quick).
const addInput = z.object({ a: z.number().int().min(-100).max(100), b: z.number().int().min(-100).max(100) });
const weatherInput = z.object({ city: z.string().max(24), unit: z.enum(['celsius', 'fahrenheit']).optional() });

const order = z.object({
  id: z.number().int().min(0).max(9999),
  status: z.enum(['open', 'shipped', 'closed']),
  customer: z.object({ name: z.string().max(12), vip: z.boolean() }),
  items: z.array(z.object({ sku: z.string().max(8), qty: z.number().int().min(1).max(9) })).max(2),
  note: z.string().max(10).nullable(),
});

describe('the Vercel AI SDK through @ai-sdk/openai-compatible', { skip }, () => {
  let server;
  let model;
  // Every request body the SDK sent, to check what went over the wire.
  const sent = [];
  before(async () => {
    const file = qwenModel('qwen-vocab', { context: 4096, seed: 5 });
    server = await startServer(['-t', '2'], { model: file });
    const id = (await (await fetch(`${server.url}/v1/models`)).json()).data[0].id;
    const provider = createOpenAICompatible({
      baseURL: `${server.url}/v1`,
      name: 'pagoda',
      apiKey: 'unused',
      // pagoda constrains decoding to a json_schema; without this the SDK asks for json_object.
      supportsStructuredOutputs: true,
      includeUsage: true,
      fetch: (url, init) => {
        sent.push(JSON.parse(init.body));
        return fetch(url, init);
      },
    });
    model = provider.chatModel(id);
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  // Tools whose execute() records what it was called with.
  function tools(calls) {
    return {
      add: tool({
        description: 'Adds two integers',
        inputSchema: addInput,
        execute: async ({ a, b }) => {
          calls.push({ a, b });
          return { sum: a + b };
        },
      }),
      get_weather: tool({
        description: 'The weather in a city',
        inputSchema: weatherInput,
        execute: async ({ city }) => ({ city, sky: 'clear', degrees: 21 }),
      }),
    };
  }

  test('a three-step tool loop: two tool round trips, then a final answer', async () => {
    for (const seed of [1, 2]) {
      const calls = [];
      const first = sent.length;
      const r = await generateText({
        model, tools: tools(calls), maxRetries: 0, temperature: 1, seed, maxOutputTokens: 40,
        system: 'You add numbers with the add tool.',
        prompt: 'What is 2 + 3 + 4?',
        stopWhen: stepCountIs(3),
        // A random model would never stop calling (or never call): the first two steps must call
        // add, the third must answer.
        prepareStep: ({ stepNumber }) => (stepNumber < 2 ? { toolChoice: { type: 'tool', toolName: 'add' } } : { toolChoice: 'none' }),
      });
      assert.equal(r.steps.length, 3);
      for (const step of r.steps.slice(0, 2)) {
        assert.equal(step.finishReason, 'tool-calls');
        assert.ok(step.toolCalls.length >= 1);
        for (const c of step.toolCalls) {
          assert.equal(c.toolName, 'add');
          assert.ok(!c.invalid, JSON.stringify(c));
          assert.ok(addInput.safeParse(c.input).success, JSON.stringify(c.input));
        }
        assert.deepEqual(step.toolResults.map((t) => t.type), step.toolCalls.map(() => 'tool-result'));
      }
      assert.equal(calls.length, r.steps[0].toolCalls.length + r.steps[1].toolCalls.length);
      assert.deepEqual(r.steps[2].toolCalls, []);
      assert.ok(['stop', 'length'].includes(r.finishReason), r.finishReason);
      assert.equal(r.text, r.steps[2].text);

      // The results went back to the model: the last request holds both assistant turns with
      // their calls and a tool message per call, with execute()'s result.
      const bodies = sent.slice(first);
      assert.equal(bodies.length, 3);
      const last = bodies[2].messages;
      const toolMessages = last.filter((m) => m.role === 'tool');
      assert.equal(toolMessages.length, calls.length);
      const results = r.steps.slice(0, 2).flatMap((s) => s.toolResults);
      toolMessages.forEach((m, i) => {
        assert.equal(m.tool_call_id, results[i].toolCallId);
        assert.deepEqual(JSON.parse(m.content), results[i].output);
      });
      assert.equal(last.filter((m) => m.role === 'assistant' && m.tool_calls).length, 2);
      assert.deepEqual(bodies.map((b) => b.tool_choice), [
        { type: 'function', function: { name: 'add' } }, { type: 'function', function: { name: 'add' } }, 'none']);
    }
  });

  test('required and auto tool choices: valid calls, or prose under auto', async () => {
    for (const seed of [3, 4, 5]) {
      const r = await generateText({
        model, tools: tools([]), toolChoice: 'required', maxRetries: 0, temperature: 1, seed, maxOutputTokens: 60,
        prompt: 'Weather in Paris, or 2 + 2?',
      });
      assert.equal(r.finishReason, 'tool-calls');
      assert.ok(r.toolCalls.length >= 1);
      for (const c of r.toolCalls) {
        assert.ok(!c.invalid, JSON.stringify(c));
        const schema = { add: addInput, get_weather: weatherInput }[c.toolName];
        assert.ok(schema?.safeParse(c.input).success, JSON.stringify(c));
      }
    }
    const auto = await generateText({ model, tools: tools([]), maxRetries: 0, temperature: 1, seed: 6, maxOutputTokens: 30, prompt: 'Hi' });
    for (const c of auto.toolCalls) assert.ok(!c.invalid, JSON.stringify(c));
    assert.ok(auto.toolCalls.length > 0 || typeof auto.text === 'string');
  });

  test('streamed tool calls equal the unstreamed ones', async () => {
    for (const seed of [7, 8]) {
      const settings = {
        model, tools: tools([]), toolChoice: 'required', maxRetries: 0, temperature: 1, seed, maxOutputTokens: 60,
        prompt: 'Add 1 and 2',
      };
      const whole = await generateText(settings);
      const streamed = streamText(settings);
      const parts = [];
      for await (const part of streamed.fullStream) {
        if (part.type === 'error') throw part.error;
        parts.push(part);
      }
      const strip = (cs) => cs.map((c) => ({ toolName: c.toolName, input: c.input }));
      assert.deepEqual(strip(await streamed.toolCalls), strip(whole.toolCalls));
      assert.equal(await streamed.finishReason, 'tool-calls');
      // The arguments came as deltas that assemble into the same input.
      const deltas = parts.filter((p) => p.type === 'tool-input-delta').map((p) => p.delta).join('');
      assert.equal(deltas, whole.toolCalls.map((c) => JSON.stringify(c.input)).join(''));
    }
  });

  test('generateObject and Output.object return objects that validate, on every seed', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const { object } = await generateObject({ model, schema: order, maxRetries: 0, temperature: 1, seed, maxOutputTokens: 150, prompt: 'An order, as JSON.' });
      assert.ok(order.safeParse(object).success, JSON.stringify(object));
      const { output } = await generateText({
        model, output: Output.object({ schema: order }), maxRetries: 0, temperature: 1, seed, maxOutputTokens: 150, prompt: 'An order, as JSON.',
      });
      // The same request, so the same document.
      assert.deepEqual(output, object);
      // The schema went over the wire in its own key order.
      const format = sent.at(-1).response_format;
      assert.equal(format.type, 'json_schema');
      assert.deepEqual(Object.keys(format.json_schema.schema.properties), Object.keys(order.shape));
      assert.deepEqual(Object.keys(object), Object.keys(order.shape));
    }
  });

  test('zod\'s string formats and records in a tool\'s input come back valid', async () => {
    // zod 4 writes a format and a pattern for z.email(), z.uuid(), z.iso.*, and propertyNames for
    // records: what a tool written for a real service looks like.
    const invite = z.object({
      email: z.email(),
      team: z.uuid(),
      start: z.iso.date(),
      at: z.iso.datetime(),
      from: z.ipv4(),
      labels: z.record(z.string(), z.number().int().min(0).max(9)),
      flags: z.record(z.enum(['admin', 'billing']), z.boolean()),
    });
    const calls = [];
    const invite_user = tool({ description: 'Invites a user', inputSchema: invite, execute: async (input) => calls.push(input) });
    for (const seed of [1, 2, 3]) {
      const r = await generateText({
        model, tools: { invite_user }, toolChoice: { type: 'tool', toolName: 'invite_user' }, maxRetries: 0, temperature: 1, seed,
        maxOutputTokens: 300, prompt: 'Invite ada@example.com.',
      });
      assert.equal(r.finishReason, 'tool-calls');
      for (const c of r.toolCalls) {
        assert.ok(!c.invalid, JSON.stringify(c));
        assert.ok(invite.safeParse(c.input).success, JSON.stringify(c.input));
      }
    }
    assert.ok(calls.length >= 3);
  });

  test('Output.array and Output.choice', async () => {
    const item = z.object({ word: z.string().max(8), n: z.number().int().min(0).max(9) });
    let elements = 0;
    for (const seed of [1, 2, 3, 4]) {
      const arr = await generateText({
        model, output: Output.array({ element: item }), maxRetries: 0, temperature: 1, seed, maxOutputTokens: 120, prompt: 'A list.',
      });
      assert.ok(Array.isArray(arr.output));
      for (const e of arr.output) assert.ok(item.safeParse(e).success, JSON.stringify(e));
      elements += arr.output.length;
    }
    assert.ok(elements > 0, 'some seed gives a non-empty array');
    for (const seed of [12, 13, 14]) {
      const choice = await generateText({
        model, output: Output.choice({ options: ['red', 'green', 'blue'] }), maxRetries: 0, temperature: 1, seed, maxOutputTokens: 30, prompt: 'A color.',
      });
      assert.ok(['red', 'green', 'blue'].includes(choice.output), choice.output);
    }
  });

  test('streamObject\'s final object equals generateObject\'s', async () => {
    const settings = { model, schema: order, maxRetries: 0, temperature: 1, seed: 21, maxOutputTokens: 150, prompt: 'An order, as JSON.' };
    const whole = await generateObject(settings);
    const streamed = streamObject(settings);
    let partials = 0;
    for await (const partial of streamed.partialObjectStream) {
      assert.equal(typeof partial, 'object');
      partials += 1;
    }
    assert.ok(partials > 1, 'the object arrives in pieces');
    assert.deepEqual(await streamed.object, whole.object);
  });

  test('streamText\'s text equals generateText\'s for the same greedy request', async () => {
    for (const [seed, prompt] of [[3, 'Hello'], [4, 'Tell me a story about a dragon.']]) {
      const settings = { model, maxRetries: 0, temperature: 0, seed, maxOutputTokens: 40, system: 'Be brief.', prompt };
      const whole = await generateText(settings);
      const streamed = streamText(settings);
      let text = '';
      for await (const delta of streamed.textStream) text += delta;
      assert.ok(whole.text.length > 0);
      assert.equal(text, whole.text);
      assert.equal(await streamed.finishReason, whole.finishReason);
      // Usage arrives in the stream's last chunk (stream_options.include_usage).
      const usage = await streamed.usage;
      assert.equal(usage.inputTokens, whole.usage.inputTokens);
      assert.equal(usage.outputTokens, whole.usage.outputTokens);
    }
  });
});
