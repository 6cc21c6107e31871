// Structured output and tool calls through the official openai client, on a random-weight
// model with Qwen's 152k vocabulary and its chat template (Hermes-style <tool_call> layout):
// a model that knows nothing still returns JSON that validates (checked by Ajv, not pagoda)
// and well-formed calls, because decoding is constrained. Bad schemas, grammars and tools are
// 400s naming the problem.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { qwenModel, qwenSkip, startServer, stopServer } from './server_process.mjs';

const skip = qwenSkip;

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

// Varied schemas: each is asked for several times with different seeds.
const schemas = [
  { type: 'object', properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 } }, required: ['name', 'age'], additionalProperties: false },
  { type: 'array', items: { type: 'integer', minimum: -15, maximum: 1234 }, minItems: 1, maxItems: 5 },
  { type: 'object', properties: { ok: { type: 'boolean' }, tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, maxItems: 3 } }, required: ['ok'] },
  { enum: ['yes', 'no', 42, null] },
  { type: 'object', properties: { when: { type: 'string', format: 'date' }, id: { type: 'string', format: 'uuid' } }, required: ['when', 'id'] },
  { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2,4}$' } }, required: ['code'] },
  { anyOf: [{ type: 'object', properties: { cat: { const: 'meow' } }, required: ['cat'] }, { type: 'object', properties: { dog: { type: 'number', minimum: 0, maximum: 10 } }, required: ['dog'] }] },
  { $defs: { node: { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }, required: ['v'] } }, $ref: '#/$defs/node' },
  { type: 'object', properties: { point: { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } }, required: ['x', 'y'] }, label: { type: ['string', 'null'], maxLength: 8 } }, required: ['point', 'label'] },
  { type: 'string', minLength: 3, maxLength: 12 },
  // As pydantic writes a model: titles, $defs, Optional as anyOf with null, a set as uniqueItems
  // (read, not enforced: the items here are strings, which a model rarely repeats).
  {
    $defs: {
      Color: { enum: ['red', 'green'], title: 'Color', type: 'string' },
      Item: { properties: { name: { title: 'Name', type: 'string', maxLength: 10 }, price: { title: 'Price', type: 'number', exclusiveMinimum: 0 } }, required: ['name', 'price'], title: 'Item', type: 'object' },
    },
    properties: {
      id: { title: 'Id', type: 'integer' },
      color: { $ref: '#/$defs/Color' },
      nick: { anyOf: [{ type: 'string', maxLength: 8 }, { type: 'null' }], default: null, title: 'Nick' },
      items: { items: { $ref: '#/$defs/Item' }, title: 'Items', type: 'array', maxItems: 2 },
      when: { format: 'date-time', title: 'When', type: 'string' },
    },
    required: ['id', 'color', 'items', 'when'],
    title: 'Order',
    type: 'object',
  },
];

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 24 }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers', parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -100, maximum: 100 }, b: { type: 'integer', minimum: -100, maximum: 100 } }, required: ['a', 'b'], additionalProperties: false } } },
];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function assertValidCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  const validate = validators[call.function.name];
  assert.ok(validate, `unknown tool ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${ajv.errorsText(validate.errors)}`);
}

async function inBatches(items, size, run) {
  const out = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(run))));
  return out;
}

