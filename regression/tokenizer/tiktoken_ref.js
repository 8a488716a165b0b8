// tiktoken_ref.js -- GPT-2's encoding by OpenAI's tiktoken (its npm WASM
// build): the independent side for GPT-2's vocab.json + merges.txt in
// regression/tokenizer.sh, and the peer of bench/tokenize_bench.sh.
//   node tiktoken_ref.js ids FILE...     the ids of each file, a line each
//   node tiktoken_ref.js bench FILE      tokens/s of one thread over FILE
const path = require('path');
const fs = require('fs');
const modules = path.resolve(process.env.TRIAD_NPM_DIR || '.', 'node_modules');
const { get_encoding } = require(path.join(modules, 'tiktoken'));
const enc = get_encoding('gpt2');
const [mode, ...files] = process.argv.slice(2);
if (mode === 'bench') {
  const text = fs.readFileSync(files[0]).toString('utf8');
  let n = 0, t0 = process.hrtime.bigint(), runs = 0;
  do { n += enc.encode(text, 'all').length; runs++; } while (Number(process.hrtime.bigint() - t0) < 2e9);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`tiktoken ${(n / s).toFixed(0)} tokens/s (${runs} passes, ${(Buffer.byteLength(text) * runs / s / 1e6).toFixed(2)} MB/s)`);
} else {
  let out = '';
  for (const f of files) out += Array.from(enc.encode(fs.readFileSync(f).toString('utf8'), 'all')).join(' ') + '\n';
  process.stdout.write(out);
}
enc.free();
