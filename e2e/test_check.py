"""Unit tests of e2e/check.py on small fabricated log snippets (no GPU, stdlib only).

Run: python3 -m unittest discover -s e2e
"""

import contextlib
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
INSTR_HEAD = (
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
)
INSTR_LAYER0 = (
    "[rank=0]     layer0 stage1: before forward_stage1_compute: alloc=0.01\n"
    "[rank=0] layer0 stage1 saved tensors:\n"
    "[rank=0]     saved (activ): (2, 512, 256) torch.bfloat16 (0.5 MB)\n"
    "[rank=0]   activ=0.5 MB, weight=0.0 MB, total=1 tensors\n"
    "[rank=0]   layer0 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=0.02\n"
    "[rank=0]       experts: before gate_proj  x=(2048, 256): alloc=0.02\n"
    "[rank=0]       experts: after down_proj   out=(2048, 256): alloc=0.02\n"
)
INSTR_TAIL = (
    "[rank=1 pp=1] Step2 i=0 forward_chunk(1): 0.02 GiB (+0.01) | alloc=0.02 cached=0.0 non-pt=0.8\n"
    "E2E_LOSS_SUMS step0 " + " ".join(LOSSES) + "\n"
    "[rank=0] Memory snapshot saved to /tmp/memory_snapshot_rank0_step0.pickle\n"
    "[rank=1] Memory snapshot saved to /tmp/memory_snapshot_rank1_step0.pickle\n"
    + step(1, 3, 70.0) + step(2, 3, 0.26) + step(3, 3, 0.28)
    + "No checkpoint found; training from scratch.\nE2E_END tag=instr rc=0 wall=95s\n"
)
INSTR = INSTR_HEAD + INSTR_LAYER0 + INSTR_TAIL

PRINTS = {"instrumented": True, "detail_layers": [0, 1], "ranks": [0, 1],
          "stages_after": [1, 2, 3, 4, 5], "stages_saved": [1, 3, 5]}


def detail_prints(layer, rank, new_format=True, weight=131072):
    """A detail layer's group-5 prints as memprints writes them: saved-tensor summaries of
    stages 1, 3, 5 (weights saved in 1 and 3) and the five `after stageK` probes. The old
    format has no byte counts, the new one appends `, N bytes` / ` (N bytes)`."""
    tag = "[rank=%d]" % rank

    def mb(n):
        return "%.1f MB" % (n / 2**20)

    def tensor(kind, shape, n):
        exact = ", %d bytes" % n if new_format else ""
        return "%s     saved (%s): %s torch.bfloat16 (%s%s)\n" % (tag, kind, shape, mb(n), exact)

    def summary(act, wt, total):
        ea = " (%d bytes)" % act if new_format else ""
        ew = " (%d bytes)" % wt if new_format else ""
        return "%s   activ=%s%s, weight=%s%s, total=%d tensors\n" % (tag, mb(act), ea, mb(wt),
                                                                     ew, total)

    out = ""
    for k in (1, 2, 3, 4, 5):
        if k in (1, 3, 5):
            out += "%s layer%d stage%d saved tensors:\n" % (tag, layer, k)
            out += tensor("activ", "(2, 512, 256)", 524288)
            if k in (1, 3):
                out += tensor("weight" if weight else "activ", "(256, 256)", 131072)
                out += summary(524288 + (0 if weight else 131072), weight, 2)
            else:
                out += summary(524288, 0, 1)
        out += "%s   layer%d after stage%d (what): alloc=0.02\n" % (tag, layer, k)
    return out


