"""Unit tests of e2e/tree_prints.py on small execution.py look-alikes (no PithTrain code).

Run: python3 -m unittest discover -s e2e
"""

import contextlib
import io
import json
import tempfile
import unittest
from pathlib import Path

import tree_prints

SOURCE = '''
_layer_mem_profile = False
_layer_mem_ranks = {0, 8}


def decoder_layer_forward(layer):
    _do_lmem = _layer_mem_profile and layer.idx in (3, 4)
    if _do_saved:
        _prof = _SavedTensorsProfiler(layer.idx, "stage1", _wt_ptrs)
    if _do_lmem:
        _lmem(f"layer{layer.idx} after stage1 (forward_stage1: attn + gate + dispatch_prep)")
    if _do_lmem:
        _lmem(f"layer{layer.idx} after stage2 (dispatch a2a)")
'''


class DescribeTest(unittest.TestCase):
    def test_instrumented_source(self):
        self.assertEqual(tree_prints.describe_source(SOURCE), {
            "instrumented": True, "detail_layers": [3, 4], "ranks": [0, 8],
            "stages_after": [1, 2], "stages_saved": [1]})

    def test_the_profilers_call_shape_of_the_layer_object_with_any_parameter_name(self):
        source = SOURCE.replace("layer.idx", "block.idx").replace(
            '_SavedTensorsProfiler(block.idx, "stage1", _wt_ptrs)',
            '_SavedTensorsProfiler(block, "stage1")')
        self.assertIn('_SavedTensorsProfiler(block, "stage1")', source)
        self.assertEqual(tree_prints.describe_source(source), {
            "instrumented": True, "detail_layers": [3, 4], "ranks": [0, 8],
            "stages_after": [1, 2], "stages_saved": [1]})

    def test_plain_source(self):
        self.assertEqual(tree_prints.describe_source("def f():\n    pass\n"),
                         {"instrumented": False})

    def test_a_line_not_found_is_none(self):
        info = tree_prints.describe_source(SOURCE.replace("_do_lmem = ", "_x = "))
        self.assertIsNone(info["detail_layers"])
        self.assertEqual(info["ranks"], [0, 8])

    def test_main_prints_one_line_that_from_log_reads_back(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d, tree_prints.EXECUTION)
            p.parent.mkdir(parents=True)
            p.write_text(SOURCE)
            Path(d, tree_prints.OVERLAY_NOTE).write_text("memprints 0.1.0\nadd qwen3-moe\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(tree_prints.main([d]), 0)
        line = out.getvalue()
        self.assertTrue(line.startswith("E2E_PRINTS {"), line)
        info = tree_prints.from_log("noise\n" + line + "more\n")
        self.assertEqual(info["detail_layers"], [3, 4])
        self.assertEqual(info["made_by"], ["memprints 0.1.0", "add qwen3-moe"])
        self.assertEqual(json.loads(line.split(" ", 1)[1]), info)

    def test_missing_tree_is_one_line_and_exit_2(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(tree_prints.main(["/nonexistent-e2e-tree"]), 2)
        self.assertEqual(len(err.getvalue().splitlines()), 1)
        self.assertIsNone(tree_prints.from_log("no record here\n"))


if __name__ == "__main__":
    unittest.main()
