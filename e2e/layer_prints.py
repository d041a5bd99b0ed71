"""The per-layer prints of an instrumented run's log, per rank (stdlib only).

Two kinds of print matter to check.py (the skill's group 5):

    [rank=0]   layer2 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=0.08
    [rank=0] layer2 stage1 saved tensors:
    [rank=0]     saved (activ): (2, 512, 256) torch.bfloat16 (0.5 MB)
    [rank=0]     saved (weight): (256, 256) torch.bfloat16 (0.1 MB)
    [rank=0]   activ=4.9 MB, weight=0.1 MB, total=29 tensors

memprints' saved-tensor profiler is growing exact byte counts; any integer ``N bytes`` right
after an MB figure is taken, e.g. ``(0.1 MB, 131072 bytes)`` or ``activ=4.9 MB (5138022
bytes), weight=...``. Without it the MB figure (1 decimal) is all there is, so a byte count
is then None ("not printed"), never a number made up from the rounded MB.

Ranks share one stdout and their lines sometimes run together on one line, so the log is cut
at every ``[rank=N]`` tag and each rank's messages are read in their own order.
"""

import re

_TAG_RE = re.compile(r"\[rank=(\d+)(?: pp=\d+)?\]")
_PROBE_RE = re.compile(r"^\s*layer(\d+) after stage(\d+)\b")
_HEADER_RE = re.compile(r"^\s*layer(\d+) stage(\d+) saved tensors:\s*$")
_TENSOR_RE = re.compile(r"^\s*saved \(([^)]*)\): (\([^)]*\)) (\S+) \(([0-9.]+) MB(.*)$")
_SUMMARY_RE = re.compile(
    r"^\s*activ=([0-9.]+) MB(.*?)weight=([0-9.]+) MB(.*?)total=(\d+) tensors")
_BYTES_RE = re.compile(r"^[\s,(]*(\d+) bytes")


def rank_messages(text):
    """{rank: [message, ...]}: the text after each ``[rank=N]`` tag up to the next tag or
    the end of the line, in log order."""
    out = {}
    for line in text.splitlines():
        tags = list(_TAG_RE.finditer(line))
        for k, m in enumerate(tags):
            end = tags[k + 1].start() if k + 1 < len(tags) else len(line)
            out.setdefault(int(m.group(1)), []).append(line[m.end():end])
    return out


def _bytes_after(tail):
    """The exact byte count printed right after an MB figure, or None."""
    m = _BYTES_RE.match(tail)
    return int(m.group(1)) if m else None


def probes(messages):
    """{(layer, stage)} of the ``layerN after stageK`` probes in one rank's messages."""
    out = set()
    for msg in messages:
        m = _PROBE_RE.match(msg)
        if m:
            out.add((int(m.group(1)), int(m.group(2))))
    return out


class SavedBlock:
    """One ``layerN stageK saved tensors:`` print: its tensor lines and its summary."""

    def __init__(self, layer, stage):
        self.layer, self.stage = layer, stage
        self.tensors = []  # (tag, shape, dtype, mb, exact bytes or None)
        self.activ_mb = self.weight_mb = None
        self.activ_bytes = self.weight_bytes = None
        self.total = None  # the summary's "total=N tensors"; None when no summary followed

    @property
    def weight_lines(self):
        return [t for t in self.tensors if "weight" in t[0]]

    def weights_nonzero(self):
        """True/False from the summary's figures (exact bytes when printed), None without one."""
        if self.total is None:
            return None
        if self.weight_bytes is not None:
            return self.weight_bytes > 0
        return self.weight_mb > 0 or bool(self.weight_lines)

    def weight_text(self):
        if self.total is None:
            return "no summary"
        if self.weight_bytes is not None:
            return "%.1f MB (%d bytes)" % (self.weight_mb, self.weight_bytes)
        return "%.1f MB (%d weight lines)" % (self.weight_mb, len(self.weight_lines))


def saved_blocks(messages):
    """[SavedBlock] of one rank's messages, in order. A block ends at its summary line; a
    block cut short (no summary) is kept with total None."""
    out, cur = [], None
    for msg in messages:
        m = _HEADER_RE.match(msg)
        if m:
            cur = SavedBlock(int(m.group(1)), int(m.group(2)))
            out.append(cur)
            continue
        if cur is None:
            continue
        m = _TENSOR_RE.match(msg)
        if m:
            cur.tensors.append((m.group(1), m.group(2), m.group(3), float(m.group(4)),
                                _bytes_after(m.group(5))))
            continue
        m = _SUMMARY_RE.match(msg)
        if m:
            cur.activ_mb, cur.weight_mb = float(m.group(1)), float(m.group(3))
            cur.activ_bytes, cur.weight_bytes = _bytes_after(m.group(2)), _bytes_after(m.group(4))
            cur.total = int(m.group(5))
            cur = None
    return out
