"""Ask a memprints binary for the peaks of one run: the prints' and the snapshot's (stdlib only).

    prints' peak    ``memprints report LOG --format json``: ranks[].peak (allocated, label), at
                    the top level (schema 1) or in the log's run (schema 2: runs[0])
    snapshot peak   ``memprints report LOG --snapshots PICKLE --format json`` when this
                    binary's ``report --help`` names ``--snapshots`` and its JSON carries a
                    snapshot peak; otherwise ``memprints snapshot PICKLE --format json``
                    (snapshots[].peak_allocated_bytes)

Which of the two gave the snapshot figure is returned with it, so check.py can say so. Every
figure that memprints did not give is None ("not measured"), never 0.
"""

import json
import subprocess

TIMEOUT_S = 120


class MemprintsError(Exception):
    """memprints failed or printed something that is not its JSON; the message says which."""


def _run(binary, args):
    try:
        p = subprocess.run([binary] + args, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MemprintsError("%s %s: %s" % (binary, " ".join(args[:1]), e)) from e
    return p


def _json(binary, args):
    p = _run(binary, args)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
        raise MemprintsError("memprints %s failed: %s" % (" ".join(args[:1]), last))
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise MemprintsError("memprints %s printed no JSON (%s)" % (args[0], e)) from e


def report_takes_snapshots(binary):
    """Whether this binary's ``report`` has a ``--snapshots`` option (read from its --help)."""
    p = _run(binary, ["report", "--help"])
    return p.returncode == 0 and "--snapshots" in p.stdout


def snapshot_peak_in(obj, under_snapshot=False):
    """The first peak figure (an int under a key naming a peak) inside a snapshot part of a
    report's JSON, or None. The report schema with snapshots is new, so the search is by key
    names: any key holding "snapshot", then below it a key holding "peak" and "alloc"/"bytes"
    (or an object named peak with an "allocated" field)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            k = key.lower()
            here = under_snapshot or "snapshot" in k
            if here and "peak" in k:
                if isinstance(value, int) and not isinstance(value, bool) and (
                        "alloc" in k or "bytes" in k):
                    return value
                if isinstance(value, dict) and isinstance(value.get("allocated"), int):
                    return value["allocated"]
            found = snapshot_peak_in(value, here)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for value in obj:
            found = snapshot_peak_in(value, under_snapshot)
            if found is not None:
                return found
    return None


def _rank_entry(report, rank):
    for entry in report.get("ranks", []):
        if entry.get("rank") == rank:
            return entry
    return None


def peaks(binary, log, pickle=None, rank=0, with_snapshots_flag=None):
    """dict(prints_peak, prints_label, step1_peak, unparsed, snapshot_peak, snapshot_source)
    for `rank` of `log`; `pickle` is that run's snapshot of the rank (or None)."""
    if with_snapshots_flag is None:
        with_snapshots_flag = report_takes_snapshots(binary)
    args = ["report", str(log), "--format", "json"]
    if pickle and with_snapshots_flag:
        args[2:2] = ["--snapshots", str(pickle)]
    report = _json(binary, args)
    if isinstance(report.get("runs"), list) and report["runs"]:
        # Schema 2 holds one report per run; one log of one launch is one run.
        report = dict(report["runs"][0], stats=report.get("stats"))
    entry = _rank_entry(report, rank) or {}
    peak = entry.get("peak") or {}
    out = {
        "prints_peak": peak.get("allocated"),
        "prints_label": peak.get("label"),
        "step1_peak": (report.get("training") or {}).get("first_step_peak_gpu_memory"),
        "unparsed": (report.get("stats") or {}).get("unparsed_memory_lines"),
        "snapshot_peak": None,
        "snapshot_source": None,
    }
    if not pickle:
        return out
    if with_snapshots_flag:
        found = snapshot_peak_in(entry) if entry else None
        if found is None:
            found = snapshot_peak_in(report)
        if found is not None:
            out["snapshot_peak"], out["snapshot_source"] = found, "report --snapshots"
            return out
    snap = _json(binary, ["snapshot", str(pickle), "--format", "json"])
    items = snap.get("snapshots") or []
    if items and isinstance(items[0].get("peak_allocated_bytes"), int):
        out["snapshot_peak"] = items[0]["peak_allocated_bytes"]
        out["snapshot_source"] = "snapshot"
    return out
