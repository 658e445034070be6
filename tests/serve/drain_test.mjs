// SIGTERM with requests in flight loses none: 6 streaming and 2 plain requests of 1,200 tokens
// and more (long enough that none can end before the signal, even on a loaded machine) start; the
// server gets SIGTERM once every stream has its first chunk and it holds all 8; each must still
// complete with the text the same request got before. Meanwhile new requests get 503 (or, once
// the drain is over, no connection); afterwards the port refuses connections.
//   node drain_test.mjs BASE_URL MODEL_NAME SERVER_PID [TOKENS]
// TOKENS (default 1200) is the shortest request's length; sanitizer builds, ~15x slower, pass
// fewer: the requests still last longer than in a release build.
import net from 'node:net';
import OpenAI from 'openai';

const [base, model, pid, tokensArg] = process.argv.slice(2);
const tokens = Number(tokensArg ?? 1200);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
let fails = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) fails += 1;
};
const reqs = Array.from({ length: 8 }, (_, i) => ({
  model, prompt: 'He said that', max_tokens: tokens + 10 * i, temperature: 0.9,
  repetition_penalty: 2, seed: i }));

async function run(r, stream, onFirst) {
  if (!stream) {
    const c = await client.completions.create(r);
    return { text: c.choices[0].text, finish: c.choices[0].finish_reason };
  }
  const s = await client.completions.create({ ...r, stream: true });
  let text = '', finish = null, first = true;
  for await (const chunk of s) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (first && onFirst) onFirst();
    first = false;
  }
  return { text, finish };
}

// Whether a fresh TCP connection to the server is refused.
const refused = () => new Promise((resolve) => {
  const { hostname, port } = new URL(base);
  const sock = net.connect(Number(port), hostname);
  sock.on('connect', () => { sock.destroy(); resolve(false); });
  sock.on('error', () => resolve(true));
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const expected = [];
for (const r of reqs) expected.push(await run(r, false));
let started = 0, done = 0, doneAtSignal = -1;
const streams = 6;
// SIGTERM once every stream has its first chunk and the server holds all 8 requests (the plain
// ones too: a request still on its way would rightly get 503).
const signalWhenAllHeld = async () => {
  for (let i = 0; i < 500; ++i) {
    const h = await (await fetch(`${base}/health`)).json();
    if (h.running + h.queued === reqs.length) break;
    await sleep(5);
  }
  doneAtSignal = done;
  process.kill(Number(pid), 'SIGTERM');
};
const inFlight = reqs.map((r, i) => run(r, i < streams, () => {
  if (++started === streams) signalWhenAllHeld();
}).finally(() => { ++done; }));

// While draining, a new request is refused with 503 (unless the drain is already over).
let duringDrain = null;
for (let i = 0; i < 250 && duringDrain === null; ++i) {
  await sleep(20);
  if (doneAtSignal < 0) continue;
  try {
    const r = await fetch(`${base}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model, prompt: 'x', max_tokens: 2 }) });
    if (r.status === 503) duringDrain = `503 ${(await r.json()).error?.message}`;
  } catch {
    duringDrain = 'refused';
  }
}
const got = await Promise.allSettled(inFlight);
check(doneAtSignal === 0, `SIGTERM sent with all ${reqs.length} requests in flight`);
const complete = got.every((g, i) => g.status === 'fulfilled' && g.value.text === expected[i].text &&
                                     g.value.finish === 'length');
check(complete, `all ${reqs.length} complete after SIGTERM with the texts they get otherwise`);
if (!complete) for (const g of got) console.log(g.status, g.reason?.message ?? JSON.stringify(g.value).slice(0, 80));
check(duringDrain !== null && /^(503 .*shutting down|refused)$/.test(duringDrain),
      `a new request while draining: ${duringDrain}`);
let closed = false;
for (let i = 0; i < 100 && !closed; ++i) {
  closed = await refused();
  if (!closed) await sleep(100);
}
check(closed, 'after the drain the port refuses connections');
console.log(`drain: ${fails} failed`);
process.exit(fails ? 1 : 0);
