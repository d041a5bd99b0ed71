#!/usr/bin/env python3
"""Check the files e2e device calls returned ($OUT) and print a markdown summary.

Python standard library only; runs HERE, never on the GPU machine.

    python3 e2e/check.py DIR [DIR ...] [--md FILE] [--memprints PATH] [--require TAGS]
                         [--ranks 0] [--detail-layers 0,1] [--profiled-chunks both|phase1]
                         [--resume-profiled yes|no|any]

What is read from the DIRs (a log name seen twice: the copy with the later E2E_START, i.e.
the run a later call repeated): every ``*.log``, the logs
inside every ``logs.tgz``, the pickles inside every ``snapshots.tgz`` (``<tag>/memory_snapshot_
rank<R>_step<S>.pickle``, belonging to ``<tag>.log``) or beside a log as
``<stem>-rank<R>-step<S>.pickle[.gz]`` (the tests/data/e2e/ naming), and every ``meta.txt``.
Log names say what ran: ``<model>-plain.log`` / ``<model>-instr.log`` (a pair: same model,
uninstrumented and instrumented), ``<model>-resume.log`` (the instrumented tree resumed from
the checkpoint its ``instr`` run saved), ``big-plain*.log`` / ``big-instr*.log`` (overhead).
The older names ``plain.log``, ``instr.log``, ``resume.log`` and ``dsv2-*.log`` are the same
scheme with an empty or ``dsv2-`` model prefix.

Checks: every run finished (its last step line reads N/N); the step-0 per-micro-batch loss sums
are bit-identical (float.hex strings) within each plain/instr pair; each memory-print group's
count per log and per rank, with the reason where a group cannot fire; every detail layer
prints its ``layerN after stageK`` probes and ``layerN stageK saved tensors`` summaries on the
rank that hosts it, with weight bytes > 0 where the stage saves weights (stage 1: the attention
projections, stage 3: the experts); with ``--memprints``, ``memprints report`` on each
instrumented log and its snapshot, the prints' peak beside the snapshot's; step-time median
and spread after the profiled step, and the instrumented/plain overhead ratio.
Exit status 0 when nothing FAILed, 1 otherwise, 2 when no log was found.
"""

import argparse
import gzip
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import layer_prints
import memprints_report
import tree_prints
from results import Results, describe_snapshot, display_order, log_kind, loss_pairs

# ----------------------------------------------------------------------------- log parsing

STEP_RE = re.compile(r"step (\d{8})/(\d{8}) \| step-time ([0-9.]+) sec")
LOSS_RE = re.compile(
    r"E2E_LOSS_SUMS step(\d+)((?: +(?:-?0x[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?p[+-]?\d+|-?inf|nan))+)"
)
HEX_RE = re.compile(r"-?0x[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?p[+-]?\d+|-?inf|nan")
CONFIG_RE = re.compile(r"E2E_CONFIG (\{[^\n]*\})")
END_RE = re.compile(r"E2E_END tag=(\S+) rc=(-?\d+)")
DONE_RE = re.compile(r"E2E_DONE rank=(\d+) step=(\d+)")
RANK = r"\[rank=(\d+)"

# Print groups of the add-memory-prints skill: group -> [(what, regex with the rank as group 1)].
# The first entry of a group is its headline count; a group "fires" when any entry is > 0.
GROUPS = {
    2: [("init_process_group |", RANK + r"\][^\n\[]*?init_process_group \|"),
        ("init_device_mesh |", RANK + r"\][^\n\[]*?init_device_mesh \|")],
    3: [("setup_model |", RANK + r"\][^\n\[]*?setup_model \|")],
    4: [("[rank=R pp=P] lines", RANK + r" pp=\d+\]")],
    5: [("alloc= probes", RANK + r"\]\s{2,}[^\n\[|]*?: alloc=-?\d+\.\d+"),
        ("saved tensors:", RANK + r"\][^\n\[]*?saved tensors:"),
        ("experts:", RANK + r"\]\s+experts: ")],
    6: [("load_ckpt |", RANK + r"\][^\n\[]*?load_ckpt \|")],
    7: [("Memory snapshot saved to", RANK + r"\][^\n\[]*?Memory snapshot saved to")],
}
GROUP_NAMES = {
    2: "distributed setup", 3: "model setup", 4: "pipeline", 5: "per-layer",
    6: "checkpoint load", 7: "memory snapshot",
}
# Marker strings counted without a rank, as a cross-check of the regexes above.
BARE = {2: ("init_process_group |", "init_device_mesh |"), 3: ("setup_model |",),
        6: ("load_ckpt |",), 7: ("Memory snapshot saved to",)}


