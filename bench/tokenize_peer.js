// tokenize_peer.js -- the peers of bench/tokenize_bench.sh, one thread each:
// OpenAI's tiktoken (npm WASM build) on GPT-2's encoding, and
// transformers.js's JavaScript tokenizers (the @lenml/tokenizers fork, the
// JavaScript port of Hugging Face's tokenizers) on a tokenizer.json.
//   node tokenize_peer.js tiktoken FILE
//   node tokenize_peer.js transformers TOKENIZER_JSON FILE
// prints "<peer> <tokens> tokens in <s> s: <tokens/s> tokens/s, <MB/s> MB/s"
// over passes of the file for at least 2 s (after one warm-up pass).
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
const text = fs.readFileSync(file).toString('utf8');
encode(text);
let n = 0, runs = 0;
const t0 = process.hrtime.bigint();
do { n += encode(text); runs++; } while (Number(process.hrtime.bigint() - t0) < 2e9);
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${peer} ${n} tokens in ${s.toFixed(2)} s: ${(n / s).toFixed(0)} tokens/s, ` +
            `${(Buffer.byteLength(text) * runs / s / 1e6).toFixed(2)} MB/s`);
