// The Responses API (POST /v1/responses) through the official openai npm package: client.responses.create
// non-streaming and streaming (the typed events in order, their deltas concatenating to the response's text),
// greedy equality with chat.completions, instructions, a json_schema text format whose output validates under
// ajv, and, on the Qwen3-template server, forced tool calls as function_call items whose arguments validate
// against the tool's parameters, fed back as function_call_output to get a message.
// Env: TRITIUM_URL, TRITIUM_TOOLS_URL (empty: the tool tests are skipped), TRITIUM_API_KEY.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';

const client = new OpenAI({ baseURL: process.env.TRITIUM_URL, apiKey: process.env.TRITIUM_API_KEY, maxRetries: 0 });
const toolsUrl = process.env.TRITIUM_TOOLS_URL;
const tools = toolsUrl ? new OpenAI({ baseURL: toolsUrl, apiKey: process.env.TRITIUM_API_KEY, maxRetries: 0 }) : null;
const ajv = new Ajv2020({ strict: false });
const model = 'tiny-bitnet';

// The text of a response's message items (what the package's response.output_text holds).
const textOf = (r) => r.output.filter((o) => o.type === 'message')
  .flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');

test('greedy response equals the chat completion; streamed events in order', async () => {
  const chat = await client.chat.completions.create({ model, temperature: 0, max_tokens: 16,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }] });
  const params = { model, instructions: 'Be brief.', input: 'Tell me a story.', temperature: 0, max_output_tokens: 16 };
  const r = await client.responses.create(params);
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.instructions, 'Be brief.');
  assert.equal(r.max_output_tokens, 16);
  assert.equal(r.output_text, chat.choices[0].message.content);
  assert.ok(r.output_text.length > 0);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].role, 'assistant');
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(r.usage.total_tokens, chat.usage.total_tokens);
  const length = chat.choices[0].finish_reason === 'length';
  assert.equal(r.status, length ? 'incomplete' : 'completed');
  if (length) assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });

  const stream = await client.responses.create({ ...params, stream: true });
  const types = [];
  let deltas = '';
  let final = null;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, types.length);
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  const middle = types.slice(4, -4);
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
                                       'response.content_part.added']);
  assert.ok(middle.length > 0 && middle.every((t) => t === 'response.output_text.delta'), types.join(' '));
  assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done',
                                     'response.output_item.done', length ? 'response.incomplete' : 'response.completed']);
  assert.equal(deltas, r.output_text);
  assert.equal(textOf(final), r.output_text);
  assert.deepEqual(final.usage, r.usage);
});

test('text.format json_schema: the output validates', async () => {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } },
                   required: ['name', 'age'], additionalProperties: false };
  const validate = ajv.compile(schema);
  for (let seed = 1; seed <= 5; ++seed) {
    const r = await client.responses.create({ model, input: 'A person as JSON.', temperature: 1.0, seed,
      max_output_tokens: 200, text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
    assert.equal(r.status, 'completed', JSON.stringify(r.output));
    assert.equal(r.text.format.type, 'json_schema');
    const obj = JSON.parse(r.output_text);
    assert.ok(validate(obj), `${r.output_text}: ${ajv.errorsText(validate.errors)}`);
  }
});

test('bad requests are 400s with the field named', async () => {
  await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: 'resp_1' }),
    (e) => e.status === 400 && /keeps no responses/.test(e.message));
  await assert.rejects(client.responses.create({ model, input: [{ type: 'function_call_output', call_id: 'c', output: '1' }] }),
    (e) => e.status === 400 && e.param === 'input');
  await assert.rejects(client.responses.create({ model: 'gpt-9', input: 'x' }), (e) => e.status === 404);
});

const fnTools = [
  { type: 'function', name: 'get_weather', description: 'Weather in a city', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 16 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } },
  { type: 'function', name: 'add', description: 'Adds two integers', strict: true,
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
      required: ['a', 'b'], additionalProperties: false } },
];
const validators = Object.fromEntries(fnTools.map((t) => [t.name, ajv.compile(t.parameters)]));
const input = [{ role: 'user', content: 'Weather in Paris?' }];

function checkCall(item) {
  assert.equal(item.type, 'function_call');
  assert.equal(item.status, 'completed');
  assert.ok(item.call_id.length > 0);
  const v = validators[item.name];
  assert.ok(v, `unknown function ${item.name}`);
  assert.ok(v(JSON.parse(item.arguments)), `${item.arguments}: ${ajv.errorsText(v.errors)}`);
}

test('tools: required and named calls, streamed, fed back', { skip: !toolsUrl && 'TRITIUM_TOOLS_URL not set' }, async () => {
  for (let seed = 1; seed <= 5; ++seed) {
    const r = await tools.responses.create({ model, input, tools: fnTools, tool_choice: 'required', temperature: 1.0,
                                             seed, max_output_tokens: 200, instructions: 'You can call tools.' });
    assert.equal(r.status, 'completed', JSON.stringify(r.output));
    assert.equal(r.output.length, 1);
    checkCall(r.output[0]);
  }
  const named = await tools.responses.create({ model, input, tools: fnTools, temperature: 0, max_output_tokens: 200,
                                               tool_choice: { type: 'function', name: 'add' } });
  assert.equal(named.output[0].name, 'add');
  checkCall(named.output[0]);
  // Greedy: the same call as chat.completions'.
  const chat = await tools.chat.completions.create({ model, messages: input, temperature: 0, max_tokens: 200,
    tools: fnTools.map(({ type, name, description, parameters }) => ({ type, function: { name, description, parameters } })),
    tool_choice: { type: 'function', function: { name: 'add' } } });
  assert.equal(chat.choices[0].message.tool_calls[0].function.arguments, named.output[0].arguments);

  const stream = await tools.responses.create({ model, input, tools: fnTools, temperature: 0, max_output_tokens: 200,
                                               tool_choice: { type: 'function', name: 'add' }, stream: true });
  const types = [];
  let args = '';
  let final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.completed') final = ev.response;
  }
  assert.deepEqual(types, ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done',
    'response.completed']);
  assert.equal(args, named.output[0].arguments);
  checkCall(final.output[0]);

  // The call and its result fed back: the model answers with a message.
  const back = await tools.responses.create({ model, tools: fnTools, tool_choice: 'none', temperature: 0,
    max_output_tokens: 16, input: [...input, named.output[0],
      { type: 'function_call_output', call_id: named.output[0].call_id, output: '{"sum": 5}' }] });
  assert.equal(back.output.length, 1);
  assert.equal(back.output[0].type, 'message');
  assert.ok(back.usage.input_tokens > named.usage.input_tokens);
});
