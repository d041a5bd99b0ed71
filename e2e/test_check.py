"""Unit tests of e2e/check.py on small fabricated log snippets (no GPU, stdlib only).

Run: python3 -m unittest discover -s e2e
"""

import gzip
import io
import json
import pickle
import tarfile
import tempfile
import unittest
from pathlib import Path

import check

CONFIG = {"variant": "qwen3-tiny", "model_type": "qwen3_moe", "num_layers": 4,
          "first_k_dense_replace": 0, "pp": 2, "dp": 1, "world": 2, "num_chunks": 4}


def step(n, total, secs):
    return ("2026-11-30 12:00:%02d | INFO | step %08d/%08d | step-time %.3f sec | "
            "cross-entropy-loss 8.3000 | learning-rate 3.000000e-04 | gradient-norm 1.0000 | "
            "tokens-per-second 1,000 | peak-gpu-memory 1.23 GB\n" % (n, n, total, secs))


LOSSES = ["0x1.0a3c000000000p+12", "0x1.09f2000000000p+12", "0x1.0b00000000000p+12",
          "0x1.0a00000000000p+12"]

PLAIN = (
    "E2E_RUN tag=plain variant=qwen3-tiny\n"
    "E2E_CONFIG " + json.dumps(CONFIG) + "\n"
    "E2E_LOSS_SUMS step0 " + " ".join(LOSSES) + "\n"
    "E2E_LOSS_DTYPE step0 torch.float32 n=4\n"
    + step(1, 3, 61.5) + step(2, 3, 0.25) + step(3, 3, 0.27)
    + "E2E_DONE rank=0 step=3\nE2E_DONE rank=1 step=3\nE2E_END tag=plain rc=0 wall=90s\n"
)

# Instrumented fresh run: the prints of groups 2-5 and 7, two ranks' lines run together once.
INSTR = (
    "E2E_CONFIG " + json.dumps(CONFIG) + "\n"
    "[rank=0] init_process_group | cuda_ctx=0.52 after_nccl_world=0.80 nccl_world_cost=0.28\n"
    "[rank=1] init_process_group | cuda_ctx=0.52 after_nccl_world=0.80 nccl_world_cost=0.28\n"
    "[rank=0] init_device_mesh | non-pt=0.80 mesh_cost=0.00"
    "[rank=1] init_device_mesh | non-pt=0.80 mesh_cost=0.00\n"
    "[rank=0] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=0.80\n"
    "[rank=0] setup_model | after apply_fsdp: alloc=0.01 cached=0.00 non-pt=0.80\n"
    "[rank=1] setup_model | after apply_fsdp: alloc=0.01 cached=0.00 non-pt=0.80\n"
    "[rank=0 pp=0] Before pipeline: 0.01 GiB | alloc=0.01 cached=0.02 non-pt=0.80\n"
    "[rank=0]   after prolog (embed_tokens): alloc=0.01\n"
    "[rank=0]     layer0 stage1: before forward_stage1_compute: alloc=0.01\n"
    "[rank=0] layer0 stage1 saved tensors:\n"
    "[rank=0]     saved (activ): (2, 512, 256) torch.bfloat16 (0.5 MB)\n"
    "[rank=0]   activ=0.5 MB, weight=0.0 MB, total=1 tensors\n"
    "[rank=0]   layer0 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=0.02\n"
    "[rank=0]       experts: before gate_proj  x=(2048, 256): alloc=0.02\n"
    "[rank=0]       experts: after down_proj   out=(2048, 256): alloc=0.02\n"
    "[rank=1 pp=1] Step2 i=0 forward_chunk(1): 0.02 GiB (+0.01) | alloc=0.02 cached=0.0 non-pt=0.8\n"
    "E2E_LOSS_SUMS step0 " + " ".join(LOSSES) + "\n"
    "[rank=0] Memory snapshot saved to /tmp/memory_snapshot_rank0_step0.pickle\n"
    "[rank=1] Memory snapshot saved to /tmp/memory_snapshot_rank1_step0.pickle\n"
    + step(1, 3, 70.0) + step(2, 3, 0.26) + step(3, 3, 0.28)
    + "No checkpoint found; training from scratch.\nE2E_END tag=instr rc=0 wall=95s\n"
)

