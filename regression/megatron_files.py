#!/usr/bin/python3
"""megatron_files.py -- Megatron-LM's indexed dataset, written from the
format's definition (docs/data.md) and not from triad's code, for
regression/indexed_data.sh:

  write PREFIX DTYPE IDS [SEP]   PREFIX.idx and PREFIX.bin: each line of the
        file IDS (whitespace-separated ids) one document of one sequence, SEP
        (an id) before each; DTYPE one of u8 i8 i16 i32 i64 u16 (f32, f64:
        the format allows them, for a test that they are refused)
  damage KIND PREFIX             magic, version, dtype, offsets, docs, short_bin,
        long_bin, negative (a negative id in an i32 dataset)

.idx: b"MMIDIDX\\0\\0", u64 version 1, u8 dtype code (1 u8, 2 i8, 3 i16, 4 i32,
5 i64, 6 f64, 7 f32, 8 u16), u64 sequence count, u64 document count, i32
sequence lengths, i64 byte offsets into .bin, i64 document indices (0, then
the sequence count after each document).
"""
import struct
import sys

import numpy as np

CODES = {"u8": (1, np.uint8), "i8": (2, np.int8), "i16": (3, np.int16), "i32": (4, np.int32), "i64": (5, np.int64),
         "f64": (6, np.float64), "f32": (7, np.float32), "u16": (8, np.uint16)}


def write(prefix, dtype, ids_file, sep=None):
    code, np_type = CODES[dtype]
    seqs = []
    for line in open(ids_file):
        ids = ([sep] if sep is not None else []) + [int(x) for x in line.split()]
        seqs.append(np.array(ids, dtype=np_type))
    lengths = np.array([len(s) for s in seqs], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]).astype(np.int64) * np.dtype(np_type).itemsize
    docs = np.arange(len(seqs) + 1, dtype=np.int64)
    with open(prefix + ".bin", "wb") as f:
        for s in seqs:
            f.write(s.tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(seqs)) + struct.pack("<Q", len(docs)))
        f.write(lengths.tobytes() + offsets[:len(seqs)].tobytes() + docs.tobytes())


def damage(kind, prefix):
    idx = bytearray(open(prefix + ".idx", "rb").read())
    nseq = struct.unpack("<Q", idx[18:26])[0]
    if kind == "magic":
        idx[0:7] = b"NOTIDX!"
    elif kind == "version":
        idx[9:17] = struct.pack("<Q", 2)
    elif kind == "dtype":
        idx[17] = 7
    elif kind == "offsets":  # the second sequence one element early
        at = 34 + 4 * nseq + 8
        idx[at:at + 8] = struct.pack("<q", struct.unpack("<q", idx[at:at + 8])[0] - 4)
    elif kind == "docs":  # the document index does not end at the sequence count
        idx[-8:] = struct.pack("<q", nseq + 3)
    elif kind == "short_bin":
        b = open(prefix + ".bin", "rb").read()
        open(prefix + ".bin", "wb").write(b[:-4])
        return
    elif kind == "long_bin":
        open(prefix + ".bin", "ab").write(b"\0" * 8)
        return
    elif kind == "negative":
        b = bytearray(open(prefix + ".bin", "rb").read())
        b[8:12] = struct.pack("<i", -5)
        open(prefix + ".bin", "wb").write(b)
        return
    open(prefix + ".idx", "wb").write(idx)


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "write":
        write(a[2], a[3], a[4], int(a[5]) if len(a) > 5 else None)
    elif a[1] == "damage":
        damage(a[2], a[3])
    else:
        raise SystemExit(__doc__)
