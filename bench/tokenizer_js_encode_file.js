// Encodes a file with gpt-3-encoder line by line (its encode() concatenates arrays per word, which
// is quadratic on one long text) and prints tokens/s of the encoding alone.
// Usage: node tokenizer_js_encode_file.js FILE
const fs = require('fs');
const path = require('path');
const { encode } = require(path.join(__dirname, '../tests/tokenizer/node_modules/gpt-3-encoder'));

const text = fs.readFileSync(process.argv[2], 'utf8');
const lines = text.split(/(?<=\n)/);
const t0 = process.hrtime.bigint();
let tokens = 0;
for (const line of lines) tokens += encode(line).length;
const s = Number(process.hrtime.bigint() - t0) / 1e9;
const bytes = Buffer.byteLength(text, 'utf8');
console.log(`gpt-3-encoder: ${bytes} bytes -> ${tokens} tokens in ${s.toFixed(3)} s: ` +
            `${Math.round(tokens / s)} tokens/s, ${(bytes / s / 1e6).toFixed(2)} MB/s`);
