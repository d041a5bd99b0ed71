"""Dry runs of `device_call.sh whatif` HERE (fake_torchrun.py, no GPU), then keep_results.sh and
whatif_summary.py on what came back; train.py's shape options and dataset plan.

Run: python3 -m unittest discover -s e2e
"""

import gzip
import hashlib
import os
import pickle
import subprocess
import tarfile
import tempfile
import unittest
from pathlib import Path

import train
import whatif_summary
from test_device_call import INSTRUMENTED

E2E = Path(__file__).resolve().parent
REPO = E2E.parent
SHAPES = ["s1024-mb1", "s2048-mb1", "s4096-mb1", "s8192-mb1", "s1024-mb2"]
LADDER = {"E2E_OOM_LADDER": "s2048-mb8 s2048-mb16"}


def make_trees(root):
    plain = root / "plain"
    (plain / "pithtrain" / "dualpipe").mkdir(parents=True)
    (plain / "pithtrain" / "__init__.py").write_text("")
    (plain / "pithtrain" / "dualpipe" / "execution.py").write_text("def f():\n    pass\n")
    o = root / "overlays-whatif" / "qwen3"
    f = o / "pithtrain" / "dualpipe" / "execution.py"
    f.parent.mkdir(parents=True)
    f.write_text(INSTRUMENTED % "(4, 5)")
    digest = hashlib.sha256(f.read_bytes()).hexdigest()
    (o / "E2E_OVERLAY.txt").write_text(
        "memprints 0.0.0-test\nadd qwen3-moe --detail-layers 4,5\n"
        "--- sha256 of the overlay files\n%s  pithtrain/dualpipe/execution.py\n" % digest)
    return plain, root / "overlays-whatif"


