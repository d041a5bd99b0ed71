#!/usr/bin/env python3
"""Rewrite the machine paths in a memory snapshot's frame filenames (stdlib only).

    rewrite_snapshot.py IN OUT FROM=TO [FROM=TO ...]

IN is a torch.cuda.memory._snapshot() pickle (gzip'd or not). Every ``"filename"`` string of
every frame that starts with FROM (a path: FROM itself or FROM/...) gets TO instead; the first
pair that matches wins, so give the longer paths first. Nothing else changes: sizes, addresses,
times and the structure stay as they were. OUT is written as a plain pickle with the highest
protocol (keep_results.sh gzips it with ``gzip -9 -n``). Snapshots hold only dicts, lists,
strings and numbers, so the loader refuses any other global: no code from the file runs.
Prints one line per pair: how many frames it rewrote.
"""

import gzip
import io
import pickle
import sys


class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused: not a plain snapshot" % (module, name))


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:2] == b"\x1f\x8b":
        blob = gzip.decompress(blob)
    return DataOnly(io.BytesIO(blob)).load()


def rewrite(obj, pairs, counts):
    """Rewrite the frame filenames inside obj in place; counts[i] += 1 per hit of pair i."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            name = o.get("filename")
            if isinstance(name, str):
                for i, (old, new) in enumerate(pairs):
                    if name == old or name.startswith(old + "/"):
                        o["filename"] = new + name[len(old):]
                        counts[i] += 1
                        break
            stack.extend(v for v in o.values() if isinstance(v, (dict, list)))
        elif isinstance(o, list):
            stack.extend(v for v in o if isinstance(v, (dict, list)))
    return obj


def parse_pairs(args):
    pairs = []
    for a in args:
        old, sep, new = a.partition("=")
        if not sep or not old.startswith("/") or old.rstrip("/").count("/") < 2:
            raise ValueError("%r: want FROM=TO with FROM an absolute path two levels deep or "
                             "more (a shorter one would rewrite system paths too)" % a)
        pairs.append((old.rstrip("/"), new))
    return pairs


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3:
        print("usage: rewrite_snapshot.py IN OUT FROM=TO [FROM=TO ...]", file=sys.stderr)
        return 2
    try:
        pairs = parse_pairs(args[2:])
        snap = load(args[0])
    except (ValueError, OSError, pickle.UnpicklingError, EOFError) as e:
        print("rewrite_snapshot: %s" % e, file=sys.stderr)
        return 2
    counts = [0] * len(pairs)
    rewrite(snap, pairs, counts)
    with open(args[1], "wb") as f:
        pickle.dump(snap, f, protocol=pickle.HIGHEST_PROTOCOL)
    for (old, new), n in zip(pairs, counts):
        print("   %s -> %s: %d frames" % (old, new, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
