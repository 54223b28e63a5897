// The official openai npm package against a running `tritium serve` (tiny-bitnet): completions and chat
// completions, streaming and not; errors surface as the package's typed errors.
// Env: TRITIUM_URL (e.g. http://127.0.0.1:PORT/v1), TRITIUM_API_KEY.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.TRITIUM_URL, apiKey: process.env.TRITIUM_API_KEY, maxRetries: 0 });
const model = 'tiny-bitnet';

test('models list', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model]);
});

test('completion, greedy, non-streaming and streaming give the same text', async () => {
  const params = { model, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 };
  const r = await client.completions.create(params);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 16);
  assert.ok(r.choices[0].text.length > 0);
  // Greedy decoding of this prompt on tiny-bitnet (the bundled model) starts like this.
  assert.ok(r.choices[0].text.startsWith(', and'), JSON.stringify(r.choices[0].text));

  const stream = await client.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, 'length');
});

test('chat completion, non-streaming and streaming', async () => {
  const messages = [{ role: 'user', content: 'Tell me about the sea.' }];
  const r = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.usage.prompt_tokens > 5);

  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let role = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const d = chunk.choices[0]?.delta;
    if (d?.role) role = d.role;
    text += d?.content ?? '';
  }
  assert.equal(role, 'assistant');
  assert.equal(text, r.choices[0].message.content);
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
});

test('seeded sampling with n = 2 is reproducible', async () => {
  const params = { model, prompt: 'The old man', max_tokens: 10, temperature: 1.0, seed: 5, n: 2 };
  const a = await client.completions.create(params);
  const b = await client.completions.create(params);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
});

test('errors: unknown model (404), context overflow (400), bad API key (401)', async () => {
  await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }), (e) => e.status === 404);
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 100000 }),
    (e) => e.status === 400 && /maximum context length/.test(e.message));
  const bad = new OpenAI({ baseURL: process.env.TRITIUM_URL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
});

// lm-evaluation-harness's `local-completions` loglikelihood request: token-id prompt, echo, logprobs, max_tokens 0.
// The answer holds the prompt's text and one logprob per prompt token (the first null), and generates nothing.
test('lm-evaluation-harness loglikelihood request (echo, logprobs, max_tokens 0)', async () => {
  const tok = await fetch(process.env.TRITIUM_URL.replace(/\/v1$/, '') + '/tokenize', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'The cat sat on the mat', add_special_tokens: false }),
  }).then((r) => r.json());
  assert.ok(tok.tokens.length >= 4);
  const r = await client.completions.create({ model, prompt: tok.tokens, echo: true, logprobs: 1, max_tokens: 0,
                                              temperature: 0 });
  const c = r.choices[0];
  assert.equal(c.text, 'The cat sat on the mat');
  assert.equal(r.usage.completion_tokens, 0);
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, tok.tokens.length);
  assert.equal(lp.token_logprobs[0], null);
  for (const v of lp.token_logprobs.slice(1)) assert.ok(Number.isFinite(v) && v <= 0, String(v));
  // is_greedy as lm-eval computes it: the top entry of every continuation position.
  for (const t of lp.top_logprobs.slice(1)) assert.equal(Object.keys(t).length >= 1, true);
  assert.equal(lp.text_offset[0], 0);
});
