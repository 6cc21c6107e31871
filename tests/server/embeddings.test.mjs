// pagoda-server's POST /v1/embeddings through the official openai client: vectors of the model's
// hidden size and unit length, the same input giving the same vector (alone, in a list, as its
// token ids), base64 (the client's default) decoding to the float vector, usage counted; and
// `dimensions`, malformed input and too many inputs refused with 400s in OpenAI's error JSON.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import OpenAI from 'openai';

import { startServer, stopServer } from './server_process.mjs';

// Both test models (stories260K and pagoda-synth's fallback, server_process.mjs) are 64 wide.
const DIM = 64;

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

// The little-endian float32 values a base64 string holds.
function decodeBase64(text) {
  const bytes = Buffer.from(text, 'base64');
  const out = [];
  for (let i = 0; i < bytes.length; i += 4) out.push(bytes.readFloatLE(i));
  return out;
}

describe('pagoda-server /v1/embeddings', () => {
  let server, client;
  before(async () => {
    server = await startServer();
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  const post = (body) =>
    fetch(`${server.url}/v1/embeddings`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

  test('one string gives one unit vector of the model width, in the OpenAI shape', async () => {
    const res = await client.embeddings.create({ model: 'any', input: 'Once upon a time', encoding_format: 'float' }).catch((e) => e);
    // `model` must name the served model or an adapter: 'any' names nothing.
    assert.equal(res.status, 404);
    const models = await client.models.list();
    const model = models.data[0].id;
    const r = await client.embeddings.create({ model, input: 'Once upon a time', encoding_format: 'float' });
    assert.equal(r.object, 'list');
    assert.equal(r.model, model);
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0].object, 'embedding');
    assert.equal(r.data[0].index, 0);
    assert.equal(r.data[0].embedding.length, DIM);
    assert.ok(Math.abs(norm(r.data[0].embedding) - 1) < 1e-5, `norm ${norm(r.data[0].embedding)}`);
    assert.ok(r.usage.prompt_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
  });

  test('identical inputs give identical vectors, alone, in a list and as token ids', async () => {
    const text = 'The little dog ran to the park.';
    const alone = await post({ input: text, encoding_format: 'float' }).then((r) => r.json());
    const vector = alone.data[0].embedding;
    const list = await post({ input: [text, 'Lily wanted to play.', text], encoding_format: 'float' }).then((r) => r.json());
    assert.deepEqual(list.data.map((d) => d.index), [0, 1, 2]);
    assert.deepEqual(list.data[0].embedding, vector);
    assert.deepEqual(list.data[2].embedding, vector);
    assert.notDeepEqual(list.data[1].embedding, vector);
    assert.ok(list.usage.prompt_tokens > 2 * alone.usage.prompt_tokens, 'usage counts every input');

    // Token ids: a list of ids is one input, a list of lists several.
    const ids = [1, 400, 401, 402, 403];
    const one = await post({ input: ids, encoding_format: 'float' }).then((r) => r.json());
    const many = await post({ input: [ids, [1, 300], ids], encoding_format: 'float' }).then((r) => r.json());
    assert.equal(one.data.length, 1);
    assert.equal(one.usage.prompt_tokens, ids.length);
    assert.equal(many.data.length, 3);
    assert.deepEqual(many.data[0].embedding, one.data[0].embedding);
    assert.deepEqual(many.data[2].embedding, one.data[0].embedding);
    assert.equal(many.usage.prompt_tokens, 2 * ids.length + 2);
  });

  test('base64 is the float vector as little-endian float32, and the client decodes it', async () => {
    const models = await client.models.list();
    const model = models.data[0].id;
    const input = ['Tom and Sue went to the sea.', 'One day, a big fish'];
    const floats = await client.embeddings.create({ model, input, encoding_format: 'float' });
    const b64 = await client.embeddings.create({ model, input, encoding_format: 'base64' });
    for (let i = 0; i < input.length; ++i) {
      assert.equal(typeof b64.data[i].embedding, 'string');
      const decoded = decodeBase64(b64.data[i].embedding);
      assert.equal(decoded.length, DIM);
      // JSON's floats are float32 values printed exactly enough to read back the same float32.
      assert.deepEqual(decoded, floats.data[i].embedding.map((x) => Math.fround(x)));
    }
    // Without encoding_format the client asks for base64 and hands back floats.
    const plain = await client.embeddings.create({ model, input });
    for (let i = 0; i < input.length; ++i) {
      assert.deepEqual(Array.from(plain.data[i].embedding), floats.data[i].embedding.map((x) => Math.fround(x)));
    }
  });

  test('dimensions is refused with a 400 naming it', async () => {
    const models = await client.models.list();
    const err = await client.embeddings.create({ model: models.data[0].id, input: 'hello', dimensions: 16 }).catch((e) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.status, 400);
    assert.match(err.message, /dimensions/);
  });

  test('bad input is a 400 in the OpenAI error shape', async () => {
    const cases = [
      [{}, /'input' is required/],
      [{ input: 42 }, /'input' must be/],
      [{ input: [] }, /empty list/],
      [{ input: '' }, /empty/],
      [{ input: ['fine', ''] }, /item 1: .*empty/],
      [{ input: ['fine', { text: 'no' }] }, /item 1 must be/],
      [{ input: [1, 'two'] }, /item 0 must be/],
      [{ input: [1, -5] }, /outside the vocabulary/],
      [{ input: [[1, 2], [1, 99999999]] }, /outside the vocabulary/],
      [{ input: Array(5000).fill(1).map(() => [1]), encoding_format: 'float' }, /at most 2048/],
      [{ input: 'x', encoding_format: 'hex' }, /encoding_format/],
      [{ input: Array(5000).fill(5) }, /context length/],
    ];
    for (const [body, message] of cases) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      const json = await res.json();
      assert.equal(json.error.type, 'invalid_request_error');
      assert.match(json.error.message, message, JSON.stringify(body).slice(0, 80));
    }
    const notJson = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', body: '{"input": [' });
    assert.equal(notJson.status, 400);
    // Nesting deeper than --max-json-depth is refused before anything walks it.
    const deep = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', body: '{"input": ' + '['.repeat(500) + ']'.repeat(500) + '}' });
    assert.equal(deep.status, 400);
    assert.match((await deep.json()).error.message, /deep|depth|nest/i);
  });
});
