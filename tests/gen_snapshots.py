#!/usr/bin/env python3
"""Writes synthetic torch.cuda.memory._snapshot() pickles for memprints' tests and benchmark.

Python 3 standard library only. The structure follows PyTorch's
torch/csrc/cuda/memory_snapshot.cpp: frame dicts are shared objects and each distinct traceback
is one shared list, so pickle memoizes them exactly as it does for a real snapshot.

    python3 tests/gen_snapshots.py tests/data/snapshot        # the committed test files
    python3 tests/gen_snapshots.py --bench 1048576 OUT.pickle  # the benchmark file
    python3 tests/gen_snapshots.py --stream 10000000 OUT.pickle  # the same, written as it goes
"""

import collections
import pickle
import random
import struct
import sys
from pathlib import Path

MiB = 1 << 20
# Wider than 8 bytes in LONG1 (2**63 needs a ninth byte for the sign).
HIGH_ADDRESS = (1 << 63) + 0x2000_0000


def frame(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


CPP = frame("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1234, "c10::cuda::CUDACachingAllocator::malloc")
TORCH = frame("/venv/lib/python3.11/site-packages/torch/nn/functional.py", 2401, "linear")
LAYER = frame("/work/PithTrain/pithtrain/dualpipe/execution.py", 604, "layer_forward")
MOE = frame("/work/PithTrain/pithtrain/models/moe.py", 210, "expert_forward")
TRAIN = frame("/work/PithTrain/train.py", 88, "main")
USER = frame("/work/scripts/run.py", 12, "step")

S1 = [CPP, TORCH, LAYER, TRAIN]
S2 = [CPP, TORCH, MOE, LAYER, TRAIN]
S3 = [CPP, TORCH, USER]
EMPTY = []

ALLOCATOR_SETTINGS = {
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False",
    "max_split_size": -1,
    "garbage_collection_threshold": 0.0,
    "expandable_segments": False,
    "pinned_num_register_threads": 1,
    "release_lock_on_cudamalloc": False,
    "pinned_use_cuda_host_register": False,
    "roundup_power2_divisions": {"1": 0, "2": 0},
}


def event(action, addr, size, t, frames, **extra):
    key = "device_free" if action == "oom" else "addr"
    entry = {"action": action, key: addr, "size": size, "stream": 0, "time_us": t}
    entry.update(extra)
    entry["frames"] = frames
    return entry


def block(address, size, state, frames):
    return {"address": address, "size": size, "requested_size": size, "state": state, "frames": frames}


def segment(address, total, blocks, device=0):
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {
        "device": device,
        "address": address,
        "total_size": total,
        "allocated_size": allocated,
        "active_size": active,
        "requested_size": allocated,
        "stream": 0,
        "segment_type": "large",
        "segment_pool_id": (0, 0),
        "is_expandable": False,
        "frames": EMPTY,
        "blocks": blocks,
    }


def basic(scale=1, moe_size=8):
    """Peak 37 MiB (x scale) after event 6; an OOM at the end. See tests/snapshot_cli.rs."""
    m = MiB * scale
    base = 0x7F00_0000_0000
    # One 64 MiB segment laid out front to back: (name, size in MiB, state at the end, stack).
    layout = [
        ("a1", 16, "active_allocated", S1),
        ("a2", moe_size, "inactive", EMPTY),
        ("a3", moe_size, "active_allocated", S2),
        ("a4", 2, "inactive", EMPTY),
        ("a5", 1, "active_allocated", S1),
        ("x0", 4, "inactive", EMPTY),
        # Live before the trace and never touched in it.
        ("b0", 3, "active_allocated", S3),
    ]
    addr, blocks, at = base, [], {}
    for name, size, state, frames in layout:
        at[name] = addr
        blocks.append(block(addr, size * m, state, frames))
        addr += size * m
    used = addr - base
    blocks.append(block(addr, 64 * m - used, "inactive", EMPTY))
    a1, a2, a3, a4, a5, x0 = (at[k] for k in ("a1", "a2", "a3", "a4", "a5", "x0"))
    t = 1_700_000_000_000_000
    trace = [
        event("segment_alloc", base, 64 * m, t, S1),
        # Freed without an alloc in the trace: live from the start.
        event("free_requested", x0, 4 * m, t + 1, EMPTY),
        event("free_completed", x0, 4 * m, t + 2, EMPTY),
        event("alloc", a1, 16 * m, t + 3, S1, compile_context="N/A"),
        event("alloc", a2, moe_size * m, t + 4, S2),
        event("alloc", a3, moe_size * m, t + 5, S2, user_metadata=1 << 80),
        event("alloc", a4, 2 * m, t + 6, S3),
        event("free_requested", a4, 2 * m, t + 7, S3),
        event("free_completed", a4, 2 * m, t + 8, S3),
        event("alloc", a5, 1 * m, t + 9, S1),
        event("free_requested", a2, moe_size * m, t + 10, S2),
        event("segment_alloc", HIGH_ADDRESS, 20 * m, t + 11, S3),
        event("alloc", HIGH_ADDRESS, 4 * m, t + 12, S3),
        event("oom", 1 * m, 100 * 1024 * m, t + 13, S1),
    ]
    high = [block(HIGH_ADDRESS, 4 * m, "active_allocated", S3),
            block(HIGH_ADDRESS + 4 * m, 16 * m, "inactive", EMPTY)]
    return {
        "segments": [segment(base, 64 * m, blocks), segment(HIGH_ADDRESS, 20 * m, high)],
        "device_traces": [trace, []],
        "allocator_settings": ALLOCATOR_SETTINGS,
    }


def legacy():
    """An old snapshot: no device_traces, no block addresses, stacks in block history."""
    blocks = [
        {"size": 2 * MiB, "requested_size": 2 * MiB, "state": "active_allocated",
         "history": [{"addr": 0x1000, "real_size": 2 * MiB, "frames": S2}]},
        {"size": 6 * MiB, "requested_size": 6 * MiB, "state": "inactive", "history": []},
    ]
    seg = segment(0x1000, 8 * MiB, blocks)
    del seg["frames"]
    return {"segments": [seg]}


def write(path, obj, protocol):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj, protocol=protocol))