RESUME = (
    "E2E_CONFIG " + json.dumps(CONFIG) + "\n"
    "[rank=0] init_process_group | cuda_ctx=0.52 after_nccl_world=0.80 nccl_world_cost=0.28\n"
    "[rank=1] init_process_group | cuda_ctx=0.52 after_nccl_world=0.80 nccl_world_cost=0.28\n"
    "[rank=0] setup_model | after apply_fsdp: alloc=0.01 cached=0.00 non-pt=0.80\n"
    "[rank=1] setup_model | after apply_fsdp: alloc=0.01 cached=0.00 non-pt=0.80\n"
    "[rank=0] load_ckpt | optimizer state: 0.00 GiB (12 param entries) | alloc=0.01 cached=0.00 non-pt=0.80\n"
    "[rank=1] load_ckpt | optimizer state: 0.00 GiB (12 param entries) | alloc=0.01 cached=0.00 non-pt=0.80\n"
    + step(3, 3, 30.0) + "E2E_END tag=resume rc=0 wall=60s\n"
)


class ParseTest(unittest.TestCase):
    def test_step_lines_and_finished(self):
        self.assertEqual(check.step_lines(PLAIN)[2], (3, 0.25))
        self.assertEqual(check.finished(PLAIN), (True, 3, 3))
        cut = PLAIN.split("step 00000003")[0]
        self.assertEqual(check.finished(cut)[0], False)
        self.assertEqual(check.finished("nothing"), (False, None, None))

    def test_loss_sums_exact_strings(self):
        self.assertEqual(check.loss_sums(PLAIN), {0: LOSSES})

    def test_loss_sums_survive_run_together_line(self):
        text = "E2E_LOSS_SUMS step0 0x1.8p+3 -0x1.0p-1[rank=1] init_process_group | x\n"
        self.assertEqual(check.loss_sums(text), {0: ["0x1.8p+3", "-0x1.0p-1"]})

    def test_loss_sums_of_several_steps(self):
        text = "E2E_LOSS_SUMS step0 0x1.0p+0\nE2E_LOSS_SUMS step2 0x1.2p+0 0x1.3p+0\n"
        self.assertEqual(check.loss_sums(text), {0: ["0x1.0p+0"], 2: ["0x1.2p+0", "0x1.3p+0"]})

    def test_compare_hex(self):
        self.assertEqual(check.compare_hex(LOSSES, list(LOSSES)), (True, 0, 0.0))
        other = list(LOSSES)
        other[1] = float.hex(float.fromhex(other[1]) * (1 + 2**-20))
        same, ndiff, worst = check.compare_hex(LOSSES, other)
        self.assertFalse(same)
        self.assertEqual(ndiff, 1)
        self.assertAlmostEqual(worst, 2**-20, delta=1e-9)
        self.assertFalse(check.compare_hex(LOSSES, LOSSES[:3])[0])

    def test_first_error(self):
        text = "ok line\n[rank0]: Traceback (most recent call last):\n" \
               "[rank0]: torch.OutOfMemoryError: CUDA out of memory.\nmore\n"
        self.assertEqual(check.first_error(text), "[rank0]: torch.OutOfMemoryError: CUDA out of memory.")
        self.assertIsNone(check.first_error(PLAIN))

    def test_run_config_rc_done(self):
        self.assertEqual(check.run_config(PLAIN)["num_chunks"], 4)
        self.assertEqual(check.end_rc(PLAIN), 0)
        self.assertEqual(check.done_ranks(PLAIN), [0, 1])
        self.assertEqual(check.run_config("E2E_CONFIG {broken\n"), {})