INSTR_FULL = (INSTR_HEAD + "E2E_PRINTS " + json.dumps(PRINTS) + "\n" + detail_prints(0, 0)
              + detail_prints(1, 1) + INSTR_TAIL)

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

    def test_profiled_layers_of_the_skill_schedule(self):
        # pp=2, 4 layers: rank 0 runs stage 0 (step 1, i == 1) and stage 3 (step 2, i == 0);
        # rank 1 has no step-1 iterations and runs stage 2 in step 2.
        self.assertEqual(check.profiled_layers(4, 2, 0, "phase1"), {0, 3})
        self.assertEqual(check.profiled_layers(4, 2, 1, "phase1"), {2})
        self.assertEqual(check.profiled_layers(8, 2, 1, "phase1"), {4, 5})
        # pp=1: only chunk 1 (layers 2-3 of 4), so the default layers 0, 1 print nothing.
        self.assertEqual(check.profiled_layers(4, 1, 0, "phase1"), {2, 3})

    def test_profiled_layers_with_both_chunks(self):
        self.assertEqual(check.profiled_layers(4, 2, 1), {1, 2})
        self.assertEqual(check.profiled_layers(4, 1, 0), {0, 1, 2, 3})

    def test_hosting_rank_and_printers(self):
        self.assertEqual([check.hosting_pp_rank(i, 4, 2) for i in range(4)], [0, 1, 1, 0])
        self.assertEqual([check.hosting_pp_rank(i, 4, 1) for i in range(4)], [0, 0, 0, 0])
        self.assertIsNone(check.hosting_pp_rank(4, 4, 1))
        pp1 = dict(CONFIG, pp=1, world=1)
        self.assertEqual(check.layer_printers(pp1, 0, (0,)), ([0], None))
        self.assertEqual(check.layer_printers(pp1, 1, (0,)), ([0], None))
        printers, why = check.layer_printers(pp1, 1, (0,), "phase1")
        self.assertEqual(printers, [])
        self.assertIn("chunk 0 of pp rank 0", why)
        # pp=2 on two GPUs: layer 1 sits on pp rank 1 (chunk 0), which rank set {0} leaves out.
        self.assertEqual(check.layer_printers(CONFIG, 1, (0, 1)), ([1], None))
        printers, why = check.layer_printers(CONFIG, 1, (0,))
        self.assertEqual(printers, [])
        self.assertIn("pp rank 1 hosts layer 1", why)
        self.assertIn("has no layer 7", check.layer_printers(CONFIG, 7, (0,))[1])

    def test_auto_detail_layers(self):
        self.assertEqual(check.auto_detail_layers(0, 4), (0, 1))
        self.assertEqual(check.auto_detail_layers(1, 4), (1, 2))
        self.assertEqual(check.auto_detail_layers(3, 4), (3,))

    def test_rank_reasons(self):
        why = check.rank_reasons(5, CONFIG, (0, 1), (0, 1), "phase1")
        self.assertNotIn(0, why)
        self.assertIn(1, why)
        self.assertIn("[2]", why[1])
        self.assertEqual(check.rank_reasons(5, CONFIG, (0, 1), (0, 2), "phase1"), {})
        self.assertEqual(check.rank_reasons(5, CONFIG, (0, 1), (0, 1)), {})
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
            self.write(d, "instr.log", INSTR_FULL)
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
            self.write(d, "instr.log", INSTR_FULL.replace(LOSSES[2], "0x1.0b00000000001p+12"))
            with contextlib.redirect_stdout(io.StringIO()):
                rc = check.main([d, "--md", str(md), "--resume-profiled", "any"])
            self.assertEqual(rc, 1)
            self.assertIn("step-0 losses differ", md.read_text())

    def test_a_silent_rank_fails(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "instr.log", INSTR_FULL.replace(
                "[rank=1] Memory snapshot saved to", "[rank=9] Memory snapshot saved to"))
            import contextlib

            with contextlib.redirect_stdout(io.StringIO()):
                rc = check.main([d, "--md", str(Path(d, "s.md"))])
            self.assertEqual(rc, 1)
            self.assertIn("group 7 silent on rank 1 in instr.log", Path(d, "s.md").read_text())

    def test_resume_profiled_yes_fails_when_silent(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "instr.log", INSTR_FULL)
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