def test_files(out):
    for protocol in (2, 4, 5):
        write(out / f"basic_p{protocol}.pickle", basic(), protocol)
    write(out / "legacy_p2.pickle", legacy(), 2)
    for rank in (0, 1, 2):
        write(out / "ranks" / f"memory_snapshot_rank{rank}_step0.pickle", basic(scale=rank + 1), 4)
    write(out / "diff_a.pickle", basic(), 4)
    write(out / "diff_b.pickle", basic(moe_size=12), 4)

    hostile = out / "hostile"
    hostile.mkdir(parents=True, exist_ok=True)
    (hostile / "global.pickle").write_bytes(pickle.dumps(collections.OrderedDict(a=1), 2))
    (hostile / "stack_global.pickle").write_bytes(pickle.dumps(collections.OrderedDict(a=1), 4))
    (hostile / "reduce.pickle").write_bytes(b"\x80\x02))R.")
    whole = pickle.dumps(basic(), 4)
    (hostile / "truncated.pickle").write_bytes(whole[: len(whole) // 2])
    (hostile / "deep.pickle").write_bytes(b"\x80\x04" + b"]" * 100_000 + b"a" * 99_999 + b".")
    (hostile / "huge_len.pickle").write_bytes(b"\x80\x04\x8d" + (1 << 62).to_bytes(8, "little") + b"abc")
    (hostile / "memo.pickle").write_bytes(b"\x80\x02]h\x09a.")
    (hostile / "not_snapshot.pickle").write_bytes(pickle.dumps({"a": 1}, 4))
    shared_references(hostile)
    blowup(hostile)


def blowup(hostile):
    """200 KB gzipped that grows to gigabytes: each part stays under the reader's own limits.

    A memo of 67 million slots (one MEMOIZE byte each, 16 bytes a slot), a stack of 4 million
    values, then a trace of 6 million minimal entries (11 bytes of pickle, a 32-byte record
    each) in a snapshot-shaped dict.
    """
    import gzip
    with gzip.GzipFile(hostile / "blowup.pickle.gz", "wb", mtime=0) as f:
        f.write(b"\x80\x04")
        for key in [b"action", b"alloc", b"size"]:
            f.write(b"\x8c" + bytes([len(key)]) + key + b"\x940")
        chunk = 1 << 20
        f.write(b"N")
        for _ in range(63):
            f.write(b"\x94" * chunk)
        f.write(b"0(")
        for _ in range(4):
            f.write(b"N" * (chunk - 16))
        f.write(b"1}(\x8c\x08segments]\x8c\x0ddevice_traces]]")
        batch = b"(" + b"}(h\x00h\x01h\x02K\x00u" * 1000 + b"e"
        for _ in range(6_000):
            f.write(batch)
        f.write(b"au.")


def shared_references(hostile):
    """Small files whose memo references would expand to millions of records or values."""
    import gzip
    import pickletools
    entry = event("alloc", 0x7F00_0000_0000, MiB, 1_700_000_000_000_000, S1)
    head = pickle.dumps({"segments": [], "device_traces": [[entry]]}, 2)
    ops = list(pickletools.genops(head))
    # The entry is the second dict; its memo index follows it. The first APPEND after it puts
    # the entry into the trace list: 30M more references to it go right there.
    dicts = [k for k, (op, _, _) in enumerate(ops) if op.name == "EMPTY_DICT"]
    memo = ops[dicts[1] + 1][1]
    append = next(pos for op, _, pos in ops[dicts[1]:] if op.name == "APPEND")
    refs = b"(" + bytes([ord("h"), memo]) * 1000 + b"e"
    with gzip.GzipFile(hostile / "shared_entry.pickle.gz", "wb", mtime=0) as f:
        f.write(head[: append + 1])
        for _ in range(30_000):
            f.write(refs)
        f.write(head[append + 1:])
    seg = segment(0x1000, MiB, [block(0x1000, MiB, "active_allocated", S1)])
    (hostile / "shared_segment.pickle").write_bytes(
        pickle.dumps({"segments": [seg, seg], "device_traces": []}, 4))
    trace = [entry]
    (hostile / "shared_trace.pickle").write_bytes(
        pickle.dumps({"segments": [], "device_traces": [trace, trace]}, 4))


def bench(n, path):
    """A snapshot with n trace entries: alloc/free pairs over ~2,000 distinct ~10-frame stacks."""
    rng = random.Random(0)
    files = [f"/work/PithTrain/pithtrain/{d}/{f}.py" for d in ("dualpipe", "models", "ops", "data")
             for f in ("execution", "moe", "attention", "comm", "layers", "utils")]
    files += [f"/venv/lib/python3.11/site-packages/torch/{f}.py" for f in ("nn/functional", "autograd/function", "distributed/distributed_c10d", "_tensor")]
    pool = [frame(rng.choice(files), rng.randrange(1, 2000), f"fn_{i}") for i in range(400)]
    stacks = [[pool[rng.randrange(len(pool))] for _ in range(rng.randrange(8, 13))] for _ in range(2000)]
    t = 1_700_000_000_000_000
    live = []
    trace = []
    addr = 0x7F00_0000_0000
    while len(trace) < n:
        t += rng.randrange(1, 50)
        if live and (len(live) > 5000 or rng.random() < 0.5):
            a, size, frames = live.pop(rng.randrange(len(live)))
            trace.append(event("free_requested", a, size, t, frames))
        else:
            size = rng.choice((512, 4096, 1 << 20, 8 << 20, 64 << 20))
            frames = rng.choice(stacks)
            addr += size
            live.append((addr, size, frames))
            trace.append(event("alloc", addr, size, t, frames))
    blocks = [block(a, s, "active_allocated", f) for a, s, f in live]
    total = sum(s for _, s, _ in live)
    snapshot = {
        "segments": [segment(0x7F00_0000_0000, total, blocks)],
        "device_traces": [trace],
        "allocator_settings": ALLOCATOR_SETTINGS,
    }
    with open(path, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)


class Stream:
    """Writes a protocol-4 pickle opcode by opcode, memoizing dicts, strings and stacks as
    pickle.dump does (without FRAME hints), so a trace of any length never has to be in
    memory."""

    def __init__(self, f):
        self.f, self.memo, self.next = f, {}, 0

    def put(self):
        self.f.write(b"\x94")
        self.next += 1
        return self.next - 1

    def ref(self, key):
        if key in self.memo:
            index = self.memo[key]
            self.f.write(bytes([ord("h"), index]) if index < 256 else b"j" + struct.pack("<I", index))
            return True
        return False

    def str(self, text):
        if not self.ref(("s", text)):
            data = text.encode()
            self.f.write(b"\x8c" + bytes([len(data)]) + data if len(data) < 256
                         else b"X" + struct.pack("<I", len(data)) + data)
            self.memo[("s", text)] = self.put()

    def int(self, v):
        if 0 <= v < 256:
            self.f.write(b"K" + bytes([v]))
        elif 0 <= v < 1 << 16:
            self.f.write(b"M" + struct.pack("<H", v))
        elif 0 <= v < 1 << 31:
            self.f.write(b"J" + struct.pack("<i", v))
        else:
            data = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            self.f.write(b"\x8a" + bytes([len(data)]) + data)

    def frames(self, frames):
        if self.ref(("l", id(frames))):
            return
        self.f.write(b"]")
        self.memo[("l", id(frames))] = self.put()
        if frames:
            self.f.write(b"(")
            for fr in frames:
                if not self.ref(("f", id(fr))):
                    self.f.write(b"}")
                    self.memo[("f", id(fr))] = self.put()
                    self.f.write(b"(")
                    for k in ("filename", "line", "name"):
                        self.str(k)
                        self.int(fr[k]) if k == "line" else self.str(fr[k])
                    self.f.write(b"u")
            self.f.write(b"e")

    def entry(self, e):
        self.f.write(b"}")
        self.put()
        self.f.write(b"(")
        for k, v in e.items():
            self.str(k)
            if k == "frames":
                self.frames(v)
            elif isinstance(v, str):
                self.str(v)
            else:
                self.int(v)
        self.f.write(b"u")


def bench_stream(n, path):
    """bench(n, path)'s snapshot, streamed: device_traces first, then the segment that holds
    what is still live (the reader does not mind the key order)."""
    rng = random.Random(0)
    files = [f"/work/PithTrain/pithtrain/{d}/{f}.py" for d in ("dualpipe", "models", "ops", "data")
             for f in ("execution", "moe", "attention", "comm", "layers", "utils")]
    files += [f"/venv/lib/python3.11/site-packages/torch/{f}.py" for f in ("nn/functional", "autograd/function", "distributed/distributed_c10d", "_tensor")]
    pool = [frame(rng.choice(files), rng.randrange(1, 2000), f"fn_{i}") for i in range(400)]
    stacks = [[pool[rng.randrange(len(pool))] for _ in range(rng.randrange(8, 13))] for _ in range(2000)]
    t = 1_700_000_000_000_000
    live, addr, written = [], 0x7F00_0000_0000, 0
    with open(path, "wb") as f:
        w = Stream(f)
        f.write(b"\x80\x04}")
        w.put()
        f.write(b"(")
        w.str("device_traces")
        f.write(b"]")
        w.put()
        f.write(b"]")
        w.put()
        while written < n:
            f.write(b"(")
            for _ in range(min(1000, n - written)):
                t += rng.randrange(1, 50)
                if live and (len(live) > 5000 or rng.random() < 0.5):
                    a, size, frames = live.pop(rng.randrange(len(live)))
                    w.entry(event("free_requested", a, size, t, frames))
                else:
                    size = rng.choice((512, 4096, 1 << 20, 8 << 20, 64 << 20))
                    frames = rng.choice(stacks)
                    addr += size
                    live.append((addr, size, frames))
                    w.entry(event("alloc", addr, size, t, frames))
                written += 1
            f.write(b"e")
        f.write(b"a")  # the trace into device_traces
        w.str("segments")
        f.write(b"]")
        w.put()
        f.write(b"}")
        w.put()
        f.write(b"(")
        blocks = [block(a, s, "active_allocated", fr) for a, s, fr in live]
        seg = segment(0x7F00_0000_0000, sum(s for _, s, _ in live), blocks)
        for k, v in seg.items():
            if k in ("blocks", "frames", "segment_pool_id"):
                continue
            w.str(k)
            if isinstance(v, bool):
                f.write(b"\x88" if v else b"\x89")
            elif isinstance(v, str):
                w.str(v)
            else:
                w.int(v)
        w.str("blocks")
        f.write(b"]")
        w.put()
        for i in range(0, len(blocks), 1000):
            f.write(b"(")
            for b in blocks[i:i + 1000]:
                w.entry(b)
            f.write(b"e")
        f.write(b"u")  # the segment's items
        f.write(b"a")  # the segment into segments
        f.write(b"u.")


def main(argv):
    if len(argv) == 4 and argv[1] == "--bench":
        bench(int(argv[2]), argv[3])
    elif len(argv) == 4 and argv[1] == "--stream":
        bench_stream(int(argv[2]), argv[3])
    elif len(argv) == 2:
        test_files(Path(argv[1]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