describe('structured output and tool calls', { skip }, () => {
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

  const user = [{ role: 'user', content: 'Answer in JSON.' }];

  test('100 json_schema replies all validate', async () => {
    const jobs = [];
    for (let i = 0; i < 100; i += 1) jobs.push({ schema: schemas[i % schemas.length], seed: i });
    const replies = await inBatches(jobs, 8, ({ schema, seed }) => client.chat.completions.create({
      messages: user, seed, temperature: 1, max_tokens: 120,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
    }));
    replies.forEach((r, i) => {
      const text = r.choices[0].message.content;
      let value;
      assert.doesNotThrow(() => { value = JSON.parse(text); }, `reply ${i} is not JSON: ${text}`);
      const validate = ajv.compile(jobs[i].schema);
      assert.ok(validate(value), `reply ${i} ${text}: ${ajv.errorsText(validate.errors)}`);
    });
    const distinct = new Set(replies.map((r) => r.choices[0].message.content));
    assert.ok(distinct.size > 50, 'the seeds give different documents');
  });

  test('a json_schema reply lists its properties in the schema\'s order on every seed', async () => {
    // Not alphabetical, nested, `required` in another order: "reasoning" is written before "answer".
    const schema = {
      type: 'object',
      properties: {
        zeta: { type: 'integer', minimum: 0, maximum: 99 },
        reasoning: { type: 'string', maxLength: 16 },
        answer: {
          type: 'object',
          properties: { value: { type: 'integer' }, unit: { enum: ['m', 's'] } },
          required: ['unit', 'value'],
          additionalProperties: false,
        },
      },
      required: ['answer', 'zeta', 'reasoning'],
      additionalProperties: false,
    };
    const replies = await inBatches([...Array(12).keys()], 6, (seed) => client.chat.completions.create({
      messages: user, seed, temperature: 1, max_tokens: 120,
      response_format: { type: 'json_schema', json_schema: { name: 'ordered', schema, strict: true } },
    }));
    for (const r of replies) {
      const text = r.choices[0].message.content;
      const value = JSON.parse(text);
      assert.deepEqual(Object.keys(value), ['zeta', 'reasoning', 'answer'], text);
      assert.deepEqual(Object.keys(value.answer), ['value', 'unit'], text);
    }
  });

  test('a json_object reply is a whole object at every max_tokens from 2', async () => {
    const jobs = [];
    for (const max_tokens of [2, 3, 4, 5, 6, 8, 12, 20, 40, 120]) {
      for (const seed of [1, 2, 3, 4]) jobs.push({ max_tokens, seed });
    }
    const replies = await inBatches(jobs, 8, ({ max_tokens, seed }) => client.chat.completions.create({
      messages: user, seed, temperature: 1, max_tokens, response_format: { type: 'json_object' },
    }));
    replies.forEach((r, i) => {
      const text = r.choices[0].message.content;
      let value;
      const { max_tokens, seed } = jobs[i];
      assert.doesNotThrow(() => { value = JSON.parse(text); }, `max_tokens ${max_tokens}, seed ${seed}: ${text}`);
      assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), text);
      assert.ok(r.usage.completion_tokens <= max_tokens);
    });
  });

  test('json_object, a GBNF grammar and llama-server\'s json_schema, on both endpoints', async () => {
    for (const seed of [1, 2, 3]) {
      const obj = await client.chat.completions.create({ messages: user, seed, temperature: 1, max_tokens: 80, response_format: { type: 'json_object' } });
      const value = JSON.parse(obj.choices[0].message.content);
      assert.equal(typeof value, 'object');
      assert.ok(value !== null && !Array.isArray(value));
    }
    const grammar = 'root ::= ("yes" | "no") " because " [a-z ]{1,20} "."';
    const g = await client.completions.create({ prompt: 'Well,', seed: 4, temperature: 1, max_tokens: 40, grammar });
    assert.match(g.choices[0].text, /^(yes|no) because [a-z ]{1,20}\.$/);
    const s = await client.completions.create({ prompt: 'Data:', seed: 5, temperature: 1, max_tokens: 60, json_schema: schemas[0] });
    assert.ok(ajv.validate(schemas[0], JSON.parse(s.choices[0].text)), s.choices[0].text);
  });

  test('a streamed json_schema reply is the same document', async () => {
    const body = { messages: user, seed: 9, temperature: 1, max_tokens: 120, response_format: { type: 'json_schema', json_schema: { name: 'a', schema: schemas[7] } } };
    const whole = await client.chat.completions.create(body);
    let text = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) text += chunk.choices[0]?.delta?.content ?? '';
    assert.equal(text, whole.choices[0].message.content);
    assert.ok(ajv.validate(schemas[7], JSON.parse(text)));
  });

  test('named and required tool choices always return valid calls', async () => {
    const named = await inBatches([...Array(12).keys()], 6, (seed) => client.chat.completions.create({
      messages: [{ role: 'user', content: 'What is 2 + 3?' }], tools, seed, temperature: 1, max_tokens: 80,
      tool_choice: { type: 'function', function: { name: 'add' } },
    }));
    for (const r of named) {
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      const calls = r.choices[0].message.tool_calls;
      assert.ok(calls.length >= 1);
      for (const c of calls) {
        assert.equal(c.function.name, 'add');
        assertValidCall(c);
      }
    }
    const required = await inBatches([...Array(12).keys()], 6, (seed) => client.chat.completions.create({
      messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, seed: 100 + seed, temperature: 1, max_tokens: 100,
      tool_choice: 'required', parallel_tool_calls: false,
    }));
    for (const r of required) {
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      assert.equal(r.choices[0].message.tool_calls.length, 1);
      assertValidCall(r.choices[0].message.tool_calls[0]);
    }
  });

  test('streamed tool-call deltas assemble into the unstreamed call', async () => {
    for (const seed of [21, 22, 23]) {
      const body = { messages: [{ role: 'user', content: 'Add 1 and 2' }], tools, seed, temperature: 1, max_tokens: 80, tool_choice: 'required' };
      const whole = await client.chat.completions.create(body);
      const calls = [];
      let content = '';
      let finish;
      for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
        const choice = chunk.choices[0];
        if (!choice) continue;
        content += choice.delta?.content ?? '';
        for (const d of choice.delta?.tool_calls ?? []) {
          calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
          if (d.id) calls[d.index].id = d.id;
          calls[d.index].function.name += d.function?.name ?? '';
          calls[d.index].function.arguments += d.function?.arguments ?? '';
        }
        finish = choice.finish_reason ?? finish;
      }
      assert.equal(finish, 'tool_calls');
      assert.equal(content, whole.choices[0].message.content ?? '');
      const strip = (cs) => cs.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
      assert.deepEqual(strip(calls), strip(whole.choices[0].message.tool_calls));
      calls.forEach(assertValidCall);
    }
  });

  test('auto: prose or valid calls, and tool results go back through the template', async () => {
    const r = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], tools, seed: 3, temperature: 1, max_tokens: 30, tool_choice: 'auto' });
    const m = r.choices[0].message;
    if (m.tool_calls) m.tool_calls.forEach(assertValidCall);
    else assert.equal(typeof m.content, 'string');
    const followUp = await client.chat.completions.create({
      messages: [
        { role: 'user', content: 'What is 2 + 3?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a": 2, "b": 3}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '5' },
      ],
      tools, seed: 4, temperature: 1, max_tokens: 8,
    });
    assert.equal(followUp.choices[0].message.role, 'assistant');
  });

  test('thinking goes to reasoning_content, whole and streamed', async () => {
    // Qwen's template thinks in <think> blocks; a grammar makes the random model write one.
    const grammar = 'root ::= "<think>" [a-z ]{1,16} "</think>" "\\n\\n" [a-z]{1,8}';
    const body = { messages: [{ role: 'user', content: 'Think first.' }], seed: 8, temperature: 1, max_tokens: 40, grammar };
    const whole = await client.chat.completions.create(body);
    const m = whole.choices[0].message;
    assert.match(m.reasoning_content, /^[a-z ]{1,16}$/);
    assert.match(m.content, /^[a-z]{1,8}$/);
    let reasoning = '';
    let content = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
      content += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(reasoning, m.reasoning_content);
    assert.equal(content, m.content);
  });

  test('openai 6\'s zod helpers: parse() gives validated objects and parsed tool arguments, whole and streamed', async () => {
    const Person = z.object({ name: z.string().max(10), age: z.number().int().min(0).max(120), tags: z.array(z.enum(['a', 'b'])).max(2) });
    for (const seed of [1, 2, 3]) {
      const body = { messages: user, seed, temperature: 1, max_tokens: 80, response_format: zodResponseFormat(Person, 'person') };
      const whole = await client.chat.completions.parse(body);
      const { parsed } = whole.choices[0].message;
      assert.ok(Person.safeParse(parsed).success, JSON.stringify(parsed));
      const streamed = await client.chat.completions.stream(body).finalChatCompletion();
      assert.deepEqual(streamed.choices[0].message.parsed, parsed);

      const call = await client.chat.completions.parse({
        messages: user, seed, temperature: 1, max_tokens: 80, tools: [zodFunction({ name: 'person', parameters: Person })], tool_choice: 'required',
      });
      const [tc] = call.choices[0].message.tool_calls;
      assert.equal(tc.function.name, 'person');
      assert.ok(Person.safeParse(tc.function.parsed_arguments).success, tc.function.arguments);
    }
  });

  test('openai 6\'s runTools loop sends each tool result back to the model', async () => {
    const called = [];
    // `required`, because runTools rejects a reply cut at max_tokens, which a random model's prose is.
    const runner = client.chat.completions.runTools({
      messages: [{ role: 'user', content: 'What is 2 + 3?' }], seed: 5, temperature: 1, max_tokens: 40, tool_choice: 'required',
      tools: [{
        type: 'function',
        function: {
          name: 'add', parse: JSON.parse, parameters: tools[1].function.parameters,
          function: ({ a, b }) => {
            called.push({ a, b });
            return { sum: a + b };
          },
        },
      }],
    }, { maxChatCompletions: 3 });
    await runner.done();
    const completions = runner.allChatCompletions();
    assert.equal(completions.length, 3);
    assert.ok(completions.every((c) => c.choices[0].finish_reason === 'tool_calls'));
    const results = runner.messages.filter((m) => m.role === 'tool');
    assert.equal(results.length, called.length);
    assert.ok(called.length >= 3);
    results.forEach((m, i) => assert.deepEqual(JSON.parse(m.content), { sum: called[i].a + called[i].b }));
  });

  test('bad schemas, grammars and tools are 400s naming the problem', async () => {
    const cases = [
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'integer', minimum: 5, maximum: 1 } } } } } }, /minimum|maximum|integer/],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'frog' } } } }, /frog|type/],
      [{ response_format: { type: 'xml' } }, /response_format/],
      [{ grammar: 'root ::= "unterminated' }, /grammar/],
      [{ grammar: 'root ::= "a"', response_format: { type: 'json_object' } }, /one of/],
      [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, /name/],
      [{ tools, tool_choice: { type: 'function', function: { name: 'missing' } } }, /missing/],
      [{ tools, tool_choice: 'sometimes' }, /tool_choice/],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { not: {} } } } } }], tool_choice: 'required' }, /f|not/],
    ];
    for (const [extra, message] of cases) {
      await assert.rejects(client.chat.completions.create({ messages: user, max_tokens: 4, ...extra }), (e) => {
        assert.equal(e.status, 400, JSON.stringify(extra));
        assert.match(e.message, message);
        return true;
      });
    }
  });
});
