// Anthropic's Messages API through the official @anthropic-ai/sdk client: messages.create (non-streaming and
// streaming), system, stop_sequences, max_tokens, countTokens and the SDK's typed errors on the bundled model;
// tools with tool_choice {type: 'any'} and {type: 'tool', name} on the Qwen3-template server (the tool_use input
// validates against input_schema with ajv), then a tool_result fed back yields a text answer.
// Env: TRITIUM_URL, TRITIUM_TOOLS_URL (empty: the tool tests are skipped), TRITIUM_API_KEY. The SDK's baseURL
// is the server's root (it appends /v1/messages itself).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv2020 from 'ajv/dist/2020.js';

const root = (u) => u.replace(/\/v1\/?$/, '');
const apiKey = process.env.TRITIUM_API_KEY;
const client = new Anthropic({ baseURL: root(process.env.TRITIUM_URL), apiKey, maxRetries: 0 });
const toolsUrl = process.env.TRITIUM_TOOLS_URL;
const toolsClient = toolsUrl ? new Anthropic({ baseURL: root(toolsUrl), apiKey, maxRetries: 0 }) : null;
const model = 'tiny-bitnet';
const messages = [{ role: 'user', content: 'Once upon a time' }];

test('messages.create: a text message with usage', async () => {
  const m = await client.messages.create({ model, max_tokens: 12, temperature: 0, system: 'You tell stories.', messages });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 12);
});

test('max_tokens ends with stop_reason max_tokens', async () => {
  const m = await client.messages.create({ model, max_tokens: 3, temperature: 0, messages });
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 3);
  assert.equal(m.stop_sequence, null);
});

test('streaming: event order, deltas concatenate to finalMessage and to the non-streaming text', async () => {
  const body = { model, max_tokens: 12, temperature: 0, system: 'You tell stories.', messages };
  const plain = await client.messages.create(body);
  const stream = client.messages.stream(body);
  const types = [];
  let text = '';
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  const final = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.equal(types.at(-2), 'message_delta');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'));
  assert.equal(final.content[0].text, text);
  assert.equal(text, plain.content[0].text);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
  assert.equal(final.stop_reason, plain.stop_reason);
});

test('stop_sequences: stop_reason stop_sequence names the matched string', async () => {
  const first = await client.messages.create({ model, max_tokens: 16, temperature: 0, messages });
  const text = first.content[0].text;
  assert.ok(text.length >= 6, text);
  const stop = text.slice(3, 6);
  const m = await client.messages.create({ model, max_tokens: 16, temperature: 0, messages, stop_sequences: ['qqqq', stop] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0]?.text ?? '', text.slice(0, text.indexOf(stop)));
});

test('countTokens equals the message input_tokens', async () => {
  const body = { model, system: 'You tell stories.', messages };
  const n = await client.messages.countTokens(body);
  const m = await client.messages.create({ ...body, max_tokens: 1 });
  assert.equal(n.input_tokens, m.usage.input_tokens);
  assert.ok(n.input_tokens > 5);
});

test('errors are the SDK typed errors', async () => {
  await assert.rejects(client.messages.create({ model, max_tokens: 4, messages: [] }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.error.error.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(
    client.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }),
    Anthropic.BadRequestError);
  const wrong = new Anthropic({ baseURL: root(process.env.TRITIUM_URL), apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model, max_tokens: 4, messages }), (e) => {
    assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
    assert.equal(e.error.error.type, 'authentication_error');
    return true;
  });
});

const ajv = new Ajv2020({ strict: false });
const tools = [
  { name: 'get_weather', description: 'Weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 16 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } },
  { name: 'add', description: 'Adds two integers',
    input_schema: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
      required: ['a', 'b'], additionalProperties: false } },
];
const validators = Object.fromEntries(tools.map((t) => [t.name, ajv.compile(t.input_schema)]));
const toolMessages = [{ role: 'user', content: 'Weather in Paris?' }];

function checkToolUse(m, name) {
  assert.equal(m.stop_reason, 'tool_use');
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, JSON.stringify(m.content));
  const u = uses[0];
  assert.match(u.id, /^toolu_/);
  if (name) assert.equal(u.name, name);
  const v = validators[u.name];
  assert.ok(v, `unknown tool ${u.name}`);
  assert.ok(v(u.input), `${JSON.stringify(u.input)}: ${ajv.errorsText(v.errors)}`);
  return u;
}

test('tools: tool_choice any gives a valid tool_use, streamed too', { skip: !toolsUrl && 'TRITIUM_TOOLS_URL not set' }, async () => {
  const body = { model, max_tokens: 200, system: 'You can call tools.', messages: toolMessages, tools, tool_choice: { type: 'any' }, temperature: 0 };
  checkToolUse(await toolsClient.messages.create(body));
  const stream = toolsClient.messages.stream(body);
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  assert.ok(types.includes('content_block_start'));
  checkToolUse(await stream.finalMessage());
});

test('tools: tool_choice tool, then a tool_result yields a text answer', { skip: !toolsUrl && 'TRITIUM_TOOLS_URL not set' }, async () => {
  const body = { model, max_tokens: 200, system: 'You can call tools.', messages: toolMessages, tools,
                 tool_choice: { type: 'tool', name: 'add' }, temperature: 0 };
  const m = await toolsClient.messages.create(body);
  const u = checkToolUse(m, 'add');
  const back = [...toolMessages, { role: 'assistant', content: m.content },
                { role: 'user', content: [{ type: 'tool_result', tool_use_id: u.id, content: String(u.input.a + u.input.b) }] }];
  const n = await toolsClient.messages.countTokens({ model, system: body.system, messages: back, tools });
  const r = await toolsClient.messages.create({ model, max_tokens: 16, system: body.system, messages: back, tools,
                                               tool_choice: { type: 'none' }, temperature: 0 });
  assert.equal(r.content.length, 1);
  assert.equal(r.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(r.stop_reason));
  assert.equal(r.usage.input_tokens, n.input_tokens);
  await assert.rejects(toolsClient.messages.create({ ...body, messages: [...toolMessages,
    { role: 'assistant', content: 'ok' }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_none', content: '1' }] }] }),
  Anthropic.BadRequestError);
});
