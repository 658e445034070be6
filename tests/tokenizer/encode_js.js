// Reads a JSON array of strings on stdin and prints a JSON array of their token ids, encoded by
// OpenAI's gpt-3-encoder (the independent reference for zaya's GPT-2 tokenizer).
const { encode } = require('gpt-3-encoder');

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const strings = JSON.parse(input);
  process.stdout.write(JSON.stringify(strings.map((s) => encode(s))) + '\n');
});
