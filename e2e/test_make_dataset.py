"""Unit tests of e2e/make_dataset.py and train.py's no-GPU helpers (stdlib only)."""

import struct
import tempfile
import unittest
from array import array
from pathlib import Path

import make_dataset
import train


class NpyTest(unittest.TestCase):
    def test_header_layout(self):
        h = make_dataset.npy_header("<u2", 12345)
        self.assertEqual(h[:6], b"\x93NUMPY")
        self.assertEqual(h[6:8], bytes([1, 0]))
        self.assertEqual(len(h) % 64, 0)
        self.assertTrue(h.endswith(b"\n"))
        (hlen,) = struct.unpack("<H", h[8:10])
        self.assertEqual(len(h), 10 + hlen)

    def test_roundtrip(self):
        with tempfile.TemporaryDirectory() as d:
            paths = make_dataset.make_dataset(Path(d), vocab=4096, seq=16, samples=10, seed=7)
            self.assertEqual([p.name for p in paths], ["shard-000.bin"])
            blob = paths[0].read_bytes()
            header, off = make_dataset.parse_npy_header(blob)
            self.assertEqual(header, {"descr": "<u2", "fortran_order": False, "shape": (161,)})
            tokens = array("H", blob[off:])
            self.assertEqual(len(tokens), 161)  # samples * seq + 1 (labels are shifted by one)
            self.assertTrue(all(0 <= t < 4096 for t in tokens))
            # MemmapDataset: len = (n - 1) // seq = samples.
            self.assertEqual((len(tokens) - 1) // 16, 10)

    def test_deterministic_and_seeded(self):
        a = make_dataset.synthetic_tokens(1000, 4096, 1)
        self.assertEqual(a, make_dataset.synthetic_tokens(1000, 4096, 1))
        self.assertNotEqual(a, make_dataset.synthetic_tokens(1000, 4096, 2))

    def test_rewrite_clears_stale_files(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "indices.npy").write_bytes(b"stale")
            Path(d, "old.bin").write_bytes(b"stale")
            make_dataset.make_dataset(Path(d), vocab=16, seq=4, samples=2, seed=1)
            self.assertEqual(sorted(p.name for p in Path(d).iterdir()), ["shard-000.bin"])

    def test_vocab_limit(self):
        with self.assertRaises(ValueError):
            make_dataset.synthetic_tokens(10, 70000, 1)


class TrainHelpersTest(unittest.TestCase):
    def test_presets_satisfy_dualpipev(self):
        for name in train.PRESETS:
            p = train.preset(name)
            chunks = train.num_chunks(p["gb"], p["mb"], dp=1, ep=1)
            self.assertGreaterEqual(chunks, 2 * p["pp"], name)
            self.assertLessEqual(p["model"]["vocab_size"], 65536, name)
            self.assertEqual(p["seq"] % 2, 0, name)

    def test_tiny_preset_matches_the_brief(self):
        m = train.preset("qwen3-tiny")["model"]
        self.assertEqual((m["num_hidden_layers"], m["hidden_size"], m["num_attention_heads"],
                          m["head_dim"], m["num_key_value_heads"], m["num_experts"],
                          m["num_experts_per_tok"], m["moe_intermediate_size"], m["vocab_size"]),
                         (4, 256, 4, 64, 2, 8, 2, 128, 4096))
        self.assertIn("rope_theta", m["rope_scaling"])
        self.assertEqual(train.num_chunks(16, 2, 1, 1), 8)

    def test_dsv2_preset_has_a_dense_first_layer(self):
        m = train.preset("dsv2-tiny")["model"]
        self.assertEqual(m["first_k_dense_replace"], 1)
        self.assertEqual(m["hidden_size"] % m["num_attention_heads"], 0)

    def test_parse_steps(self):
        self.assertEqual(train.parse_steps("0,2"), {0, 2})
        self.assertEqual(train.parse_steps(""), set())


if __name__ == "__main__":
    unittest.main()