class GroupTest(unittest.TestCase):
    def test_counts_of_instrumented_log(self):
        c = check.count_groups(INSTR)
        self.assertEqual(c[2]["parts"], {"init_process_group |": 2, "init_device_mesh |": 2})
        self.assertEqual(c[2]["ranks"], {0: 2, 1: 2})
        self.assertEqual(c[3]["total"], 3)
        self.assertEqual(c[4]["total"], 2)
        self.assertEqual(c[4]["ranks"], {0: 1, 1: 1})
        # alloc probes: prolog, stage1 compute, after stage1, two experts lines; not the
        # setup_model / pipeline lines that also carry alloc=.
        self.assertEqual(c[5]["parts"]["alloc= probes"], 5)
        self.assertEqual(c[5]["parts"]["saved tensors:"], 1)
        self.assertEqual(c[5]["parts"]["experts:"], 2)
        self.assertEqual(c[5]["ranks"].get(1, 0), 0)
        self.assertEqual(c[6]["total"], 0)
        self.assertEqual(c[7]["ranks"], {0: 1, 1: 1})

    def test_plain_log_has_no_group(self):
        self.assertTrue(all(v["total"] == 0 for v in check.count_groups(PLAIN).values()))

    def test_resume_log_group6(self):
        c = check.count_groups(RESUME)
        self.assertEqual(c[6]["total"], 2)
        self.assertEqual(c[3]["ranks"], {0: 1, 1: 1})
        self.assertEqual(c[7]["total"], 0)

    def test_expectations_and_reasons(self):
        self.assertEqual(check.expectations("fresh")[6], "no")
        self.assertIn("dcp.load", check.reason_not_firing(6, "fresh"))
        self.assertIn("step 0", check.reason_not_firing(7, "resume"))
        self.assertIn("memory_profiling", check.reason_not_firing(4, "resume"))
        self.assertIsNone(check.reason_not_firing(3, "fresh"))
        self.assertEqual(check.expectations("resume", "any")[4], "any")


class LayerTest(unittest.TestCase):
    def test_partition_even_and_uneven(self):
        self.assertEqual([check.partition(4, 4, i) for i in range(4)], [[0], [1], [2], [3]])
        self.assertEqual([check.partition(5, 4, i) for i in range(4)], [[0], [1, 2], [3], [4]])
        self.assertEqual([check.partition(7, 4, i) for i in range(4)],
                         [[0, 1], [2, 3], [4, 5], [6]])
        self.assertEqual([check.partition(3, 2, i) for i in range(2)], [[0, 1], [2]])

    def test_profiled_layers(self):
        # pp=2, 4 layers: rank 0 runs stage 0 (step 1, i == 1) and stage 3 (step 2, i == 0);
        # rank 1 has no step-1 iterations and runs stage 2 in step 2.
        self.assertEqual(check.profiled_layers(4, 2, 0), {0, 3})
        self.assertEqual(check.profiled_layers(4, 2, 1), {2})
        self.assertEqual(check.profiled_layers(8, 2, 1), {4, 5})

    def test_auto_detail_layers(self):
        self.assertEqual(check.auto_detail_layers(0, 4), (0, 1))
        self.assertEqual(check.auto_detail_layers(1, 4), (1, 2))
        self.assertEqual(check.auto_detail_layers(3, 4), (3,))

    def test_rank_reasons(self):
        why = check.rank_reasons(5, CONFIG, (0, 1), (0, 1))
        self.assertNotIn(0, why)
        self.assertIn(1, why)
        self.assertIn("[2]", why[1])
        self.assertEqual(check.rank_reasons(5, CONFIG, (0, 1), (0, 2)), {})
        self.assertEqual(check.rank_reasons(3, CONFIG, (0, 1), (0, 1)), {})


class TimeTest(unittest.TestCase):
    def test_steady_times_and_stats(self):
        self.assertEqual(check.steady_times(PLAIN), [0.25, 0.27])
        self.assertEqual(check.steady_times(PLAIN, 2), [0.27])
        s = check.stats([0.5, 0.1, 0.3, 0.2, 0.4])
        self.assertEqual((s["n"], s["median"], s["min"], s["max"]), (5, 0.3, 0.1, 0.5))
        self.assertAlmostEqual(s["q1"], 0.2)
        self.assertAlmostEqual(s["q3"], 0.4)
        self.assertIsNone(check.stats([]))
        self.assertEqual(check.stats([1.0])["q1"], 1.0)

    def test_overhead_ratio(self):
        self.assertAlmostEqual(check.overhead_ratio([1.0, 1.0, 1.0], [1.1, 1.1, 1.2]), 1.1)
        self.assertIsNone(check.overhead_ratio([], [1.0]))


