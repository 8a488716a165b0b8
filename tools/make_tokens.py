#!/usr/bin/env python3
"""make_tokens.py -- write (or check) llm.c token shards for triad's kind = 'tokens'.

A shard is a header of 256 little-endian int32 (magic 20240520, version 1,
token count, the rest 0) followed by the tokens as little-endian uint16.
triad globs the shards, concatenates them in sorted-name order and cuts
windows of seq_len+1 tokens (docs/data.md).

  make_tokens.py book.txt data/book            the file's bytes are the tokens
                                               -> data/book_000000.bin, ...
  make_tokens.py --ints ids.txt data/ids       decimal integers separated by blanks or commas
  echo 1 2 3 | make_tokens.py --ints - x       '-' reads standard input
  make_tokens.py --info 'data/book_*.bin'      check shards and summarise them (uint16
                                               shards, and the uint32 ones of llm.c's
                                               LLaMA-3 scripts and triad tokenize)

Only the Python standard library is used.
"""

import argparse
import array
import errno
import glob
import os
import re
import signal
import struct
import sys

MAGIC = 20240520
VERSION = 1
# what --info reads: llm.c's shards of either width, (magic, version) -> array type
FORMATS = {(MAGIC, VERSION): "H", (20240801, 7): "I"}  # uint16 (GPT-2), uint32 (LLaMA-3)
HEADER_INTS = 256
HEADER_BYTES = 4 * HEADER_INTS
MAX_TOKEN = 65535  # uint16


def fail(msg, hint=None):
    sys.stderr.write("make_tokens.py: error: %s\n" % msg)
    if hint:
        sys.stderr.write("  hint: %s\n" % hint)
    sys.exit(1)


