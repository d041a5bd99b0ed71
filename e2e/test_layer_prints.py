"""Unit tests of e2e/layer_prints.py: old and new saved-tensor formats, run-together ranks.

Run: python3 -m unittest discover -s e2e
"""

import unittest

import layer_prints as lp

OLD = """\
[rank=0] layer2 stage1 saved tensors:
[rank=0]     saved (activ): (2, 512, 256) torch.bfloat16 (0.5 MB)
[rank=0]     saved (activ): (128, 256) torch.bfloat16 (0.1 MB)
[rank=0]   activ=0.6 MB, weight=0.0 MB, total=2 tensors
[rank=0]   layer2 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=0.08
"""

NEW = """\
[rank=0] layer0 stage3 saved tensors:
[rank=0]     saved (activ): (2432, 256) torch.bfloat16 (1.2 MB, 1245184 bytes)
[rank=0]     saved (weight): (8, 128, 256) torch.bfloat16 (0.5 MB, 524288 bytes)
[rank=0]   activ=1.2 MB (1245184 bytes), weight=0.5 MB (524288 bytes), total=2 tensors
"""


class SavedBlockTest(unittest.TestCase):
    def test_old_format_has_no_byte_counts(self):
        (b,) = lp.saved_blocks(lp.rank_messages(OLD)[0])
        self.assertEqual((b.layer, b.stage, b.total, len(b.tensors)), (2, 1, 2, 2))
        self.assertEqual((b.activ_mb, b.weight_mb), (0.6, 0.0))
        self.assertIsNone(b.weight_bytes)
        self.assertEqual(b.tensors[1], ("activ", "(128, 256)", "torch.bfloat16", 0.1, None))
        self.assertIs(b.weights_nonzero(), False)
        self.assertEqual(b.weight_text(), "0.0 MB (0 weight lines)")

    def test_new_format_exact_bytes(self):
        (b,) = lp.saved_blocks(lp.rank_messages(NEW)[0])
        self.assertEqual((b.activ_bytes, b.weight_bytes, b.total), (1245184, 524288, 2))
        self.assertEqual(b.tensors[1][0], "weight")
        self.assertEqual(b.tensors[1][4], 524288)
        self.assertIs(b.weights_nonzero(), True)
        self.assertEqual(b.weight_text(), "0.5 MB (524288 bytes)")

    def test_bytes_after_a_comma_and_a_longer_tag(self):
        text = ("[rank=3] layer1 stage1 saved tensors:\n"
                "[rank=3]     saved (weight, fsdp-gathered): (64,) torch.bfloat16 (0.0 MB, 128 bytes)\n"
                "[rank=3]   activ=0.0 MB, 0 bytes, weight=0.0 MB, 128 bytes, total=1 tensors\n")
        (b,) = lp.saved_blocks(lp.rank_messages(text)[3])
        self.assertEqual((b.activ_bytes, b.weight_bytes), (0, 128))
        self.assertEqual(len(b.weight_lines), 1)
        # 0.0 MB rounded, but the exact count says the stage did save weights.
        self.assertIs(b.weights_nonzero(), True)

    def test_a_block_cut_short_keeps_total_none(self):
        text = OLD.splitlines()[0] + "\n" + OLD.splitlines()[1] + "\n"
        (b,) = lp.saved_blocks(lp.rank_messages(text)[0])
        self.assertIsNone(b.total)
        self.assertIsNone(b.weights_nonzero())
        self.assertEqual(b.weight_text(), "no summary")


class RankMessagesTest(unittest.TestCase):
    def test_run_together_ranks_are_split(self):
        text = ("[rank=0] layer0 stage5 saved tensors:[rank=1]   layer1 after stage2 (x): alloc=0.1\n"
                "[rank=0]   activ=1.0 MB, weight=0.0 MB, total=0 tensors\n")
        msgs = lp.rank_messages(text)
        self.assertEqual(lp.probes(msgs[1]), {(1, 2)})
        (b,) = lp.saved_blocks(msgs[0])
        self.assertEqual((b.layer, b.stage, b.total), (0, 5, 0))

    def test_pipeline_tags_and_probes(self):
        msgs = lp.rank_messages(OLD + "[rank=0 pp=0] Before pipeline: 0.02 GiB | alloc=0.02\n")
        self.assertEqual(lp.probes(msgs[0]), {(2, 1)})
        self.assertEqual(len(msgs[0]), 6)


if __name__ == "__main__":
    unittest.main()
