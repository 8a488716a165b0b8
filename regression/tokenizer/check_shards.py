#!/usr/bin/python3
"""check_shards.py DIR IDS SEP MAGIC VERSION WIDTH -- llm.c shards DIR/g_val_*.bin
then DIR/g_train_*.bin, read from the format's definition (256 int32 of
header: magic, version, token count; then the ids, WIDTH bytes each), hold
exactly SEP followed by each line of IDS (a document's ids) in order."""
import glob
import struct
import sys

d, ids = sys.argv[1], sys.argv[2]
sep, magic, version, width = (int(x) for x in sys.argv[3:7])
got, files = [], sorted(glob.glob(d + "/g_val_*.bin")) + sorted(glob.glob(d + "/g_train_*.bin"))
for f in files:
    b = open(f, "rb").read()
    h = struct.unpack("<256i", b[:1024])
    if (h[0], h[1]) != (magic, version) or len(b) != 1024 + width * h[2]:
        sys.exit("%s: header %s, %d bytes" % (f, h[:3], len(b)))
    got += struct.unpack("<%d%s" % (h[2], "H" if width == 2 else "I"), b[1024:])
want = []
for line in open(ids):
    want += [sep] + [int(x) for x in line.split()]
if list(got) != want:
    sys.exit("%d tokens in the shards, %d expected; first difference at %d" % (len(got), len(want), next(
        (i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))))
print("%d shards, %d tokens" % (len(files), len(got)))
