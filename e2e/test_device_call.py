"""Dry runs of the device calls HERE: device_call.sh matrix with fake_torchrun.py, then
check.py and keep_results.sh on what came back (no GPU, no torch, no PithTrain code).

The trees are small look-alikes: a plain tree with a pithtrain package and an execution.py,
and one overlay per model whose execution.py carries the lines tree_prints.py reads.

Run: python3 -m unittest discover -s e2e
"""

import contextlib
import gzip
import hashlib
import io
import os
import pickle
import subprocess
import tarfile
import tempfile
import unittest
from pathlib import Path

import check

E2E = Path(__file__).resolve().parent
REPO = E2E.parent
ALL = ["qwen3-plain", "qwen3-instr", "gpt-oss-plain", "gpt-oss-instr", "dsv2-plain",
       "dsv2-instr", "qwen3-resume"]
INSTRUMENTED = '''_layer_mem_profile = False
_layer_mem_ranks = {0}


def decoder_layer_forward(layer):
    _do_lmem = _layer_mem_profile and layer.idx in %s
    _prof = _SavedTensorsProfiler(layer.idx, "stage1", _wt_ptrs)
    _prof = _SavedTensorsProfiler(layer.idx, "stage3", _wt_ptrs)
    _prof = _SavedTensorsProfiler(layer.idx, "stage5", _wt_ptrs)
''' + "".join('    _lmem(f"layer{layer.idx} after stage%d (x)")\n' % k for k in range(1, 6))


def make_trees(root):
    plain = root / "plain"
    (plain / "pithtrain" / "dualpipe").mkdir(parents=True)
    (plain / "pithtrain" / "__init__.py").write_text("")
    (plain / "pithtrain" / "dualpipe" / "execution.py").write_text("def f():\n    pass\n")
    for model, layers, args in (("qwen3", "(0, 1)", "add qwen3-moe"),
                                ("gpt-oss", "(0, 1)", "add gpt-oss"),
                                ("dsv2", "(1, 2)", "add deepseek-v2")):
        o = root / "overlays" / model
        f = o / "pithtrain" / "dualpipe" / "execution.py"
        f.parent.mkdir(parents=True)
        f.write_text(INSTRUMENTED % layers)
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        (o / "E2E_OVERLAY.txt").write_text(
            "memprints 0.0.0-test\n%s\n--- sha256 of the overlay files\n"
            "%s  pithtrain/dualpipe/execution.py\n" % (args, digest))
    return plain, root / "overlays"