def read_input(path, ints, vocab_size):
    """The tokens of `path` as an array('H')."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            import stat
            mode = os.stat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):  # (a pipe ends: <(zcat book.gz) is read whole)
                fail("%s is %s, not a file" % (path, "a folder" if stat.S_ISDIR(mode) else "a device or a socket"),
                     "name a file ('-' reads standard input)")
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        fail("cannot read %s: %s" % (path, e.strerror))
    if not ints:
        toks = array.array("H", iter(data))  # bytes 0..255, as kind = 'text' reads them
    else:
        toks = array.array("H")
        if data.startswith(b"\xef\xbb\xbf"):  # (a UTF-8 byte-order mark, as some editors write)
            data = data[3:]
        text = data.decode("ascii", errors="replace")
        decimal = re.compile(r"-?[0-9]+$")  # (decimal only: no 0x10, 1_0 or +4, which are not ids as written)
        for line_no, line in enumerate(text.split("\n"), 1):
            for k, word in enumerate(w for w in re.split(r"[\s,]+", line) if w):
                if not decimal.match(word):
                    fail("%s: line %d, item %d ('%s') is not a decimal integer" % (path, line_no, k + 1, word[:40]))
                digits = word.lstrip("-").lstrip("0")
                v = int(word, 10) if len(digits) <= 9 else (MAX_TOKEN + 1)  # (past any id: not converted)
                if not 0 <= v <= MAX_TOKEN:
                    fail("%s: line %d, item %d is %s, outside [0, %d]"
                         % (path, line_no, k + 1, word if len(word) <= 40 else word[:37] + "...", MAX_TOKEN),
                         "llm.c GPT-2 shards hold uint16 tokens")
                toks.append(v)
    if vocab_size and toks:
        mx = max(toks)
        if mx >= vocab_size:
            fail("%s: token %d is %d, not below --vocab-size %d"
                 % (path, toks.index(mx), mx, vocab_size),
                 "raise the vocabulary to at least %d" % (mx + 1))
    return toks


def old_shards(prefix):
    """The shards (and their temporaries) an earlier run left under prefix, sorted."""
    pat = re.compile(re.escape(os.path.basename(prefix)) + r"_\d{6,}\.bin(\.tmp)?$")
    d = os.path.dirname(prefix) or "."
    try:
        return sorted(os.path.join(os.path.dirname(prefix), n) for n in os.listdir(d) if pat.match(n))
    except FileNotFoundError:
        return []
    except OSError as e:
        fail("cannot list %s, the folder of %s: %s" % (d, prefix, e.strerror))


def made_dirs(d):
    """The folders os.makedirs(d) would make, the deepest last."""
    out = []
    while d and not os.path.exists(d):
        out.append(d)
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    return out[::-1]


class Stopped(Exception):
    """SIGTERM (or SIGINT): the shards are removed as after an error."""


def on_signal(sig, frame):
    raise Stopped(sig)


def write_shards(toks, prefix, shard_tokens):
    """The shards of toks under prefix, each written as NAME.tmp then renamed; on
    an error or a signal every file and folder this run made is removed, and
    the reason said."""
    old = old_shards(prefix)
    if old:
        fail("%s already holds %d shard(s) of that prefix (%s%s): the new ones would mix with them under "
             "the deck's '%s_*.bin'" % (os.path.dirname(prefix) or ".", len(old), old[0],
                                        ", ..." if len(old) > 1 else "", prefix),
             "remove them first, or choose another output prefix")
    others = sorted(glob.glob(glob.escape(prefix) + "_*.bin"))
    if others:  # (another prefix that starts with this one's: book_v2 beside book)
        sys.stderr.write("make_tokens.py: warning: the deck's path '%s_*.bin' also matches %s (%d file(s) of "
                         "another prefix): choose prefixes that do not begin one another\n"
                         % (prefix, others[0], len(others)))
    d = os.path.dirname(prefix)
    made = made_dirs(d) if d else []
    nshards = max(1, (len(toks) + shard_tokens - 1) // shard_tokens)
    names, tmp = [], None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        if d:
            os.makedirs(d, exist_ok=True)
        for s in range(nshards):
            part = toks[s * shard_tokens:(s + 1) * shard_tokens]
            if sys.byteorder != "little":
                part = array.array("H", part)
                part.byteswap()
            header = [0] * HEADER_INTS
            header[0], header[1], header[2] = MAGIC, VERSION, len(part)
            name = "%s_%06d.bin" % (prefix, s)
            try:
                f = open(name + ".tmp", "xb")  # (a temporary of another process is never taken over, nor removed)
            except FileExistsError:
                raise OSError(errno.EEXIST, "another process writes to this prefix", name + ".tmp")
            tmp = name + ".tmp"
            with f:
                f.write(struct.pack("<%di" % HEADER_INTS, *header))
                f.write(part.tobytes())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name)  # never leave a half-written shard under the final name
            tmp = None
            names.append(name)
    except (OSError, Stopped, KeyboardInterrupt) as e:
        for n in names + ([tmp] if tmp else []):
            try:
                os.remove(n)
            except OSError:
                pass
        for m in reversed(made):  # (the deepest first; one that holds something stays)
            try:
                os.rmdir(m)
            except OSError:
                pass
        if not isinstance(e, OSError):
            sys.stderr.write("make_tokens.py: stopped by a signal: nothing of the shards of %s is left\n" % prefix)
            sys.exit(130 if isinstance(e, KeyboardInterrupt) or e.args[0] == signal.SIGINT else 143)
        fail("writing the shards of %s failed: %s%s; nothing of them is left"
             % (prefix, e.strerror, " (%s)" % e.filename if e.filename else ""),
             "give each run its own output prefix" if e.errno == errno.EEXIST else
             "free space there, or choose an output prefix in a writable folder")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
    return names


def check_shard(path):
    """(tokens, max token) of a valid shard, or an error string."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
            if len(head) < HEADER_BYTES:
                return "%d bytes, shorter than the %d-byte header" % (size, HEADER_BYTES)
            magic, version, n = struct.unpack("<3i", head[:12])
            if magic not in (m for m, _ in FORMATS):
                return ("magic %d, expected 20240520 (uint16) or 20240801 (uint32): not an llm.c token shard"
                        % magic)
            kind = FORMATS.get((magic, version))
            if kind is None:
                return "version %d, expected %d for magic %d" % (
                    version, {m: v for m, v in FORMATS}[magic], magic)
            toks = array.array(kind)
            if size != HEADER_BYTES + toks.itemsize * n:
                return "header says %d tokens, the file holds %d" % (n, (size - HEADER_BYTES) // toks.itemsize)
            toks.frombytes(f.read())
    except OSError as e:
        return e.strerror
    if sys.byteorder != "little":
        toks.byteswap()
    return n, (max(toks) if toks else 0)


def info(pattern):
    files = sorted(glob.glob(pattern)) or ([pattern] if os.path.exists(pattern) else [])
    if not files:
        fail("no file matches '%s'" % pattern)
    total, mx, bad = 0, 0, 0
    for name in files:
        r = check_shard(name)
        if isinstance(r, str):
            sys.stdout.flush()
            sys.stderr.write("make_tokens.py: error: %s: %s\n" % (name, r))
            bad += 1
            continue
        print("%s: %d tokens, max token %d" % (name, r[0], r[1]))
        total += r[0]
        mx = max(mx, r[1])
    print("%d shard(s), %d tokens, max token %d (needs vocab_size >= %d)%s"
          % (len(files) - bad, total, mx, mx + 1, "; %d file(s) are not shards (above)" % bad if bad else ""))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(
        description="Convert a text file (bytes as tokens) or a list of integer token ids "
                    "into llm.c token shards for triad's &data kind = 'tokens'.")
    ap.add_argument("input", help="input file ('-' for stdin), or with --info a glob of shards")
    ap.add_argument("output", nargs="?",
                    help="output prefix: writes PREFIX_000000.bin, PREFIX_000001.bin, ...")
    ap.add_argument("--ints", action="store_true",
                    help="input holds integer token ids separated by blanks or commas")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000,
                    help="tokens per shard (default 100000000, as llm.c; at most 2147483647, "
                         "the header's int32 count)")
    ap.add_argument("--vocab-size", type=int, default=0,
                    help="fail if a token is not below this")
    ap.add_argument("--info", action="store_true", help="check shards and summarise them")
    a = ap.parse_args()
    if a.info:
        if a.output:
            ap.error("--info takes one glob of shards (quote it), not '%s' as well" % a.output)
        return info(a.input)
    if a.vocab_size < 0:
        ap.error("--vocab-size must be 0 (no check) or the vocabulary's size")
    if not a.output:
        ap.error("the output prefix is missing")
    if a.shard_tokens < 1:
        ap.error("--shard-tokens must be at least 1")
    if a.shard_tokens > 2**31 - 1:
        ap.error("--shard-tokens must be at most 2147483647: a shard's header counts its tokens in an int32 "
                 "(llm.c's format)")
    toks = read_input(a.input, a.ints, a.vocab_size)
    if not toks:
        # (llm.c's dataloader asserts that a shard holds tokens: a shard of none is no shard)
        fail("%s holds no token: a shard of 0 tokens is refused by llm.c's reader and trains nothing"
             % ("standard input" if a.input == "-" else a.input),
             "give a non-empty file" + (" of integers" if a.ints else ""))
    names = write_shards(toks, a.output, a.shard_tokens)
    print("wrote %d shard(s), %d tokens, max token %d; in the deck: kind = 'tokens', path = '%s_*.bin'"
          % (len(names), len(toks), max(toks) if toks else 0, a.output))
    return 0


def run():
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # (| head: the reader went away)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        if e.filename is None:  # (stdout's: the files' errors are said where they happen)
            info_mode = "--info" in sys.argv[1:]
            sys.stderr.write("make_tokens.py: %s: the output could not all be written to stdout: %s%s\n"
                             % ("error" if info_mode else "warning", e.strerror,
                                "" if info_mode else " (the shards are written)"))
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no second error at exit)
            return 1 if info_mode else 0
        raise
    return status


if __name__ == "__main__":
    sys.exit(run())
