// tokfuzz_ref.js -- the reference side of tools/tokfuzz.py: Hugging Face's
// tokenizers library (npm @anush008/tokenizers) or OpenAI's tiktoken (its
// gpt2 encoding) on each file, one JSON object a line:
//   {"ids": [...], "ids_special": [...], "text": "...", "ms": encode time}
// A file's bytes are read as the library's callers read text
// (Buffer.toString: each maximal ill-formed UTF-8 subsequence is U+FFFD).
//   node tokfuzz_ref.js TOKENIZER_JSON|tiktoken:gpt2 FILE...
const path = require('path');
const fs = require('fs');
const modules = path.resolve(process.env.TRIAD_NPM_DIR || '/var/cache/triad-npm', 'node_modules');

async function main() {
  const [which, ...files] = process.argv.slice(2);
  let encode, decode, done = () => {};
  if (which === 'tiktoken:gpt2') {
    const { get_encoding } = require(path.join(modules, 'tiktoken'));
    const enc = get_encoding('gpt2');
    encode = async (text) => Array.from(enc.encode(text, 'all'));
    decode = async (ids) => Buffer.from(enc.decode(new Uint32Array(ids))).toString('utf8');
    done = () => enc.free();
  } else {
    const { Tokenizer } = require(path.join(modules, '@anush008/tokenizers'));
    const tok = Tokenizer.fromFile(which);
    encode = async (text, special) => (await tok.encode(text, null, { addSpecialTokens: special })).getIds();
    decode = async (ids) => tok.decode(ids, false);
  }
  for (const f of files) {
    const text = fs.readFileSync(f).toString('utf8');
    const t0 = process.hrtime.bigint();
    const ids = Array.from(await encode(text, false));
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const special = Array.from(await encode(text, true));
    const out = { ids, ids_special: special, text: await decode(ids), ms };
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  done();
}
main().catch((e) => { console.error(e); process.exit(1); });
