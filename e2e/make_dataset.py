#!/usr/bin/env python3
"""Write a synthetic token dataset the way PithTrain's MemmapDataset reads it.

MemmapDataset opens every ``*.bin`` under the dataset folder with ``np.load(mmap_mode="r")``,
so each shard is a ``.npy`` array (here uint16 token ids, for vocabularies below 65536) saved
under a ``.bin`` name. Python standard library only: the ``.npy`` v1.0 header is written by
hand, so this runs anywhere (and is unit-tested without numpy).

Usage: make_dataset.py OUT_DIR --vocab 4096 --seq 512 --samples 256 [--seed 1234] [--shards 1]
The dataset holds ``samples`` full sequences: ``samples * seq + 1`` tokens per shard set.
"""

import argparse
import ast
import random
import struct
import sys
from array import array
from pathlib import Path

MAGIC = b"\x93NUMPY"


def npy_header(dtype_descr: str, length: int) -> bytes:
    """Return a .npy v1.0 header for a 1-D C-order array, padded to a multiple of 64 bytes."""
    body = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (dtype_descr, length)
    prefix_len = len(MAGIC) + 2 + 2  # magic, version (1, 0), uint16 header length
    total = prefix_len + len(body) + 1  # + trailing newline
    pad = (-total) % 64
    body = body + " " * pad + "\n"
    return MAGIC + bytes([1, 0]) + struct.pack("<H", len(body)) + body.encode("latin1")


def parse_npy_header(blob: bytes) -> tuple[dict, int]:
    """Parse a .npy v1.0 header; return (header dict, offset of the data)."""
    if blob[:6] != MAGIC or blob[6] != 1:
        raise ValueError("not a .npy v1 file")
    (hlen,) = struct.unpack("<H", blob[8:10])
    header = ast.literal_eval(blob[10 : 10 + hlen].decode("latin1"))
    return header, 10 + hlen


def synthetic_tokens(n: int, vocab: int, seed: int) -> array:
    """n token ids in [0, vocab): a fixed-seed mix of random spans and repeated spans.

    The repeats give the model something learnable so the loss moves; the exact values only
    need to be identical between runs, which the fixed seed guarantees.
    """
    if vocab > 65536:
        raise ValueError("uint16 tokens need vocab <= 65536")
    rng = random.Random(seed)
    out = array("H")
    while len(out) < n:
        span = [rng.randrange(vocab) for _ in range(rng.randrange(8, 64))]
        out.extend(span)
        for _ in range(rng.randrange(0, 3)):
            out.extend(span)
    del out[n:]
    return out


def write_shard(path: Path, tokens: array) -> None:
    data = tokens
    if sys.byteorder != "little":
        data = array("H", tokens)
        data.byteswap()
    with open(path, "wb") as f:
        f.write(npy_header("<u2", len(tokens)))
        f.write(data.tobytes())


def make_dataset(out_dir: Path, vocab: int, seq: int, samples: int, seed: int, shards: int = 1):
    """Write ``shards`` files whose sequence counts add up to at least ``samples``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*"):
        if old.suffix in (".bin", ".npy"):
            old.unlink()  # stale shards or PithTrain's cached offsets/indices
    per_shard = -(-samples // shards)
    paths = []
    for k in range(shards):
        tokens = synthetic_tokens(per_shard * seq + 1, vocab, seed * 1000 + k)
        path = out_dir / ("shard-%03d.bin" % k)
        write_shard(path, tokens)
        paths.append(path)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--samples", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shards", type=int, default=1)
    a = ap.parse_args(argv)
    paths = make_dataset(a.out_dir, a.vocab, a.seq, a.samples, a.seed, a.shards)
    print("make_dataset: %d shard(s), %d samples of %d tokens, vocab %d -> %s"
          % (len(paths), a.samples, a.seq, a.vocab, a.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
