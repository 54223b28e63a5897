// Structured output against `tritium serve` (tiny-bitnet, which knows nothing of JSON): for each of 22 JSON
// Schemas, 200 completions sampled at temperature 1.0 must all parse and validate under ajv (an independent
// validator); guided_regex / guided_choice outputs must match; greedy output is the same alone and among
// concurrent requests. Env: TRITIUM_URL, TRITIUM_API_KEY (as openai.test.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

// The bundled tiny-bitnet, and tiny-qwen2 from the shared test data when run.sh could start it.
const servers = [{ url: process.env.TRITIUM_URL, model: 'tiny-bitnet' }];
if (process.env.TRITIUM_QWEN2_URL) servers.push({ url: process.env.TRITIUM_QWEN2_URL, model: 'tiny-qwen2' });
for (const s of servers) s.client = new OpenAI({ baseURL: s.url, apiKey: process.env.TRITIUM_API_KEY, maxRetries: 0 });
const { client, model } = servers[0];
const ajv = new Ajv2020({ strict: false });  // draft 2020-12: $defs, prefixItems
addFormats(ajv);  // format: date, ipv4, uuid, ... are checked, not ignored
const SAMPLES = Number(process.env.TRITIUM_STRUCTURED_SAMPLES ?? 200);

const str = (n = 12) => ({ type: 'string', maxLength: n });
const schemas = {
  flat: { type: 'object', properties: { name: str(), age: { type: 'integer' } }, required: ['name', 'age'],
          additionalProperties: false },
  optional: { type: 'object', properties: { a: str(), b: { type: 'number' }, c: { type: 'boolean' } },
              required: ['b'], additionalProperties: false },
  nested: { type: 'object', properties: { user: { type: 'object', properties: { id: { type: 'integer' }, email: str(20) },
            required: ['id', 'email'], additionalProperties: false }, active: { type: 'boolean' } },
            required: ['user', 'active'], additionalProperties: false },
  array: { type: 'object', properties: { tags: { type: 'array', items: str(8), minItems: 1, maxItems: 4 } },
           required: ['tags'], additionalProperties: false },
  enum: { type: 'object', properties: { color: { enum: ['red', 'green', 'blue'] }, size: { enum: [1, 2, 3] } },
          required: ['color', 'size'], additionalProperties: false },
  const: { type: 'object', properties: { kind: { const: 'point' }, x: { type: 'number' }, y: { type: 'number' } },
           required: ['kind', 'x', 'y'], additionalProperties: false },
  anyof: { type: 'object', properties: { value: { anyOf: [{ type: 'integer' }, str(6), { type: 'null' }] } },
           required: ['value'], additionalProperties: false },
  nullable: { type: 'object', properties: { note: { type: ['string', 'null'], maxLength: 10 } }, required: ['note'],
              additionalProperties: false },
  ref: { $defs: { addr: { type: 'object', properties: { city: str(), zip: { type: 'string', pattern: '[0-9]{5}' } },
                          required: ['city', 'zip'], additionalProperties: false } },
         type: 'object', properties: { home: { $ref: '#/$defs/addr' }, work: { $ref: '#/$defs/addr' } },
         required: ['home'], additionalProperties: false },
  recursive: { $defs: { node: { type: 'object', properties: { v: { type: 'integer' },
               kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }, required: ['v', 'kids'],
               additionalProperties: false } }, $ref: '#/$defs/node' },
  array_of_objects: { type: 'array', items: { type: 'object', properties: { k: str(5), v: { type: 'integer' } },
                      required: ['k', 'v'], additionalProperties: false }, maxItems: 3 },
  top_string: { type: 'string', maxLength: 16 },
  top_enum: { enum: ['yes', 'no', 'maybe'] },
  integer_list: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 5 },
  pattern: { type: 'object', properties: { id: { type: 'string', pattern: '[A-Z]{2}-[0-9]{3}' },
             date: { type: 'string', pattern: '20[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]' } }, required: ['id', 'date'],
             additionalProperties: false },
  min_length: { type: 'object', properties: { code: { type: 'string', minLength: 3, maxLength: 5 } },
                required: ['code'], additionalProperties: false },
  tuple: { type: 'array', prefixItems: [{ type: 'integer' }, str(6), { type: 'boolean' }], items: false },
  deep: { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'object', properties:
          { c: { type: 'array', items: { enum: [true, null, 0] }, maxItems: 3 } }, required: ['c'],
          additionalProperties: false } }, required: ['b'], additionalProperties: false } }, required: ['a'],
          additionalProperties: false },
  mixed_anyof: { anyOf: [{ type: 'object', properties: { ok: { const: true } }, required: ['ok'],
                            additionalProperties: false },
                          { type: 'array', items: { type: 'number' }, maxItems: 2 }] },
  ranges: { type: 'object', properties: { days: { type: 'integer', minimum: 1, maximum: 7 },
            step: { type: 'integer', multipleOf: 5, minimum: -20, exclusiveMaximum: 100 },
            t: { type: 'number', minimum: -1.5, maximum: 2.25 } }, required: ['days', 'step', 't'],
            additionalProperties: false },
  formats: { type: 'object', properties: { ip: { type: 'string', format: 'ipv4' }, day: { type: 'string', format: 'date' },
             id: { type: 'string', format: 'uuid' } }, required: ['ip', 'day', 'id'], additionalProperties: false },
  unicode: { type: 'object', properties: { 'näme': str(6), '中文': { enum: ['是', '否'] } },
             required: ['näme', '中文'], additionalProperties: false },
};