def step_lines(text):
    """{step number (1-based, as logged): (max_steps, seconds)}; a repeated step keeps the last."""
    out = {}
    for m in STEP_RE.finditer(text):
        out[int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    return out


def finished(text):
    """(ok, last step, max steps): ok when a step line reads max/max."""
    steps = step_lines(text)
    if not steps:
        return False, None, None
    last = max(steps)
    total = steps[last][0]
    return last == total, last, total


def loss_sums(text):
    """{step index: [hex strings]} from the E2E_LOSS_SUMS lines; a repeated step keeps the first."""
    out = {}
    for m in LOSS_RE.finditer(text):
        out.setdefault(int(m.group(1)), HEX_RE.findall(m.group(2)))
    return out


def run_config(text):
    m = CONFIG_RE.search(text)
    if not m:
        return {}
    try:
        return json.loads(m.group(1))
    except ValueError:
        return {}


def end_rc(text):
    m = END_RE.search(text)
    return int(m.group(2)) if m else None


def done_ranks(text):
    return sorted({int(m.group(1)) for m in DONE_RE.finditer(text)})


ERROR_RE = re.compile(r"^.*\b\w*(?:Error|Exception)\b[:(].*$", re.M)


def first_error(text):
    """The first line that names a Python error (for runs that did not finish), or None."""
    m = ERROR_RE.search(text)
    return m.group(0).strip()[:240] if m else None


def compare_hex(a, b):
    """(bit-identical, number of differing positions, max relative difference)."""
    if len(a) != len(b):
        return False, max(len(a), len(b)), float("inf")
    ndiff, worst = 0, 0.0
    for x, y in zip(a, b):
        if x == y:
            continue
        ndiff += 1
        fx, fy = float.fromhex(x), float.fromhex(y)
        rel = abs(fx - fy) / max(abs(fx), abs(fy), 1e-300)
        worst = max(worst, rel)
    return ndiff == 0, ndiff, worst


def count_groups(text):
    """{group: {"total": n, "parts": {what: n}, "ranks": {rank: n}}}."""
    out = {}
    for g, parts in GROUPS.items():
        info = {"total": 0, "parts": {}, "ranks": {}}
        for what, rx in parts:
            n = 0
            for m in re.finditer(rx, text):
                n += 1
                r = int(m.group(1))
                info["ranks"][r] = info["ranks"].get(r, 0) + 1
            info["parts"][what] = n
        info["total"] = sum(info["parts"].values())
        for marker in BARE.get(g, ()):
            info.setdefault("bare", {})[marker] = text.count(marker)
        out[g] = info
    return out


# ------------------------------------------------------------ which layers a rank profiles

def partition(num_layers, stages, index):
    """Layer ids of pipeline stage `index`: an even split; spare layers go to the inner stages
    first (the edge stages also hold the embedding and the head), then to the first stage."""
    sizes = [num_layers // stages] * stages
    order = list(range(1, stages - 1)) + sorted({0, stages - 1})
    for k in range(num_layers % stages):  # fewer spares than stages: at most one per stage
        sizes[order[k]] += 1
    begin = sum(sizes[:index])
    return list(range(begin, begin + sizes[index]))


def profiled_layers(num_layers, pp, pp_rank, chunks="both"):
    """Layers that pp rank `pp_rank` runs while the per-layer flag is on.

    Chunk 0 is stage r, chunk 1 is stage 2 * pp - 1 - r. The skill's schedule turns the flag
    on for forward chunk 0 at step-1 iteration i == 1 (there are (pp - r - 1) * 2 such
    iterations, so only ranks r < pp - 1 get there) and for forward chunk 1 at step-2
    iteration 0 (every rank): chunks="phase1" is that schedule, as the memprints of
    2026-12-01 wrote it. memprints also profiles the phase-0 chunk of the last pp rank now,
    so every rank profiles both of its chunks: chunks="both".
    """
    stages = 2 * pp
    layers = set(partition(num_layers, stages, stages - 1 - pp_rank))
    if chunks == "both" or (pp - pp_rank - 1) * 2 >= 2:
        layers |= set(partition(num_layers, stages, pp_rank))
    return layers


def hosting_pp_rank(layer, num_layers, pp):
    """The pp rank whose chunk 0 or chunk 1 holds `layer` (None when the layer does not exist)."""
    stages = 2 * pp
    for s in range(stages):
        if layer in partition(num_layers, stages, s):
            return s if s < pp else stages - 1 - s
    return None


def layer_printers(cfg, layer, ranks, chunks="both"):
    """(global ranks that must print `layer`'s detail, reason when there is none).

    Global rank r sits on pp rank r // (world / pp) (ep = cp = 1 in every e2e preset)."""
    pp = int(cfg.get("pp", 1) or 1)
    world = int(cfg.get("world", pp) or pp)
    nl = int(cfg.get("num_layers", 0) or 0)
    host = hosting_pp_rank(layer, nl, pp)
    if host is None:
        return [], "the model has no layer %d (%d layers)" % (layer, nl)
    per_pp = max(1, world // pp)
    mine = [r for r in ranks if r < world and r // per_pp == host]
    if not mine:
        return [], ("pp rank %d hosts layer %d, and none of its global ranks is among the "
                    "printing ranks %s" % (host, layer, sorted(ranks)))
    if layer not in profiled_layers(nl, pp, host, chunks):
        return [], ("layer %d is in chunk 0 of pp rank %d, which the per-layer flag does not "
                    "reach with --profiled-chunks %s" % (layer, host, chunks))
    return mine, None


def auto_detail_layers(first_k_dense, num_layers):
    """The skill's default: the first MoE layer and the next one."""
    return tuple(i for i in (first_k_dense, first_k_dense + 1) if i < num_layers)


def rank_prolog_epilog(pp, pp_rank):
    """(prolog, epilog) printed by this rank: stage 0 and the last stage both sit on pp rank 0."""
    return (pp_rank == 0 and pp >= 2, pp_rank == 0)


# --------------------------------------------------------------------------- expectations

def expectations(kind, resume_profiled="yes"):
    """{group: "yes" | "no" | "any"} for a log kind: plain, fresh (instrumented), resume."""
    if kind == "plain":
        return {g: "no" for g in GROUPS}
    if kind == "fresh":
        return {2: "yes", 3: "yes", 4: "yes", 5: "yes", 6: "no", 7: "yes"}
    if kind == "resume":
        return {2: "yes", 3: "yes", 4: resume_profiled, 5: resume_profiled, 6: "yes",
                7: resume_profiled}
    raise ValueError(kind)


def reason_not_firing(group, kind):
    """Why a group prints nothing in a log of this kind (None when it should print)."""
    if kind == "plain":
        return "uninstrumented tree"
    if group == 6 and kind == "fresh":
        return ("no checkpoint exists when this run starts: load_checkpoint returns before "
                "dcp.load, and the group-6 print sits after dcp.load")
    if group == 7 and kind == "resume":
        return ("the skill takes the snapshot only when training.step == 0, and after a resume "
                "step 0 never runs in that process (it starts at the checkpoint's step)")
    if group in (4, 5) and kind == "resume":
        return ("DualPipeV.memory_profiling was off on the first step after the resume (the "
                "skill sets it True in __init__ and clears it only after step 0, so a literal "
                "port prints groups 4/5 on every step after a resume)")
    return None


def rank_reasons(group, cfg, ranks, detail, chunks="both"):
    """{rank: reason} for ranks on which `group` cannot fire in a fresh instrumented run."""
    out = {}
    if group != 5 or not cfg:
        return out
    pp = int(cfg.get("pp", 1))
    per_pp = max(1, int(cfg.get("world", pp)) // pp)
    nl = int(cfg.get("num_layers", 0))
    for r in ranks:
        pr = r // per_pp
        if pr >= pp:
            continue
        mine = profiled_layers(nl, pp, pr, chunks) if nl else set()
        hit = sorted(mine & set(detail))
        pro, epi = rank_prolog_epilog(pp, pr)
        if not hit and not pro and not epi:
            out[r] = ("detail layers %s are not among the layers rank %d runs while the "
                      "per-layer flag is on (%s), and the prolog/epilog live on pp rank 0"
                      % (list(detail), r, sorted(mine)))
    return out


# ------------------------------------------------------------------------------ step times

def steady_times(text, after=1):
    """Step times of the steps logged after step `after` (1-based; step 1 is the profiled one)."""
    return [t for s, (_, t) in sorted(step_lines(text).items()) if s > after]


def stats(values):
    if not values:
        return None
    v = sorted(values)
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"n": len(v), "median": statistics.median(v), "q1": q1, "q3": q3,
            "min": v[0], "max": v[-1]}


def overhead_ratio(plain, instr):
    if not plain or not instr:
        return None
    return statistics.median(instr) / statistics.median(plain)


# ---------------------------------------------------------------------------------- report

class Report:
    def __init__(self):
        self.lines = []
        self.fails = []

    def add(self, line=""):
        self.lines.append(line)

    def fail(self, what):
        self.fails.append(what)
        return "**FAIL**"

    def text(self):
        verdict = "PASS" if not self.fails else "FAIL (%s)" % "; ".join(self.fails)
        return "\n".join(["# memprints e2e check", "", "Verdict: **%s**" % verdict, ""]
                         + self.lines) + "\n"


def fmt_stats(s):
    if not s:
        return "n=0 | - | - | -"
    return "%d | %.3f | %.3f-%.3f | %.3f-%.3f" % (s["n"], s["median"], s["q1"], s["q3"],
                                                   s["min"], s["max"])


def mib(n):
    return "not measured" if n is None else "%.2f MiB" % (n / 2**20)


def check_calls(rep, res, required):
    """What the device calls said about themselves (meta.txt), and the logs that must exist."""
    notes = []
    for path, text in res.metas:
        for line in text.splitlines():
            if re.search(r"SKIP|PENDING|FAILED|MISSING|over 16 MB|dropped|TIMEOUT", line):
                notes.append("- `%s`: %s" % (path, line.strip()))
    notes += ["- %s" % p for p in res.problems]
    for tag in required:
        if tag + ".log" not in res.logs:
            notes.append("- %s.log: %s" % (tag, rep.fail("%s.log did not come back" % tag)))
    if notes:
        rep.add("## Device calls")
        rep.add("")
        rep.lines.extend(notes)
        rep.add("")


def check_runs(rep, logs):
    rep.add("## Runs")
    rep.add("")
    rep.add("| log | finished | last step | torchrun rc | E2E_DONE ranks | loss dtype line |")
    rep.add("|---|---|---|---|---|---|")
    for name in display_order(logs):
        text = logs[name]
        ok, last, total = finished(text)
        rc = end_rc(text)
        dt = re.search(r"E2E_LOSS_DTYPE step\d+ (\S+) n=(\d+)", text)
        status = "yes" if ok and rc in (0, None) else rep.fail("%s did not finish" % name)
        rep.add("| %s | %s | %s/%s | %s | %s | %s |" % (
            name, status, last, total, rc, done_ranks(text) or "-",
            "%s n=%s" % dt.groups() if dt else "-"))
        err = first_error(text)
        if not ok and err:
            rep.add("| %s | first error: `%s` | | | | |" % (name, err.replace("|", "/")))
        if "E2E_DEEP_GEMM_TOUCHED" in text:
            rep.fail("%s used deep_gemm (FP8 path)" % name)
            rep.add("| %s | deep_gemm stand-in was touched: FP8 path taken | | | | |" % name)
    rep.add("")


def check_losses(rep, logs, pairs):
    rep.add("## Step-0 per-micro-batch loss sums (float.hex)")
    rep.add("")
    rep.add("| plain | instrumented | n | bit-identical | first value |")
    rep.add("|---|---|---|---|---|")
    for a, b in pairs:
        if a not in logs or b not in logs:
            continue
        la, lb = loss_sums(logs[a]).get(0), loss_sums(logs[b]).get(0)
        want = run_config(logs[a]).get("num_chunks")
        if not la or not lb:
            rep.add("| %s | %s | - | %s | - |" % (a, b, rep.fail("no step-0 loss sums in %s/%s" % (a, b))))
            continue
        same, ndiff, worst = compare_hex(la, lb)
        if same and want is not None and len(la) != want:
            status = rep.fail("%s: %d loss sums, expected num_chunks=%s" % (a, len(la), want))
        elif same:
            status = "yes"
        else:
            status = rep.fail("step-0 losses differ %s vs %s" % (a, b))
            status += " (%d differ, max rel %.3g)" % (ndiff, worst)
        rep.add("| %s | %s | %d | %s | `%s` |" % (a, b, len(la), status, la[0]))
    rep.add("")


def check_resume_loss(rep, logs):
    for r in display_order(logs):
        if log_kind(r) != "resume":
            continue
        i = r.replace("resume", "instr", 1)
        if i not in logs:
            continue
        cont, res = loss_sums(logs[i]), loss_sums(logs[r])
        common = sorted(set(cont) & set(res))
        if not common:
            rep.add("Resume: no common step with loss sums between %s and %s." % (i, r))
            rep.add("")
            continue
        s = common[0]
        same, ndiff, worst = compare_hex(cont[s], res[s])
        rep.add("Resume (%s) vs continuous run (%s) at step %d (informational; training is not "
                "bitwise deterministic past step 0's forward): %s, max relative difference %.3g."
                % (r, i, s, "bit-identical" if same else "%d of %d differ" % (ndiff, len(cont[s])),
                   worst))
        rep.add("")


class PrintSetup:
    """What an instrumented log's tree was set up to print: from its E2E_PRINTS line, else
    from the command line, else the skill's automatic choice (and where each part came from)."""

    def __init__(self, text, args):
        cfg = run_config(text)
        rec = tree_prints.from_log(text) or {}
        nl = int(cfg.get("num_layers", 0) or 0)
        if args.detail_layers:
            self.detail, src = args.detail_layers, "--detail-layers"
        elif rec.get("detail_layers") is not None:
            self.detail, src = tuple(rec["detail_layers"]), "tree"
        else:
            self.detail = auto_detail_layers(int(cfg.get("first_k_dense_replace", 0) or 0), nl)
            src = "auto rule"
        if args.ranks:
            self.ranks, rsrc = args.ranks, "--ranks"
        elif rec.get("ranks") is not None:
            self.ranks, rsrc = tuple(rec["ranks"]), "tree"
        else:
            self.ranks, rsrc = (0,), "memprints default"
        self.after = tuple(rec.get("stages_after") or (1, 2, 3, 4, 5))
        self.saved = tuple(rec.get("stages_saved") or (1, 3, 5))
        self.source = "detail layers from %s, ranks from %s" % (src, rsrc)
        self.cfg = cfg


WEIGHT_STAGES = (1, 3)  # stage 1: attention projections; stage 3: the experts


def check_layers(rep, logs, kinds, args):
    """Every detail layer prints its probes and saved-tensor summaries on its hosting rank."""
    rows = []
    for n in display_order(logs):
        kind = kinds.get(n)
        if kind not in ("fresh", "resume") or (kind == "resume" and args.resume_profiled != "yes"):
            continue
        setup = PrintSetup(logs[n], args)
        msgs = layer_prints.rank_messages(logs[n])
        rows.append("| %s | %s | %s | | | | | |" % (n, list(setup.detail), setup.source))
        for layer in setup.detail:
            printers, why = layer_printers(setup.cfg, layer, setup.ranks, args.profiled_chunks)
            if not printers:
                rows.append("| | %d | - | - | - | - | - | not expected: %s |" % (layer, why))
            for r in printers:
                rows.append(layer_row(rep, n, layer, r, msgs.get(r, []), setup))
    if not rows:
        return
    rep.add("## Per-layer prints of the detail layers")
    rep.add("")
    rep.add("| log | layer | rank | `after stageK` probes | saved-tensor summaries | "
            "weight, stage 1 | weight, stage 3 | verdict |")
    rep.add("|---|---|---|---|---|---|---|---|")
    rep.lines.extend(rows)
    rep.add("")


def layer_row(rep, log, layer, rank, messages, setup):
    bad = []
    seen = layer_prints.probes(messages)
    missing = [k for k in setup.after if (layer, k) not in seen]
    if missing:
        bad.append("no `layer%d after stage%s`" % (layer, ",".join(map(str, missing))))
    blocks = {}
    for b in layer_prints.saved_blocks(messages):
        if b.layer == layer:
            blocks.setdefault(b.stage, b)  # the first print of each stage
    absent = [k for k in setup.saved if k not in blocks]
    if absent:
        bad.append("no `layer%d stage%s saved tensors`" % (layer, ",".join(map(str, absent))))
    for k, b in sorted(blocks.items()):
        if b.total is None:
            bad.append("stage%d saved tensors without a summary line" % k)
        elif b.total != len(b.tensors):
            bad.append("stage%d summary says total=%d, %d tensor lines read"
                       % (k, b.total, len(b.tensors)))
    weights = []
    for k in WEIGHT_STAGES:
        b = blocks.get(k)
        if k not in setup.saved or b is None:
            weights.append("-")
            continue
        weights.append(b.weight_text())
        if b.weights_nonzero() is False:
            bad.append("stage%d saves its weights but the summary says weight=0" % k)
    probes = "%d/%d" % (len(setup.after) - len(missing), len(setup.after))
    saved = ", ".join("stage%d (%d)" % (k, b.total or 0) for k, b in sorted(blocks.items())) or "none"
    if bad:
        verdict = rep.fail("%s layer %d rank %d: %s" % (log, layer, rank, "; ".join(bad)))
        verdict += " " + "; ".join(bad)
    else:
        verdict = "ok"
    return "| | %d | %d | %s | %s | %s | %s | %s |" % (layer, rank, probes, saved, weights[0],
                                                    weights[1], verdict)


def check_groups(rep, logs, kinds, args):
    rep.add("## Memory-print groups")
    rep.add("")
    present = display_order(logs)
    counts = {n: count_groups(logs[n]) for n in present}
    rep.add("| group | " + " | ".join(present) + " | notes |")
    rep.add("|---|" + "---|" * len(present) + "---|")
    for g in GROUPS:
        cells, notes = [], []
        for n in present:
            c = counts[n][g]
            kind = kinds.get(n)
            cell = str(c["total"])
            if g in (2, 5) and c["total"]:
                cell += " (" + ", ".join("%s %d" % (k.split()[0], v)
                                         for k, v in c["parts"].items()) + ")"
            if kind:
                want = expectations(kind, args.resume_profiled)[g]
                if want == "yes" and c["total"] == 0:
                    cell += " " + rep.fail("group %d silent in %s" % (g, n))
                    why = reason_not_firing(g, kind)
                    if why:
                        notes.append("%s: %s" % (n, why))
                elif want == "no" and c["total"] > 0:
                    cell += " " + rep.fail("group %d printed in %s" % (g, n))
                elif c["total"] == 0:
                    why = reason_not_firing(g, kind)
                    if why and kind != "plain":
                        notes.append("%s: cannot fire: %s" % (n, why))
            cells.append(cell)
        rep.add("| %d %s | %s | %s |" % (g, GROUP_NAMES[g], " | ".join(cells),
                                          "; ".join(notes) or ""))
    rep.add("")
    # Per-rank view of the instrumented runs.
    for n in present:
        if kinds.get(n) not in ("fresh", "resume"):
            continue
        setup = PrintSetup(logs[n], args)
        ranks, cfg = setup.ranks, setup.cfg
        rep.add("Per rank, %s (ranks %s, detail layers %s):" % (n, list(ranks), list(setup.detail)))
        rep.add("")
        rep.add("| group | " + " | ".join("rank %d" % r for r in ranks) + " | notes |")
        rep.add("|---|" + "---|" * len(ranks) + "---|")
        world = int(cfg.get("world", max(ranks) + 1) or 1)
        want = expectations(kinds[n], args.resume_profiled)
        for g in GROUPS:
            c = counts[n][g]
            why = (rank_reasons(g, cfg, ranks, setup.detail, args.profiled_chunks)
                   if kinds[n] == "fresh" else {})
            cells, notes = [], []
            for r in ranks:
                k = c["ranks"].get(r, 0)
                cell = str(k)
                if k == 0 and r in why:
                    cell += " (cannot fire)"
                    notes.append("rank %d: %s" % (r, why[r]))
                elif k == 0 and c["total"] > 0 and r < world and g != 5 and want[g] == "yes":
                    # Groups 2, 3, 4, 6, 7 print on every rank of the rank set.
                    cell += " (missing) " + rep.fail("group %d silent on rank %d in %s" % (g, r, n))
                cells.append(cell)
            rep.add("| %d | %s | %s |" % (g, " | ".join(cells), "; ".join(notes)))
        rep.add("")


def check_times(rep, logs):
    rep.add("## Step times (seconds, steps after the profiled step 1)")
    rep.add("")
    rep.add("| log | first step (profiled, compiles) | n after it | median | IQR | min-max |")
    rep.add("|---|---|---|---|---|---|")
    for n in display_order(logs):
        steps = step_lines(logs[n])
        if not steps:
            continue
        first = steps[min(steps)][1]
        after = min(steps)
        rep.add("| %s | %.3f | %s |" % (n, first, fmt_stats(stats(steady_times(logs[n], after)))))
    rep.add("")
    big_plain = [n for n in logs if n.startswith("big-plain")]
    big_instr = [n for n in logs if n.startswith("big-instr")]
    lines = []
    for a, b in loss_pairs(logs):
        if a.startswith("big-"):
            continue
        r = overhead_ratio(steady_times(logs[a]), steady_times(logs[b]))
        if r:
            lines.append("- %s / %s: median ratio %.3f (tiny model: dominated by launch "
                         "overhead, indicative only)" % (b, a, r))
    if big_plain and big_instr:
        p = [t for n in big_plain for t in steady_times(logs[n])]
        i = [t for n in big_instr for t in steady_times(logs[n])]
        p2 = [t for n in big_plain for t in steady_times(logs[n], 2)]
        i2 = [t for n in big_instr for t in steady_times(logs[n], 2)]
        r, r2 = overhead_ratio(p, i), overhead_ratio(p2, i2)
        if r:
            lines.append("- **overhead (qwen3-big, instrumented / plain median, %d vs %d steps "
                         "after the profiled one): %.3f** (%+.1f%%); without step 2 as well: %s"
                         % (len(i), len(p), r, (r - 1) * 100,
                            "%.3f" % r2 if r2 else "-"))
            if len(i) < 10 or len(p) < 10:
                lines.append("- fewer than 10 steps after the profiled one: %s"
                             % rep.fail("overhead sample too small"))
    if lines:
        rep.add("Overhead:")
        rep.add("")
        rep.lines.extend(lines)
        rep.add("")


def check_snapshots(rep, res):
    rep.add("## Memory snapshots")
    rep.add("")
    if not res.snapshots:
        rep.add("No snapshot came back (snapshots.tgz too large, or no run wrote one); meta.txt "
                "lists the sizes seen on the machine.")
        rep.add("")
        return
    for s in sorted(res.snapshots, key=lambda s: (s.stem, s.rank, s.step)):
        data = gzip.decompress(s.data) if s.origin.endswith(".gz") else s.data
        rep.add("- `%s` (%s.log, rank %d, step %d): %d bytes, %s"
                % (s.origin, s.stem, s.rank, s.step, len(data), describe_snapshot(data)))
    rep.add("")


def check_memprints(rep, res, kinds, binary):
    """memprints report on each instrumented log (+ its snapshot): the prints' peak beside
    the snapshot's."""
    rep.add("## memprints report: the prints' peak beside the snapshot's (rank 0)")
    rep.add("")
    if not binary:
        rep.add("Not run (pass `--memprints PATH`).")
        rep.add("")
        return
    try:
        flag = memprints_report.report_takes_snapshots(binary)
    except memprints_report.MemprintsError as e:
        rep.add("- %s: %s" % (rep.fail("memprints did not run"), e))
        rep.add("")
        return
    rep.add("`%s report` %s `--snapshots`." % (binary, "takes" if flag else "has no"))
    rep.add("")
    rep.add("| log | prints' peak | at | PithTrain peak-gpu-memory, step 1 | snapshot peak | "
            "snapshot figure from | snapshot - prints |")
    rep.add("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in display_order(res.logs):
            if kinds.get(n) not in ("fresh", "resume"):
                continue
            stem = n[:-len(".log")]
            log = Path(tmp, n)
            log.write_text(res.logs[n])
            snap = res.snapshot_of(stem)
            pickle_path = None
            if snap:
                pickle_path = Path(tmp, "%s-rank%d-step%d.pickle%s" % (
                    stem, snap.rank, snap.step, ".gz" if snap.origin.endswith(".gz") else ""))
                pickle_path.write_bytes(snap.data)
            try:
                p = memprints_report.peaks(binary, log, pickle_path, 0, flag)
            except memprints_report.MemprintsError as e:
                rep.add("| %s | %s %s | | | | | |" % (n, rep.fail("memprints report on %s" % n), e))
                continue
            if p["unparsed"]:
                rep.fail("memprints report left %d memory lines of %s unparsed" % (p["unparsed"], n))
            diff = ("%+.2f MiB" % ((p["snapshot_peak"] - p["prints_peak"]) / 2**20)
                    if p["snapshot_peak"] is not None and p["prints_peak"] is not None else "-")
            rep.add("| %s | %s | %s | %s | %s | %s | %s |" % (
                n, mib(p["prints_peak"]), p["prints_label"] or "-", mib(p["step1_peak"]),
                mib(p["snapshot_peak"]) if snap else "not measured (no snapshot came back)",
                p["snapshot_source"] or "-", diff))
            if p["unparsed"]:
                rep.add("| | %s: %d memory lines unparsed | | | | | |" % ("**FAIL**", p["unparsed"]))
    rep.add("")


def int_list(text):
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv=None):
    ap = argparse.ArgumentParser(description="check e2e logs; print a markdown summary")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--md", help="also write the summary to this file")
    ap.add_argument("--memprints", metavar="PATH",
                    help="memprints binary: run `report` (and `snapshot`) on the instrumented logs")
    ap.add_argument("--require", type=lambda s: [t for t in s.split(",") if t], default=[],
                    metavar="TAGS", help="log stems that must have come back, e.g. qwen3-plain")
    ap.add_argument("--ranks", type=int_list, default=None,
                    help="printing ranks (default: the log's E2E_PRINTS line, else 0)")
    ap.add_argument("--detail-layers", type=int_list, default=None,
                    help="detail layers (default: the log's E2E_PRINTS line, else the auto rule)")
    ap.add_argument("--profiled-chunks", choices=("both", "phase1"), default="both",
                    help="which chunks the per-layer flag reaches: both (memprints now) or "
                         "phase1 (memprints of 2026-12-01: chunk 0 only on ranks < pp - 1)")
    ap.add_argument("--resume-profiled", choices=("yes", "no", "any"), default="yes",
                    help="must groups 4/5/7 fire on the first step after a resume")
    a = ap.parse_args(argv)
    res = Results(a.dirs)
    logs = res.logs
    if not logs:
        print("no *.log (or logs.tgz) in %s" % a.dirs, file=sys.stderr)
        return 2
    kinds = {n: log_kind(n) for n in logs if log_kind(n)}

    rep = Report()
    check_calls(rep, res, a.require)
    check_runs(rep, logs)
    check_losses(rep, logs, loss_pairs(logs))
    check_resume_loss(rep, logs)
    check_groups(rep, logs, kinds, a)
    check_layers(rep, logs, kinds, a)
    check_memprints(rep, res, kinds, a.memprints)
    check_times(rep, logs)
    check_snapshots(rep, res)
    out = rep.text()
    print(out)
    if a.md:
        Path(a.md).write_text(out)
    return 1 if rep.fails else 0


if __name__ == "__main__":
    sys.exit(main())
