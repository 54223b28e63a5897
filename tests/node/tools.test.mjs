// OpenAI tool calls through the openai npm client: a Qwen3-template conversation (tiny-bitnet served with the
// Qwen3 chat template, which renders the tools and uses <tool_call> blocks) with two tools. With tool_choice
// "required" or a named function the output is constrained to one call, returned as message.tool_calls
// (streamed as delta.tool_calls) whose arguments validate against the function's parameters (ajv).
// Env: TRITIUM_TOOLS_URL (empty: skipped), TRITIUM_API_KEY.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';

const url = process.env.TRITIUM_TOOLS_URL;
const client = url ? new OpenAI({ baseURL: url, apiKey: process.env.TRITIUM_API_KEY, maxRetries: 0 }) : null;
const ajv = new Ajv2020({ strict: false });
const model = 'tiny-bitnet';

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 16 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
      required: ['a', 'b'], additionalProperties: false } } },
];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const messages = [{ role: 'system', content: 'You can call tools.' }, { role: 'user', content: 'Weather in Paris?' }];

function checkCall(call) {
  assert.equal(call.type, 'function');
  assert.ok(call.id.length > 0);
  const v = validators[call.function.name];
  assert.ok(v, `unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(v(args), `${call.function.arguments}: ${ajv.errorsText(v.errors)}`);
}

test('tool_choice required: a valid tool call', { skip: !url && 'TRITIUM_TOOLS_URL not set' }, async () => {
  for (let seed = 1; seed <= 10; ++seed) {
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', temperature: 1.0,
                                                     seed, max_tokens: 200 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.tool_calls.length, 1);
    checkCall(c.message.tool_calls[0]);
  }
});

test('a named function and streaming', { skip: !url && 'TRITIUM_TOOLS_URL not set' }, async () => {
  const r = await client.chat.completions.create({ model, messages, tools, temperature: 1.0, seed: 3, max_tokens: 200,
    tool_choice: { type: 'function', function: { name: 'add' } } });
  assert.equal(r.choices[0].message.tool_calls[0].function.name, 'add');
  checkCall(r.choices[0].message.tool_calls[0]);
  const stream = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required',
                                                        temperature: 0, max_tokens: 200, stream: true });
  const calls = [];
  let finish = null;
  let content = '';
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const tc of ch.delta?.tool_calls ?? []) calls.push(tc);
    content += ch.delta?.content ?? '';
    finish = ch.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  assert.equal(calls.length, 1);
  checkCall(calls[0]);
});

test('tool_choice auto and none give text; an unknown function name is a 400', { skip: !url && 'TRITIUM_TOOLS_URL not set' }, async () => {
  const auto = await client.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 12 });
  assert.ok(['stop', 'length', 'tool_calls'].includes(auto.choices[0].finish_reason));
  const none = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', temperature: 0,
                                                      max_tokens: 12 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  await assert.rejects(client.chat.completions.create({ model, messages, tools, max_tokens: 4,
    tool_choice: { type: 'function', function: { name: 'nope' } } }), (e) => e.status === 400 && /nope/.test(e.message));
});