async function sample({ client, model }, schema, n, seed, chat) {
  const response_format = { type: 'json_schema', json_schema: { name: 'out', schema, strict: true } };
  const common = { model, max_tokens: 256, temperature: 1.0, seed, n, response_format };
  if (chat) {
    const r = await client.chat.completions.create({ ...common, messages: [{ role: 'user', content: 'Give JSON.' }] });
    return r.choices.map((c) => ({ text: c.message.content, finish: c.finish_reason }));
  }
  const r = await client.completions.create({ ...common, prompt: 'Here is the data:' });
  return r.choices.map((c) => ({ text: c.text, finish: c.finish_reason }));
}

for (const server of servers) {
  test(`${server.model}: 22 schemas x ${SAMPLES} samples at temperature 1.0: every output validates under ajv`, async () => {
    assert.equal(Object.keys(schemas).length, 22);
    const per = 10;
    for (const [name, schema] of Object.entries(schemas)) {
      const validate = ajv.compile(schema);
      const jobs = [];
      for (let k = 0; k < SAMPLES / per; ++k) jobs.push(sample(server, schema, per, 1000 + k, k % 2 === 1));
      const outs = (await Promise.all(jobs)).flat();
      assert.equal(outs.length, SAMPLES);
      for (const o of outs) {
        assert.equal(o.finish, 'stop', `${name}: finish_reason ${o.finish} for ${JSON.stringify(o.text)}`);
        let v;
        assert.doesNotThrow(() => { v = JSON.parse(o.text); }, `${name}: not JSON: ${JSON.stringify(o.text)}`);
        assert.ok(validate(v), `${name}: ${JSON.stringify(o.text)} fails: ${ajv.errorsText(validate.errors)}`);
      }
    }
  });
}

test('json_object, guided_regex and guided_choice', async () => {
  const r = await client.completions.create({ model, prompt: 'JSON:', max_tokens: 200, temperature: 1.0, seed: 5, n: 16,
                                              response_format: { type: 'json_object' } });
  let complete = 0;
  for (const c of r.choices) {
    if (c.finish_reason !== 'stop') continue;  // an unbounded object may run past max_tokens
    ++complete;
    const v = JSON.parse(c.text);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v), c.text);
  }
  assert.ok(complete > 0);
  const re = await client.completions.create({ model, prompt: 'Code:', max_tokens: 20, temperature: 1.0, seed: 6, n: 16,
                                               guided_regex: '[A-F]{3}-[0-9]{2,4}' });
  for (const c of re.choices) {
    assert.equal(c.finish_reason, 'stop');
    assert.match(c.text, /^[A-F]{3}-[0-9]{2,4}$/);
  }
  const ch = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Pick.' }], max_tokens: 32,
                                                    temperature: 1.0, seed: 7, n: 16, guided_choice: ['alpha', 'beta', 'gamma delta'] });
  for (const c of ch.choices) {
    assert.equal(c.finish_reason, 'stop');
    assert.ok(['alpha', 'beta', 'gamma delta'].includes(c.message.content), c.message.content);
  }
});

test('greedy structured output is the same alone and among concurrent requests', async () => {
  const schema = schemas.nested;
  const one = () => client.completions.create({ model, prompt: 'Data:', max_tokens: 128, temperature: 0,
                                                 response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
  const alone = (await one()).choices[0].text;
  const many = await Promise.all(Array.from({ length: 12 }, one));
  for (const r of many) assert.equal(r.choices[0].text, alone);
  assert.ok(ajv.compile(schema)(JSON.parse(alone)));
});

test('a schema keyword beyond the automaton is a 400 naming it', async () => {
  for (const schema of [{ type: 'number', multipleOf: 0.3 }, { type: 'object', patternProperties: { a: {} } }]) {
    await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 4,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }),
    (e) => e.status === 400 && new RegExp(Object.keys(schema)[1]).test(e.message));
  }
});