class DryRun(unittest.TestCase):
    """One simulated machine (E2E_TMP) that several device calls share, like a warm H200."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.plain, self.overlays = make_trees(self.root)
        self.calls = 0

    def tearDown(self):
        self.tmp.cleanup()

    def call(self, **env):
        """One `run` call: a fresh $OUT; returns (out dir, stdout)."""
        self.calls += 1
        out = self.root / ("call%d" % self.calls)
        out.mkdir()
        full = dict(os.environ, E2E_DRY_RUN="1", E2E_TMP=str(self.root / "machine"),
                    E2E_SNAPDIR=str(self.root / "machine"), OUT=str(out),
                    E2E_TORCHRUN="python3 e2e/fake_torchrun.py", PLAIN_TREE=str(self.plain),
                    OVERLAYS=str(self.overlays), E2E_SITE=str(self.root / "site"))
        full.update(env)
        (self.root / "machine").mkdir(exist_ok=True)
        p = subprocess.run(["bash", "e2e/device_call.sh", "matrix"], cwd=REPO, env=full,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        files = list(out.iterdir())
        self.assertLessEqual(len(files), 8, files)
        self.assertLessEqual(sum(f.stat().st_size for f in files), 16_000_000)
        return out, p.stdout

    def logs_in(self, out):
        if not (out / "logs.tgz").exists():
            return []
        with tarfile.open(out / "logs.tgz") as tar:
            return sorted(Path(m.name).name for m in tar.getmembers() if m.isfile())

    def summary(self, *dirs):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = check.main([str(d) for d in dirs] + ["--require", ",".join(ALL)])
        return rc, buf.getvalue()

    def test_too_little_time_leaves_everything_pending(self):
        out, stdout = self.call(E2E_BUDGET="60")
        self.assertEqual(self.logs_in(out), [])
        self.assertIn("SKIP qwen3-plain: needs ~170s", stdout)
        self.assertIn("SKIP qwen3-instr: its plain run qwen3-plain did not run", stdout)
        self.assertIn("SKIP qwen3-resume: no step-2 checkpoint", stdout)
        self.assertIn("PENDING: " + " ".join(ALL), (out / "meta.txt").read_text())

    def test_a_repeated_call_goes_on_where_the_last_stopped(self):
        first, _ = self.call(E2E_MATRIX="qwen3-plain qwen3-instr")
        self.assertEqual(self.logs_in(first), ["qwen3-instr.log", "qwen3-plain.log"])
        second, stdout = self.call()
        self.assertIn("DONE before: qwen3-plain", stdout)
        self.assertEqual(self.logs_in(second), sorted(t + ".log" for t in ALL[2:]))
        self.assertIn("ALL DONE", (second / "meta.txt").read_text())
        third, stdout = self.call()
        self.assertEqual(self.logs_in(third), [])
        self.assertIn("ALL DONE", stdout)

        rc, text = self.summary(first, second)
        self.assertEqual(rc, 0, text)
        for model in ("qwen3", "gpt-oss", "dsv2"):
            self.assertIn("| %s-plain.log | %s-instr.log | 8 | yes |" % (model, model), text)
        self.assertIn("(qwen3-resume.log, rank 0, step 2)", text)

        kept = self.root / "kept"
        p = subprocess.run(["bash", "e2e/keep_results.sh", "--dest", str(kept), str(first),
                            str(second)], cwd=REPO, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        names = sorted(f.name for f in kept.iterdir())
        self.assertEqual(names, sorted(
            ["README.md"] + ["%s-tiny-pp1-%s.log" % (m, k) for m in ("qwen3", "gpt-oss", "dsv2")
                             for k in ("plain", "instr")]
            + ["qwen3-tiny-pp1-resume.log", "qwen3-tiny-pp1-resume-rank0-step2.pickle.gz"]
            + ["%s-tiny-pp1-instr-rank0-step0.pickle.gz" % m for m in ("qwen3", "gpt-oss", "dsv2")]))
        machine = str(self.root)
        for f in kept.glob("*.log"):
            self.assertNotIn(machine, f.read_text(), f.name)
        snap = pickle.loads(gzip.decompress((kept / "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz")
                                            .read_bytes()))
        names = [fr["filename"] for fr in snap["device_traces"][0][0]["frames"]]
        self.assertEqual(names, ["<tree>/pithtrain/models/x.py", "<repo>/e2e/train.py",
                                 "<site>/flash_attn/cute/interface.py", "<inductor>/k3/abc.py",
                                 "/usr/bin/python3.12"])
        # Nothing is overwritten: a second keep into the same folder refuses, naming the file.
        p = subprocess.run(["bash", "e2e/keep_results.sh", "--dest", str(kept), str(first)],
                           cwd=REPO, capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("qwen3-tiny-pp1-plain.log exists: not overwritten", p.stderr)

    def test_a_failed_run_comes_back_and_is_run_again(self):
        out, _ = self.call(E2E_MATRIX="gpt-oss-plain gpt-oss-instr",
                           FAKE_FAIL_TAG="gpt-oss-instr")
        self.assertEqual(self.logs_in(out), ["gpt-oss-instr.log", "gpt-oss-plain.log"])
        rc, text = self.summary(out)
        self.assertEqual(rc, 1)
        self.assertIn("gpt-oss-instr.log did not finish", text)
        self.assertIn("RuntimeError: fake failure of gpt-oss-instr", text)
        again, stdout = self.call(E2E_MATRIX="gpt-oss-plain gpt-oss-instr")
        self.assertIn("DONE before: gpt-oss-plain", stdout)
        self.assertEqual(self.logs_in(again), ["gpt-oss-instr.log"])
        # Of the two gpt-oss-instr.log copies, the later run counts, in either folder order.
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = check.main([str(again), str(out)])
        self.assertEqual(rc, 0, buf.getvalue())
        self.assertIn("the earlier copy %s/logs.tgz:./gpt-oss-instr.log left out" % out,
                      buf.getvalue())
        kept = self.root / "kept"
        p = subprocess.run(["bash", "e2e/keep_results.sh", "--dest", str(kept), str(again),
                            str(out)], cwd=REPO, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("fake failure", (kept / "gpt-oss-tiny-pp1-instr.log").read_text())
        self.assertTrue((kept / "gpt-oss-tiny-pp1-instr-rank0-step0.pickle.gz").is_file())

    def test_an_instrumented_run_follows_a_failed_plain_run(self):
        out, _ = self.call(E2E_MATRIX="dsv2-plain dsv2-instr", FAKE_FAIL_TAG="dsv2-plain")
        self.assertEqual(self.logs_in(out), ["dsv2-instr.log", "dsv2-plain.log"])
        self.assertIn("PENDING: dsv2-plain", (out / "meta.txt").read_text())


if __name__ == "__main__":
    unittest.main()
