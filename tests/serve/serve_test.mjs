// zaya serve against the official openai client (npm openai, pinned in package-lock.json):
// completions, streaming, stop strings and seeds; 16 concurrent streaming clients against the same
// requests made one at a time; every bad request answered with its 4xx JSON error while the
// server keeps serving; a full queue answered 429.
//   node serve_test.mjs BASE_URL MODEL_NAME [busy]
// With "busy", only the queue check runs (a server started with --max-batch 1 --max-queue 1).
import OpenAI from 'openai';

const [base, model, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
let fails = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) fails += 1;
};

async function complete(params) {
  const r = await client.completions.create({ model, ...params });
  return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
}

async function streamed(params, onFirst) {
  const stream = await client.completions.create({ model, ...params, stream: true });
  let text = '', finish = null, chunks = 0;
  for await (const chunk of stream) {
    if (chunk.choices.length === 0) continue;
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunks++ === 0 && onFirst) onFirst();
  }
  return { text, finish, chunks };
}

// The error a request gets: [status, error object] (no exception means no error: [200, null]).
async function errorOf(params) {
  try {
    await client.completions.create({ model, ...params });
    return [200, null];
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) throw e;
    return [e.status, e.error?.error ?? e.error];
  }
}

async function raw(method, path, body, headers = { 'content-type': 'application/json' }) {
  const r = await fetch(`${base}${path}`, { method, body, headers });
  let j = null;
  try { j = await r.json(); } catch { /* not JSON */ }
  return [r.status, j];
}

if (mode === 'busy') {
  // One running, one waiting: of 12 requests sent at once, some must be refused with 429.
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
    errorOf({ prompt: 'The jury', max_tokens: 200, temperature: 0, seed: i })));
  const statuses = results.map(([s]) => s);
  check(statuses.includes(429) && statuses.every((s) => s === 200 || s === 429),
        `a full queue answers 429 (statuses: ${statuses.join(' ')})`);
  const busy = results.find(([s]) => s === 429);
  check(busy && busy[1]?.type === 'rate_limit_error' && /busy/.test(busy[1]?.message),
        '429 carries an OpenAI error object');
  process.exit(fails ? 1 : 0);
}

// Models and health.
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, `GET /v1/models lists '${model}'`);
const [hs, hj] = await raw('GET', '/health');
check(hs === 200 && hj?.status === 'ok', 'GET /health is 200 ok');

// A greedy completion, and the same streamed.
const greedy = await complete({ prompt: 'The jury said', max_tokens: 24, temperature: 0 });
check(greedy.finish === 'length' && greedy.usage.completion_tokens === 24 &&
      greedy.usage.prompt_tokens > 0 &&
      greedy.usage.total_tokens === greedy.usage.prompt_tokens + 24,
      'greedy: 24 tokens, finish_reason length, usage counts');
const s = await streamed({ prompt: 'The jury said', max_tokens: 24, temperature: 0 });
check(s.text === greedy.text && s.finish === 'length' && s.chunks >= 2,
      `streaming gives the same text in ${s.chunks} chunks`);
// Usage in the stream when asked.
const withUsage = await client.completions.create({
  model, prompt: 'The jury said', max_tokens: 5, temperature: 0, stream: true,
  stream_options: { include_usage: true } });
let usage = null;
for await (const chunk of withUsage) if (chunk.usage) usage = chunk.usage;
check(usage?.completion_tokens === 5, 'stream_options.include_usage adds the usage');

// Seeds: the same seed gives the same text, another seed another (repetition penalty 3: the
// random model repeats itself otherwise).
const sampled = (seed) => complete({ prompt: 'In the morning', max_tokens: 24, temperature: 1,
                                     repetition_penalty: 3, seed });
const [a, b, c] = [await sampled(5), await sampled(5), await sampled(6)];
check(a.text === b.text && a.text !== c.text, 'same seed same text, another seed another');

// A stop string from the middle of the greedy text: the text ends just before it.
const mid = Math.floor(greedy.text.length / 2);
const stop = greedy.text.slice(mid, mid + 3);
if (stop.trim().length > 0) {
  const st = await complete({ prompt: 'The jury said', max_tokens: 24, temperature: 0, stop: [stop, 'zzzz'] });
  const want = greedy.text.slice(0, greedy.text.indexOf(stop));
  check(st.finish === 'stop' && st.text === want, `stop ${JSON.stringify(stop)} ends the text before it`);
  const ss = await streamed({ prompt: 'The jury said', max_tokens: 24, temperature: 0, stop });
  check(ss.finish === 'stop' && ss.text === want, 'streamed stop string too');
}