def run_main(args):
    """check.main's exit status and its markdown summary."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = check.main(args)
    return rc, out.getvalue()


class CheckLayersTest(unittest.TestCase):
    """The per-layer checks on a two-rank pp=2 log (layer 0 on rank 0, layer 1 on rank 1)."""

    def summary(self, text, *args):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "qwen3-instr.log").write_text(text)
            return run_main([d] + list(args))

    def test_complete_new_format_passes(self):
        rc, text = self.summary(INSTR_FULL)
        self.assertEqual(rc, 0, text)
        self.assertIn("| | 0 | 0 | 5/5 | stage1 (2), stage3 (2), stage5 (1) | "
                      "0.1 MB (131072 bytes) | 0.1 MB (131072 bytes) | ok |", text)
        self.assertIn("| | 1 | 1 | 5/5 |", text)
        self.assertIn("detail layers from tree, ranks from tree", text)

    def test_old_format_with_weights_passes_on_mb(self):
        full = (INSTR_HEAD + "E2E_PRINTS " + json.dumps(PRINTS) + "\n"
                + detail_prints(0, 0, new_format=False) + detail_prints(1, 1, new_format=False)
                + INSTR_TAIL)
        rc, text = self.summary(full)
        self.assertEqual(rc, 0, text)
        self.assertIn("0.1 MB (1 weight lines)", text)

    def test_zero_weights_fail(self):
        zero = INSTR_FULL.replace(detail_prints(1, 1), detail_prints(1, 1, weight=0))
        rc, text = self.summary(zero)
        self.assertEqual(rc, 1)
        self.assertIn("qwen3-instr.log layer 1 rank 1: stage1 saves its weights but the "
                      "summary says weight=0", text)

    def test_a_missing_probe_and_summary_fail(self):
        cut = INSTR_FULL.replace("[rank=0]   layer0 after stage4 (what): alloc=0.02\n", "")
        cut = cut.replace("[rank=0] layer0 stage5 saved tensors:\n", "")
        rc, text = self.summary(cut)
        self.assertEqual(rc, 1)
        self.assertIn("no `layer0 after stage4`", text)
        self.assertIn("no `layer0 stage5 saved tensors`", text)

    def test_a_summary_total_that_disagrees_fails(self):
        bad = INSTR_FULL.replace("total=1 tensors", "total=3 tensors", 1)
        rc, text = self.summary(bad)
        self.assertEqual(rc, 1)
        self.assertIn("stage5 summary says total=3, 1 tensor lines read", text)

    def test_rank_outside_the_printing_set_is_not_expected(self):
        rc, text = self.summary(INSTR_FULL, "--ranks", "0")
        self.assertEqual(rc, 0, text)
        self.assertIn("not expected: pp rank 1 hosts layer 1", text)

    def test_old_schedule_at_pp1_explains_the_silent_layers(self):
        pp1 = INSTR_FULL.replace(json.dumps(CONFIG), json.dumps(dict(CONFIG, pp=1, world=1)))
        pp1 = pp1.replace(detail_prints(1, 1), "")
        rc, text = self.summary(pp1, "--profiled-chunks", "phase1", "--ranks", "0")
        self.assertIn("not expected: layer 0 is in chunk 0 of pp rank 0", text)
        rc, text = self.summary(pp1, "--ranks", "0")
        self.assertEqual(rc, 1)
        self.assertIn("qwen3-instr.log layer 1 rank 0: no `layer1 after stage1,2,3,4,5`", text)


class ResultsTest(unittest.TestCase):
    def test_logs_tgz_snapshots_and_meta(self):
        with tempfile.TemporaryDirectory() as d:
            add_tar(Path(d, "logs.tgz"), {"qwen3-plain.log": PLAIN.encode(),
                                          "qwen3-instr.log": INSTR_FULL.encode()})
            snap = pickle.dumps({"segments": [{}], "device_traces": [[{}, {}]]})
            add_tar(Path(d, "snapshots.tgz"),
                    {"qwen3-instr/memory_snapshot_rank0_step0.pickle": snap,
                     "./qwen3-oom/memory_snapshot_rank0.pickle": b"x"})
            Path(d, "meta.txt").write_text("[device_call +500s] SKIP dsv2-plain: 40s left\n")
            res = check.Results([d])
            self.assertEqual(sorted(res.logs), ["qwen3-instr.log", "qwen3-plain.log"])
            self.assertEqual(res.snapshot_of("qwen3-instr").data, snap)
            self.assertIsNone(res.snapshot_of("qwen3-plain"))
            oom = res.snapshot_of("qwen3-oom")  # the OOM snapshot's name has no step
            self.assertEqual((oom.rank, oom.step, oom.data), (0, 0, b"x"))
            rc, text = run_main([d, "--require", "qwen3-plain,qwen3-instr,gpt-oss-plain"])
        self.assertEqual(rc, 1)
        self.assertIn("| qwen3-plain.log | qwen3-instr.log | 4 | yes |", text)
        self.assertIn("SKIP dsv2-plain: 40s left", text)
        self.assertIn("gpt-oss-plain.log did not come back", text)
        self.assertNotIn("qwen3-plain.log did not come back", text)
        self.assertIn("(qwen3-instr.log, rank 0, step 0): %d bytes, 1 segments, 2 trace entries"
                      % len(snap), text)

    def test_a_snapshot_beside_its_log_gzip_named_like_tests_data(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "qwen3-tiny-pp1-instr.log").write_text(INSTR_FULL)
            blob = gzip.compress(pickle.dumps({"segments": [], "device_traces": [[]]}))
            Path(d, "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz").write_bytes(blob)
            res = check.Results([d])
        s = res.snapshot_of("qwen3-tiny-pp1-instr")
        self.assertEqual((s.rank, s.step, s.data), (0, 0, blob))

    def test_pairs_and_order_by_name(self):
        names = {"gpt-oss-instr.log": "", "qwen3-resume.log": "", "qwen3-plain.log": "",
                 "gpt-oss-plain.log": "", "qwen3-instr.log": "", "big-plain.log": "",
                 "big-instr.log": "", "big-plain-3.log": "", "dsv2-plain.log": ""}
        self.assertEqual(check.loss_pairs(names), [
            ("gpt-oss-plain.log", "gpt-oss-instr.log"), ("qwen3-plain.log", "qwen3-instr.log"),
            ("big-plain-3.log", "big-instr.log"), ("big-plain.log", "big-instr.log")])
        self.assertEqual(check.display_order(names)[:5], [
            "dsv2-plain.log", "gpt-oss-plain.log", "gpt-oss-instr.log", "qwen3-plain.log",
            "qwen3-instr.log"])
        self.assertEqual(check.log_kind("qwen3-tiny-pp1-resume.log"), "resume")
        self.assertEqual(check.loss_pairs({"plain.log": "", "instr.log": ""}),
                         [("plain.log", "instr.log")])


def add_tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


FAKE_MEMPRINTS = r"""#!/usr/bin/env python3
# A stand-in for the memprints binary: canned JSON, and --snapshots only when FAKE_SNAPSHOTS=1.
import json, os, sys
args = sys.argv[1:]
flag = os.environ.get("FAKE_SNAPSHOTS") == "1"
if args[:2] == ["report", "--help"]:
    print("Usage: memprints report [OPTIONS] <LOG|DIR>..." + ("\n      --snapshots <PICKLE>" if flag else ""))
