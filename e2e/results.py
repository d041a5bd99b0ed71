"""What the device calls returned, read from result folders (stdlib only).

A folder holds ``*.log`` files, ``logs.tgz`` (the logs a call finished), ``snapshots.tgz``
(``<tag>/memory_snapshot_rank<R>_step<S>.pickle``, belonging to ``<tag>.log``) and ``meta.txt``;
the kept test data in tests/data/e2e/ names a snapshot after its log instead
(``<stem>-rank<R>-step<S>.pickle[.gz]``). A log's name says what ran: ``<model>-plain``,
``<model>-instr``, ``<model>-resume``, ``big-plain*`` / ``big-instr*``.
"""

import io
import pickle
import re
import tarfile
from pathlib import Path

class _DataOnly(pickle.Unpickler):
    """Memory snapshots are plain dicts/lists: refuse any global (no code runs on load)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused" % (module, name))


def describe_snapshot(blob):
    try:
        snap = _DataOnly(io.BytesIO(blob)).load()
    except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
        return "not loadable (%s)" % e
    if not isinstance(snap, dict):
        return "loaded, type %s" % type(snap).__name__
    segs = len(snap.get("segments", []))
    traces = sum(len(t) for t in snap.get("device_traces", []))
    return "%d segments, %d trace entries" % (segs, traces)


# <tag>/<any name>.pickle: the rank and step when the name has them (memprints names the file
# memory_snapshot_rank<R>_step<S>.pickle), else rank 0 (the only rank kept) and step 0.
MEMBER_RE = re.compile(r"(?:^|/)([^/]+)/[^/]*?(?:rank(\d+))?(?:_step(\d+))?\.pickle(?:\.gz)?$")
BESIDE_RE = re.compile(r"^(.+)-rank(\d+)(?:-step(\d+))?\.pickle(?:\.gz)?$")


class Snapshot:
    """One memory snapshot pickle that came back: which log it belongs to, rank, step, bytes."""

    def __init__(self, stem, rank, step, origin, data):
        self.stem, self.rank, self.step, self.origin = stem, rank, step, origin
        self.data = data  # the pickle's bytes (gzip'd when origin ends in .gz)


class Results:
    """Everything the DIRs hold: logs (loose or in logs.tgz), snapshots, meta.txt files."""

    def __init__(self, dirs):
        self.logs, self.origin, self.snapshots, self.metas, self.problems = {}, {}, [], [], []
        for d in dirs:
            for p in sorted(Path(d).glob("*")):
                if not p.is_file():
                    continue
                if p.name.endswith(".log"):
                    self._log(p.name, p.read_text(errors="replace"), str(p))
                elif p.name == "logs.tgz":
                    self._tar(p, logs=True)
                elif p.name == "snapshots.tgz":
                    self._tar(p, logs=False)
                elif p.name == "meta.txt":
                    self.metas.append((str(p), p.read_text(errors="replace")))
                else:
                    m = BESIDE_RE.match(p.name)
                    if m:
                        self.snapshots.append(Snapshot(m.group(1), int(m.group(2)),
                                                       int(m.group(3) or 0), str(p),
                                                       p.read_bytes()))

    def _log(self, name, text, origin):
        """Keep one log per name: of two copies (a run repeated by a later call), the one
        that started later, by its E2E_START time."""
        if name in self.logs:
            if started(text) <= started(self.logs[name]):
                self.problems.append("%s: %s kept, the earlier copy %s left out"
                                     % (name, self.origin[name], origin))
                return
            self.problems.append("%s: %s kept, the earlier copy %s left out"
                                 % (name, origin, self.origin[name]))
        self.logs[name], self.origin[name] = text, origin

    def _tar(self, path, logs):
        try:
            with tarfile.open(path, "r:gz") as tar:
                for m in tar.getmembers():
                    if not m.isfile():
                        continue
                    f = tar.extractfile(m)
                    data = f.read() if f else b""
                    origin = "%s:%s" % (path, m.name)
                    if logs and m.name.endswith(".log"):
                        self._log(Path(m.name).name, data.decode(errors="replace"), origin)
                    elif not logs:
                        hit = MEMBER_RE.search(m.name)
                        if hit:
                            self.snapshots.append(Snapshot(hit.group(1), int(hit.group(2) or 0),
                                                           int(hit.group(3) or 0), origin, data))
        except (OSError, tarfile.TarError) as e:
            self.problems.append("%s unreadable (%s)" % (path, e))

    def snapshot_of(self, stem, rank=0):
        """The lowest-step snapshot of `rank` that belongs to log `stem`, or None."""
        mine = [s for s in self.snapshots if s.stem == stem and s.rank == rank]
        return min(mine, key=lambda s: s.step) if mine else None


def started(text):
    """The E2E_START time of a log (ISO 8601, so it sorts as text), or "" without one."""
    m = re.search(r"^E2E_START (\S+)", text, re.M)
    return m.group(1) if m else ""


def log_kind(name):
    """plain, resume or fresh (instrumented, from step 0) by the log's name; None otherwise."""
    if "plain" in name:
        return "plain"
    if "resume" in name:
        return "resume"
    if "instr" in name:
        return "fresh"
    return None


def display_order(names):
    """Logs of one model together (plain, instr, resume), the overhead logs last."""
    rank = {"plain": 0, "fresh": 1, "resume": 2, None: 3}

    def key(n):
        kind = log_kind(n)
        word = {"plain": "plain", "fresh": "instr", "resume": "resume"}.get(kind, "")
        prefix = n.split(word)[0] if word else n
        return (n.startswith("big-"), prefix, rank[kind], n)

    return sorted(names, key=key)


def loss_pairs(names):
    """(plain, instr) log pairs of one model; every big-plain* with every big-instr*."""
    pairs = []
    for p in display_order(names):
        if log_kind(p) != "plain" or p.startswith("big-"):
            continue
        i = p.replace("plain", "instr", 1)
        if i in names:
            pairs.append((p, i))
    pairs += [(p, i) for p in sorted(names) if p.startswith("big-plain")
              for i in sorted(names) if i.startswith("big-instr")]
    return pairs
