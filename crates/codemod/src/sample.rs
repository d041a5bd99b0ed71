//! The embedded sample: a small PithTrain look-alike of our own (the test fixture
//! `tests/fixtures/minitrain`), so `memprints demo` shows the whole job without a checkout.

use std::path::Path;

use crate::error::{Error, Result};

/// Every file of the sample tree: (path relative to its root, contents).
pub const FILES: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../../tests/fixtures/minitrain/README.md"),
    ),
    (
        "examples/pretrain_lm/layered/config.json",
        include_str!("../../../tests/fixtures/minitrain/examples/pretrain_lm/layered/config.json"),
    ),
    (
        "examples/pretrain_lm/tiny/config.json",
        include_str!("../../../tests/fixtures/minitrain/examples/pretrain_lm/tiny/config.json"),
    ),
    (
        "examples/pretrain_lm/tiny/script.py",
        include_str!("../../../tests/fixtures/minitrain/examples/pretrain_lm/tiny/script.py"),
    ),
    (
        "pithtrain/__init__.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/__init__.py"),
    ),
    (
        "pithtrain/contexts/__init__.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/contexts/__init__.py"),
    ),
    (
        "pithtrain/dualpipe/__init__.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/dualpipe/__init__.py"),
    ),
    (
        "pithtrain/dualpipe/dualpipev.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/dualpipe/dualpipev.py"),
    ),
    (
        "pithtrain/dualpipe/execution.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/dualpipe/execution.py"),
    ),
    (
        "pithtrain/models/__init__.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/models/__init__.py"),
    ),
    (
        "pithtrain/models/biased_moe.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/models/biased_moe.py"),
    ),
    (
        "pithtrain/models/fused_moe.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/models/fused_moe.py"),
    ),
    (
        "pithtrain/models/interface.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/models/interface.py"),
    ),
    (
        "pithtrain/models/layered_moe.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/models/layered_moe.py"),
    ),
    (
        "pithtrain/models/tiny_moe.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/models/tiny_moe.py"),
    ),
    (
        "pithtrain/modules/__init__.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/modules/__init__.py"),
    ),
    (
        "pithtrain/modules/distributed.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/modules/distributed.py"),
    ),
    (
        "pithtrain/modules/training.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/modules/training.py"),
    ),
    (
        "pithtrain/ops.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/ops.py"),
    ),
    (
        "pithtrain/tasks/__init__.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/tasks/__init__.py"),
    ),
    (
        "pithtrain/tasks/pretrain_lm.py",
        include_str!("../../../tests/fixtures/minitrain/pithtrain/tasks/pretrain_lm.py"),
    ),
    (
        "pyproject.toml",
        include_str!("../../../tests/fixtures/minitrain/pyproject.toml"),
    ),
];

/// Writes the sample tree under `root`.
pub fn write(root: &Path) -> Result<()> {
    for (rel, text) in FILES {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}