// 16 concurrent streaming clients get what the same requests get one at a time.
const words = 'The jury said that in the morning he would go to the city and see the house'.split(' ');
const requests = Array.from({ length: 16 }, (_, i) => ({
  prompt: words.slice(0, 1 + (5 * i) % words.length).join(' '),
  max_tokens: 8 + (11 * i) % 40,
  temperature: [0, 0.7, 1.2][i % 3],
  top_p: i % 4 === 3 ? 0.9 : 1,
  repetition_penalty: i % 2 ? 2 : 1,
  seed: 100 + i,
}));
const alone = [];
for (const r of requests) alone.push(await streamed(r));
const together = await Promise.all(requests.map((r) => streamed(r)));
const same = together.every((t, i) => t.text === alone[i].text && t.finish === alone[i].finish);
check(same && together.every((t) => t.finish), '16 concurrent streams: every text as when alone');

// lm-evaluation-harness's log-likelihood request through the client: token-id prompts in a batch,
// echo, max_tokens 1, logprobs 1; each choice echoes its prompt's tokens (the first logprob null)
// and one drawn token, and lm-eval's sum over token_logprobs[ctxlen:-1] is the same whether the
// prompt comes alone or in the batch.
const [, tokBody] = await raw('POST', '/tokenize', JSON.stringify({ prompt: 'The jury said that the', add_special_tokens: false }));
const ids = tokBody.tokens;
const ll = await client.completions.create({ model, prompt: [ids, ids.slice(0, 3)], temperature: 0, max_tokens: 1, logprobs: 1, seed: 1234, echo: true });
const lp = ll.choices.find((c) => c.index === 0).logprobs;
check(ll.choices.length === 2 && lp.tokens.length === ids.length + 1 && lp.token_logprobs[0] === null &&
      lp.top_logprobs.length === ids.length + 1 && lp.text_offset[0] === 0,
      `lm-eval log-likelihood batch: ${ll.choices.length} choices, ${lp.tokens.length} tokens`);
const echoed = await client.completions.create({ model, prompt: ids, max_tokens: 0, logprobs: 0, echo: true });
const sum = (l) => l.token_logprobs.slice(2, ids.length).reduce((a, b) => a + b, 0);
check(Math.abs(sum(echoed.choices[0].logprobs) - sum(lp)) <= 1e-6 * Math.abs(sum(lp)) &&
      echoed.choices[0].logprobs.tokens.length === ids.length,
      'echo with max_tokens 0: the prompt alone scores as in the batch');

// Bad requests: each gets its 4xx and an OpenAI error object; the server keeps serving.
const bad = [
  ['unknown field', { prompt: 'x', max_token: 5 }, 400, 'max_token'],
  ['temperature out of range', { prompt: 'x', temperature: 5 }, 400, 'temperature'],
  ['top_p out of range', { prompt: 'x', top_p: 0 }, 400, 'top_p'],
  ['max_tokens 0', { prompt: 'x', max_tokens: 0 }, 400, 'max_tokens'],
  ['logprobs over 20', { prompt: 'x', logprobs: 21 }, 400, 'logprobs'],
  ['a token id outside the vocabulary', { prompt: [[1, 99999]] }, 400, 'prompt[0]'],
  ['max_tokens not an integer', { prompt: 'x', max_tokens: 2.5 }, 400, 'max_tokens'],
  ['prompt of the wrong type', { prompt: 5 }, 400, 'prompt'],
  ['no prompt', {}, 400, 'prompt'],
  ['n = 2', { prompt: 'x', n: 2 }, 400, 'n'],
  ['five stop strings', { prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }, 400, 'stop'],
  ['a prompt longer than the context', { prompt: 'the jury '.repeat(400), max_tokens: 4 }, 400, 'prompt'],
  ['another model', { prompt: 'x', model: 'gpt-4' }, 404, 'model'],
];
for (const [what, params, status, param] of bad) {
  const [got, err] = await errorOf(params);
  check(got === status && err?.param === param && typeof err?.message === 'string' &&
        err?.type !== undefined, `${what}: ${got} ${JSON.stringify(err?.message)}`);
}
const [ctxStatus, ctxErr] = await errorOf({ prompt: 'the jury '.repeat(400), max_tokens: 4 });
check(ctxStatus === 400 && ctxErr?.code === 'context_length_exceeded', 'context_length_exceeded code');
const [mj, mjBody] = await raw('POST', '/v1/completions', '{"model": "' + model + '", "prompt": ');
check(mj === 400 && /not valid JSON/.test(mjBody?.error?.message), `malformed JSON: ${mj}`);
const [nr, nrBody] = await raw('GET', '/v1/nothing');
check(nr === 404 && nrBody?.error?.message !== undefined, `unknown route: ${nr} JSON`);
const [big] = await raw('POST', '/v1/completions', JSON.stringify({ model, prompt: 'x'.repeat(2 << 20) }));
check(big === 413, `a body over the limit: ${big}`);
const after = await complete({ prompt: 'The jury said', max_tokens: 24, temperature: 0 });
check(after.text === greedy.text, 'still serving after the bad requests, the same text');

console.log(`serve: ${fails} failed`);
process.exit(fails ? 1 : 0);