class SnapshotTest(unittest.TestCase):
    def test_data_only_unpickler(self):
        snap = {"segments": [{"a": 1}], "device_traces": [[{"action": "alloc"}], []]}
        self.assertEqual(check.describe_snapshot(pickle.dumps(snap)),
                         "1 segments, 1 trace entries")
        self.assertIn("not loadable", check.describe_snapshot(pickle.dumps(Path("x"))))


class EndToEndTest(unittest.TestCase):
    def write(self, d, name, text):
        Path(d, name).write_text(text)

    def test_main_pass_and_fail(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "plain.log", PLAIN)
            self.write(d, "instr.log", INSTR)
            self.write(d, "resume.log", RESUME)
            buf = io.BytesIO(pickle.dumps({"segments": [], "device_traces": [[]]}))
            with tarfile.open(Path(d, "snapshots.tgz"), "w:gz") as tar:
                info = tarfile.TarInfo("instr/memory_snapshot_rank0_step0.pickle")
                info.size = len(buf.getvalue())
                tar.addfile(info, buf)
            md = Path(d, "summary.md")
            out = io.StringIO()
            import contextlib

            with contextlib.redirect_stdout(out):
                rc = check.main([d, "--md", str(md), "--resume-profiled", "any"])
            text = md.read_text()
            self.assertEqual(rc, 0, text)
            self.assertIn("Verdict: **PASS**", text)
            self.assertIn("| plain.log | instr.log | 4 | yes |", text)
            self.assertIn("cannot fire", text)
            self.assertIn("0 segments", text)
            # A differing loss turns the verdict into FAIL.
            self.write(d, "instr.log", INSTR.replace(LOSSES[2], "0x1.0b00000000001p+12"))
            with contextlib.redirect_stdout(io.StringIO()):
                rc = check.main([d, "--md", str(md), "--resume-profiled", "any"])
            self.assertEqual(rc, 1)
            self.assertIn("step-0 losses differ", md.read_text())

    def test_a_silent_rank_fails(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "instr.log", INSTR.replace(
                "[rank=1] Memory snapshot saved to", "[rank=9] Memory snapshot saved to"))
            import contextlib

            with contextlib.redirect_stdout(io.StringIO()):
                rc = check.main([d, "--md", str(Path(d, "s.md"))])
            self.assertEqual(rc, 1)
            self.assertIn("group 7 silent on rank 1 in instr.log", Path(d, "s.md").read_text())

    def test_resume_profiled_yes_fails_when_silent(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "instr.log", INSTR)
            self.write(d, "resume.log", RESUME)
            import contextlib

            with contextlib.redirect_stdout(io.StringIO()):
                rc = check.main([d, "--md", str(Path(d, "s.md"))])
            self.assertEqual(rc, 1)
            self.assertIn("group 7 silent in resume.log", Path(d, "s.md").read_text())

    def test_overhead_section(self):
        big = lambda secs: (  # noqa: E731
            "E2E_LOSS_SUMS step0 0x1.0p+0\n"
            + "".join(step(i + 1, len(secs), t) for i, t in enumerate(secs))
            + "E2E_END tag=x rc=0 wall=1s\n")
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "big-plain.log", big([60.0] + [0.50] * 13))
            self.write(d, "big-instr.log", big([70.0] + [0.51] * 13))
            import contextlib

            md = Path(d, "s.md")
            with contextlib.redirect_stdout(io.StringIO()):
                check.main([d, "--md", str(md)])
            text = md.read_text()
            self.assertIn("overhead (qwen3-big", text)
            self.assertIn("1.020", text)

    def test_no_logs(self):
        with tempfile.TemporaryDirectory() as d:
            import contextlib

            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(check.main([d]), 2)


if __name__ == "__main__":
    unittest.main()