class Shapes(unittest.TestCase):
    def args(self, *argv):
        return train.main(list(argv))

    def test_dataset_plan(self):
        p = train.preset("qwen3-big")
        self.assertEqual(train.dataset_plan("qwen3-big", p, 14, False), ("qwen3-big", 32 * 16))
        q = dict(p, seq=8192, mb=1, gb=8)
        self.assertEqual(train.dataset_plan("qwen3-big", q, 4, True), ("qwen3-big-s8192-n32", 32))

    def test_dataset_name_and_dataset(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "ds"
            argv = ["--variant", "qwen3-big", "--seq", "1024", "--micro-batch", "2",
                    "--global-batch", "16", "--max-steps", "4"]
            p = subprocess.run(["python3", "e2e/train.py"] + argv + ["--dataset-name"], cwd=REPO,
                               capture_output=True, text=True)
            self.assertEqual(p.stdout.strip(), "qwen3-big-s1024-n64")
            p = subprocess.run(["python3", "e2e/train.py"] + argv + ["--make-dataset", str(out)],
                               cwd=REPO, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            # (len(tokens) - 1) // seq samples, as MemmapDataset counts them: exactly 4 x 16
            size = (out / "shard-000.bin").stat().st_size - 128
            self.assertEqual((size // 2 - 1) // 1024, 64)
            # the preset's own shape keeps the preset's folder and 32 steps
            p = subprocess.run(["python3", "e2e/train.py", "--variant", "qwen3-big", "--seq",
                                "4096", "--dataset-name"], cwd=REPO, capture_output=True,
                               text=True)
            self.assertEqual(p.stdout.strip(), "qwen3-big")


class DryRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.plain, self.overlays = make_trees(self.root)
        self.calls = 0

    def tearDown(self):
        self.tmp.cleanup()

    def call(self, **env):
        self.calls += 1
        out = self.root / ("call%d" % self.calls)
        out.mkdir()
        full = dict(os.environ, E2E_DRY_RUN="1", E2E_TMP=str(self.root / "machine"),
                    E2E_SNAPDIR=str(self.root / "machine"), OUT=str(out),
                    E2E_TORCHRUN="python3 e2e/fake_torchrun.py", PLAIN_TREE=str(self.plain),
                    E2E_WHATIF_OVERLAYS=str(self.overlays), E2E_SITE=str(self.root / "site"))
        full.update(env)
        (self.root / "machine").mkdir(exist_ok=True)
        p = subprocess.run(["bash", "e2e/device_call.sh", "whatif"], cwd=REPO, env=full,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        files = list(out.iterdir())
        self.assertLessEqual(len(files), 8, files)
        return out, p.stdout

    def members(self, out, name):
        if not (out / name).exists():
            return []
        with tarfile.open(out / name) as tar:
            return sorted(m.name.lstrip("./") for m in tar.getmembers() if m.isfile())

    def test_all_shapes_then_the_ladder_stops_at_the_first_oom(self):
        # mb 8 at 2048 holds 16384 tokens: FAKE_OOM_TOKENS, the ladder's first rung OOMs (the
        # default ladder s8192-mb32 s8192-mb64 behaves the same, with slower fake datasets)
        out, stdout = self.call(**LADDER, FAKE_OOM_TOKENS="16384")
        logs = self.members(out, "logs.tgz")
        self.assertEqual(logs, sorted("whatif-%s-instr.log" % s for s in SHAPES + ["s2048-mb8"]))
        self.assertIn("OOM: whatif-s2048-mb8-instr ran out of memory", stdout)
        self.assertIn("ALL DONE", (out / "meta.txt").read_text())
        # only the snapshots of the base and the x8 run come back
        self.assertEqual(self.members(out, "snapshots.tgz"), [
            "whatif-s1024-mb1-instr/memory_snapshot_rank0_step0.pickle",
            "whatif-s8192-mb1-instr/memory_snapshot_rank0_step0.pickle"])
        # the shape reached train.py (and the dataset of that shape was made)
        with tarfile.open(out / "logs.tgz") as tar:
            text = tar.extractfile("./whatif-s1024-mb2-instr.log").read().decode()
        self.assertIn("--seq 1024 --micro-batch 2 --global-batch 16", text)
        self.assertIn('"num_chunks": 8', text)
        self.assertTrue((self.root / "machine" / "e2e_data" / "qwen3-big-s8192-n32"
                         / "shard-000.bin").is_file())
        # a repeated call runs nothing again
        again, stdout = self.call(**LADDER, FAKE_OOM_TOKENS="16384")
        self.assertIn("OOM found before: s2048-mb8", stdout)
        self.assertEqual(self.members(again, "logs.tgz"), [])

        kept = self.root / "kept"
        p = subprocess.run(["bash", "e2e/keep_results.sh", "--dest", str(kept), "--gzip-over",
                            "1000000", str(out)], cwd=REPO, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        names = sorted(f.name for f in kept.iterdir())
        self.assertEqual(names, sorted(
            ["README.md"] + ["qwen3-big-pp1-%s-instr.log" % s for s in SHAPES + ["s2048-mb8"]]
            + ["qwen3-big-pp1-s1024-mb1-instr-rank0-step0.pickle.gz",
               "qwen3-big-pp1-s8192-mb1-instr-rank0-step0.pickle.gz"]))
        for f in kept.glob("*.log"):
            self.assertNotIn(str(self.root), f.read_text(), f.name)
        snap = pickle.loads(gzip.decompress(
            (kept / "qwen3-big-pp1-s8192-mb1-instr-rank0-step0.pickle.gz").read_bytes()))
        self.assertEqual(snap["device_traces"][0][0]["frames"][0]["filename"],
                         "<tree>/pithtrain/models/x.py")

        runs = {r["file"]: r for r in map(whatif_summary.parse, sorted(kept.glob("*.log")))}
        base = runs["qwen3-big-pp1-s1024-mb1-instr.log"]
        self.assertEqual(base["step1_peak_gib"], 0.24)
        self.assertEqual(base["steady_peak_gib"], 0.49)
        self.assertEqual(base["steady_peak_bytes"],
                         max(b for step, (b, _) in base["mem"].items() if step >= 2))
        self.assertLess(base["step1_peak_bytes"], base["steady_peak_bytes"])
        self.assertEqual(base["gpu"]["total_memory_bytes"], 150754820096)
        self.assertIsNone(base["oom"])
        oom = runs["qwen3-big-pp1-s2048-mb8-instr.log"]["oom"]
        self.assertEqual(oom["tried"], "8.00 GiB")
        self.assertEqual(oom["capacity_bytes"], int(139.81 * 2**30))
        self.assertEqual(oom["reserved_free"], "4.20 GiB")
        self.assertEqual(oom["last_print"], "[rank=0] setup_model | after apply_fsdp: alloc=0.02 "
                         "cached=0.02 non-pt=1.15".split("] ", 1)[1])

    def test_a_run_that_does_not_oom_climbs_the_ladder(self):
        out, stdout = self.call(**LADDER, FAKE_OOM_TOKENS="20000", E2E_WHATIF_SHAPES="s1024-mb1")
        logs = self.members(out, "logs.tgz")
        self.assertEqual(logs, ["whatif-s1024-mb1-instr.log", "whatif-s2048-mb16-instr.log",
                                "whatif-s2048-mb8-instr.log"])
        self.assertIn("OOM: whatif-s2048-mb16-instr", stdout)
        self.assertIn("OOM found before: s2048-mb16",
                      self.call(**LADDER, FAKE_OOM_TOKENS="20000", E2E_WHATIF_SHAPES="s1024-mb1")[1])

    def test_too_little_time_leaves_it_pending(self):
        out, stdout = self.call(E2E_BUDGET="100")
        self.assertIn("SKIP whatif-s1024-mb1-instr: needs ~130s", stdout)
        self.assertIn("PENDING: " + " ".join("whatif-%s-instr" % s for s in SHAPES)
                      + " an OOM of the ladder", (out / "meta.txt").read_text())


class SummaryOfRealMessages(unittest.TestCase):
    def test_the_oom_message_of_torch_2_11(self):
        line = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                "GPU 0 has a total capacity of 139.81 GiB of which 1.06 GiB is free. Process 1234 "
                "has 138.73 GiB memory in use. Including non-PyTorch memory, this process has "
                "138.73 GiB memory in use. Of the allocated memory 133.50 GiB is allocated by "
                "PyTorch, and 3.20 GiB is reserved by PyTorch but unallocated. If reserved but "
                "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=...")
        with tempfile.TemporaryDirectory() as d:
            log = Path(d) / "x.log.gz"
            log.write_bytes(gzip.compress(("[rank=0] layer4 after stage3: alloc=1\n" + line + "\n")
                                          .encode()))
            r = whatif_summary.parse(log)
        self.assertEqual(r["oom"]["in_use"], "138.73 GiB")
        self.assertEqual(r["oom"]["other"], "138.73 GiB")
        self.assertEqual(r["oom"]["allocated_bytes"], int(133.5 * 2**30))
        self.assertEqual(r["oom"]["last_print"], "layer4 after stage3: alloc=1")


if __name__ == "__main__":
    unittest.main()
