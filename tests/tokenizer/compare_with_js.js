// Encodes every string of strings.json with zaya (a command that reads a JSON array of strings on
// stdin and prints their ids) and with gpt-3-encoder, and requires identical ids.
// Usage: node compare_with_js.js STRINGS_JSON ZAYA_COMMAND...
const fs = require('fs');
const path = require('path');
const runJson = require('./run_json');

const [stringsPath, ...zayaCommand] = process.argv.slice(2);
const input = fs.readFileSync(stringsPath, 'utf8');

const strings = JSON.parse(input);
const js = runJson(process.execPath, [path.join(__dirname, 'encode_js.js')], input);
const zaya = runJson(zayaCommand[0], zayaCommand.slice(1), input);
let passed = 0, failed = 0;
strings.forEach((s, i) => {
  const a = JSON.stringify(zaya[i]), b = JSON.stringify(js[i]);
  if (a === b) { passed++; return; }
  failed++;
  console.log(`MISMATCH string ${i}: ${JSON.stringify(s)}\n  zaya: ${a}\n  js:   ${b}`);
});
console.log(`tokenizer_vs_js: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed === strings.length ? 0 : 1);
