// reference.js -- the independent side of regression/tokenizer.sh: Hugging
// Face's own tokenizers library (its Rust code, through the napi build in
// the npm package @anush008/tokenizers) encodes each file and decodes the
// ids.  A file's bytes are read as the library's callers read text: each
// ill-formed UTF-8 subsequence becomes U+FFFD (Buffer.toString, WHATWG).
//   node reference.js TOKENIZER_JSON ids|ids_special|text FILE...
// prints one line per file: the ids (space-separated), or the decoded text
// followed by a newline;
//   node reference.js TOKENIZER_JSON bytes FILE...
// reads each file as ids (space-separated) and prints the UTF-8 bytes of
// their decoded text, special tokens skipped, a line each.
const path = require('path');
const fs = require('fs');
const modules = path.resolve(process.env.TRIAD_NPM_DIR || '.', 'node_modules');
const { Tokenizer } = require(path.join(modules, '@anush008/tokenizers'));
(async () => {
  const [file, mode, ...inputs] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(file);
  let out = '';
  for (const f of inputs) {
    const text = fs.readFileSync(f).toString('utf8');
    if (mode === 'bytes') {
      const ids = text.split(/\s+/).filter((w) => w).map(Number);
      out += Buffer.byteLength(await tok.decode(ids, true), 'utf8') + '\n';
      continue;
    }
    const enc = await tok.encode(text, null, { addSpecialTokens: mode === 'ids_special' });
    const ids = enc.getIds();
    if (mode === 'text') out += (await tok.decode(ids, false)) + '\n';
    else out += ids.join(' ') + '\n';
  }
  process.stdout.write(out);
})().catch((e) => { console.error(e); process.exit(1); });
