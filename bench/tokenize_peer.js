// tokenize_peer.js -- the peers of bench/tokenize_bench.sh, one thread each:
// OpenAI's tiktoken (npm WASM build) on GPT-2's encoding, and
// transformers.js's JavaScript tokenizers (the @lenml/tokenizers fork, the
// JavaScript port of Hugging Face's tokenizers) on a tokenizer.json.
//   node tokenize_peer.js tiktoken DOCS_JSONL
//   node tokenize_peer.js transformers TOKENIZER_JSON DOCS_JSONL
// encodes each document (the "text" member of each line) and prints
// "<peer> <tokens> tokens in <s> s: <tokens/s> tokens/s, <MB/s> MB/s" over
// passes of all of them for at least 2 s (after one warm-up pass).
const path = require('path');
const fs = require('fs');
const modules = path.resolve(process.env.TRIAD_NPM_DIR || '.', 'node_modules');
const [peer, a, b] = process.argv.slice(2);
let encode, file;
if (peer === 'tiktoken') {
  const enc = require(path.join(modules, 'tiktoken')).get_encoding('gpt2');
  encode = (t) => enc.encode(t, 'all').length;
  file = a;
} else {
  const { TokenizerLoader } = require(path.join(modules, '@lenml/tokenizers'));
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: JSON.parse(fs.readFileSync(a, 'utf8')), tokenizerConfig: {} });
  encode = (t) => tok.encode(t, { add_special_tokens: false }).length;
  file = b;
}
const docs = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l).text);
const bytes = docs.reduce((a, d) => a + Buffer.byteLength(d), 0);
const pass = () => docs.reduce((a, d) => a + encode(d), 0);
pass();
let n = 0, runs = 0;
const t0 = process.hrtime.bigint();
do { n += pass(); runs++; } while (Number(process.hrtime.bigint() - t0) < 2e9);
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${peer} ${n} tokens in ${s.toFixed(2)} s: ${(n / s).toFixed(0)} tokens/s, ` +
            `${(bytes * runs / s / 1e6).toFixed(2)} MB/s`);
