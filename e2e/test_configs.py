"""Our tiny Hugging Face configs against the presets and against PithTrain's model classes.

Every ``config.<field>`` that PithTrain's model module for the config's model_type reads must be
in our config.json (transformers fills defaults for missing fields, which would then size the
tiny model silently), except the fields listed in NOT_NEEDED with the reason. The PithTrain
export is only read (PT_SRC, default /work/pt); the tests that need it are skipped without it.

Run: python3 -m unittest discover -s e2e
"""

import ast
import json
import os
import unittest
from pathlib import Path

import train

PT = Path(os.environ.get("PT_SRC", "/work/pt"))
# field -> why our config may leave it out
NOT_NEEDED = {
    "initial_context_length": "read only for rope_type yarn; our configs use rope_type default",
    "max_position_embeddings": "setup_model overwrites it with the sequence length",
}


def config_reads(module_source):
    """Names of the attributes read from a variable named `config` in a model module."""
    return {n.attr for n in ast.walk(ast.parse(module_source))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "config"}


class PresetTest(unittest.TestCase):
    def test_every_preset_fits_the_harness(self):
        for name in train.PRESETS:
            with self.subTest(name):
                p = train.preset(name)
                self.assertLessEqual(p["model"]["vocab_size"], 65536, "uint16 dataset")
                for pp in (1, p["pp"]):
                    self.assertGreaterEqual(train.num_chunks(p["gb"], p["mb"], 1, 1), 2 * pp)
                self.assertEqual(p["seq"] % 2, 0)

    def test_gpt_oss_tiny_is_what_gpu_md_ran(self):
        p = train.preset("gpt-oss-tiny")
        m = p["model"]
        self.assertEqual(m["model_type"], "gpt_oss")
        self.assertEqual(m["num_hidden_layers"], 4)
        self.assertEqual(m["layer_types"], ["sliding_attention", "full_attention"] * 2)
        self.assertLess(m["sliding_window"], p["seq"])
        self.assertIs(m["attention_bias"], True)
        self.assertEqual(m["swiglu_limit"], 7.0)
        self.assertEqual((m["num_local_experts"], m["num_experts_per_tok"]), (8, 2))
        self.assertEqual(m["vocab_size"], 4096)
        self.assertEqual(m["rope_scaling"]["rope_type"], "default")


@unittest.skipUnless((PT / "pithtrain" / "models").is_dir(), "no PithTrain export at PT_SRC")
class PithTrainFieldsTest(unittest.TestCase):
    def test_every_field_the_model_class_reads_is_set(self):
        for name in train.PRESETS:
            with self.subTest(name):
                model = train.preset(name)["model"]
                module = PT / "pithtrain" / "models" / (model["model_type"] + ".py")
                reads = config_reads(module.read_text())
                self.assertIn("hidden_size", reads)
                missing = sorted(reads - set(model) - set(NOT_NEEDED))
                self.assertEqual(missing, [], "%s: PithTrain reads these" % module)

    def test_the_example_config_holds_our_field_names(self):
        example = json.loads(
            (PT / "examples/pretrain_lm/gpt-oss-20b/config.json").read_text())
        ours = train.preset("gpt-oss-tiny")["model"]
        self.assertEqual(sorted(set(example) - set(ours)), [])


if __name__ == "__main__":
    unittest.main()