elif args[0] == "report":
    if "--snapshots" in args and not flag:
        sys.exit("error: unexpected argument '--snapshots'")
    rank = {"rank": 0, "peak": {"allocated": 182536110, "label": "Step4 i=1"}, "snapshots": []}
    if "--snapshots" in args:
        rank["snapshots"] = [{"path": args[args.index("--snapshots") + 1],
                              "peak_allocated_bytes": 188720776}]
    print(json.dumps({"stats": {"unparsed_memory_lines": int(os.environ.get("FAKE_UNPARSED", "0"))},
                      "training": {"first_step_peak_gpu_memory": 193273528}, "ranks": [rank]}))
elif args[0] == "snapshot":
    print(json.dumps({"snapshots": [{"path": args[1], "peak_allocated_bytes": 188720777}]}))
else:
    sys.exit(2)
"""


class MemprintsTest(unittest.TestCase):
    def run_with(self, env):
        import os

        with tempfile.TemporaryDirectory() as d:
            fake = Path(d, "memprints")
            fake.write_text(FAKE_MEMPRINTS)
            fake.chmod(0o755)
            results = Path(d, "out")
            results.mkdir()
            Path(results, "qwen3-instr.log").write_text(INSTR_FULL)
            add_tar(Path(results, "snapshots.tgz"),
                    {"qwen3-instr/memory_snapshot_rank0_step0.pickle": pickle.dumps({})})
            old = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                return run_main([str(results), "--memprints", str(fake)])
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    def test_without_snapshots_flag_the_snapshot_command_gives_the_peak(self):
        rc, text = self.run_with({"FAKE_SNAPSHOTS": "0", "FAKE_UNPARSED": "0"})
        self.assertEqual(rc, 0, text)
        self.assertIn("report` has no `--snapshots`", text)
        self.assertIn("| qwen3-instr.log | 174.08 MiB | Step4 i=1 | 184.32 MiB | 179.98 MiB | "
                      "snapshot | +5.90 MiB |", text)

    def test_with_snapshots_flag_the_report_gives_the_peak(self):
        rc, text = self.run_with({"FAKE_SNAPSHOTS": "1", "FAKE_UNPARSED": "0"})
        self.assertEqual(rc, 0, text)
        self.assertIn("report` takes `--snapshots`", text)
        self.assertIn("| 179.98 MiB | report --snapshots |", text)

    def test_unparsed_lines_fail(self):
        rc, text = self.run_with({"FAKE_SNAPSHOTS": "0", "FAKE_UNPARSED": "3"})
        self.assertEqual(rc, 1)
        self.assertIn("memprints report left 3 memory lines of qwen3-instr.log unparsed", text)

    def test_a_missing_binary_fails_in_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "qwen3-instr.log").write_text(INSTR_FULL)
            rc, text = run_main([d, "--memprints", str(Path(d, "no-such-memprints"))])
        self.assertEqual(rc, 1)
        self.assertIn("memprints did not run", text)

    def test_snapshot_peak_search(self):
        find = check.memprints_report.snapshot_peak_in
        self.assertEqual(find({"snapshots": [{"peak_allocated_bytes": 5}]}), 5)
        self.assertEqual(find({"snapshot": {"peak": {"allocated": 6}}}), 6)
        self.assertIsNone(find({"peak": {"allocated": 7}, "snapshots": [{"path": "x"}]}))


DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "e2e"
MEMPRINTS = Path(__file__).resolve().parent.parent / "target" / "release" / "memprints"


@unittest.skipUnless(DATA.is_dir(), "tests/data/e2e not present")
class RealDataTest(unittest.TestCase):
    """The kept GPU logs of 2026-12-01 (old format, --detail-layers 2,3 for qwen3)."""

    def test_qwen3_detail_layers_2_3_print_every_stage_with_old_zero_weights(self):
        msgs = check.layer_prints.rank_messages((DATA / "qwen3-tiny-pp1-instr.log").read_text())
        self.assertEqual(check.layer_prints.probes(msgs[0]),
                         {(layer, k) for layer in (2, 3) for k in range(1, 6)})
        blocks = check.layer_prints.saved_blocks(msgs[0])
        self.assertEqual([(b.layer, b.stage, b.total) for b in blocks],
                         [(2, 1, 29), (2, 3, 13), (2, 5, 2), (3, 1, 29), (3, 3, 13), (3, 5, 2)])
        # The binary of that day did not see FSDP-gathered weights: every summary says 0.
        self.assertTrue(all(b.weights_nonzero() is False for b in blocks))

    def test_summary_of_the_kept_data(self):
        rc, text = run_main([str(DATA), "--detail-layers", "2,3", "--ranks", "0,1",
                             "--profiled-chunks", "phase1"])
        self.assertIn("| qwen3-tiny-pp1-resume.log | yes | 3/3 |", text)
        self.assertIn("qwen3-tiny-pp1-instr.log layer 2 rank 0: stage1 saves its weights but "
                      "the summary says weight=0", text)
        self.assertIn("(qwen3-tiny-pp1-instr.log, rank 0, step 0)", text)
        self.assertEqual(rc, 1)

    @unittest.skipUnless(MEMPRINTS.is_file(), "no target/release/memprints")
    def test_memprints_peaks_of_the_kept_qwen3_run(self):
        p = check.memprints_report.peaks(
            str(MEMPRINTS), DATA / "qwen3-tiny-pp1-instr.log",
            DATA / "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz")
        self.assertEqual(p["unparsed"], 0)
        self.assertEqual(p["prints_label"], "Step4 i=1")
        self.assertEqual(round(p["snapshot_peak"] / 2**20, 2), 179.98)
        self.assertLess(p["prints_peak"], p["snapshot_peak"])


if __name__ == "__main__":
    unittest.main()
