//! The checks every group's tests run, LibCST-codemod style:
//!
//! - [`check_group`]: a small hand-written "before" file; `add` of the one group gives the
//!   snapshotted "after"; `strip(after)` is "before" to the byte; `status` finds each marker
//!   block the number of times the group says it places it; and the same file with `\r\n` line
//!   ends gives the same result with `\r\n` line ends, and strips back too.
//! - [`check_blocks`]: every block of the group's template, filled with sample values and put
//!   in a host file, is taken out again by `strip` (down to the user code a wrapper or split
//!   carries), and its signature is found exactly once: a template statement that `strip` or
//!   `status` does not recognise fails the test named after the group.

use ruff_python_ast::{Expr, Stmt};

use super::group::Group;
use super::vocabulary::Vocabulary;
use crate::params::Params;
use crate::template::Section;
use memprints_python::PySource;
use memprints_python::edit::format::FormatSettings;

/// PithTrain's formatter settings (line length 100).
pub fn settings() -> FormatSettings {
    FormatSettings {
        line_width: 100,
        ..FormatSettings::default()
    }
}

/// The parameters the snippet tests use.
pub fn params() -> Params {
    Params {
        ranks: vec![0, 3],
        detail_layers: vec![0, 1],
        snapshot_dir: "/tmp/snaps".into(),
    }
}

/// Adds `group` to `before`, snapshots the result as `name`, and checks that it strips back to
/// `before` and that status counts every marker.
pub fn check_group(group: &Group, before: &str, name: &str) {
    let settings = settings();
    let src = PySource::parse("before.py", before.to_string()).expect("the snippet parses");
    let after = super::add::plan_group(group, &src, &settings, &params())
        .unwrap_or_else(|e| panic!("group {}: {e}", group.id));
    insta::with_settings!({
        prepend_module_to_snapshot => false,
        description => format!("group {} added to a snippet: {}", group.id, group.summary),
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, after);
    });

    let parsed = PySource::parse("after.py", after.clone()).expect("the result parses");
    if settings.format_module(before).as_deref() == Ok(before) {
        assert_eq!(
            settings.format_module(&after).as_deref(),
            Ok(after.as_str()),
            "group {}: the result is not ruff-stable",
            group.id
        );
    }
    let stripped = super::strip::strip(&parsed, &settings).expect("strip");
    assert_eq!(
        stripped, before,
        "group {}: strip(add(before)) != before",
        group.id
    );

    let crlf = before.replace('\n', "\r\n");
    let src = PySource::parse("before.py", crlf.clone()).expect("the snippet parses");
    let after_crlf = super::add::plan_group(group, &src, &settings, &params())
        .unwrap_or_else(|e| panic!("group {} on \\r\\n: {e}", group.id));
    assert_eq!(
        after_crlf,
        after.replace('\n', "\r\n"),
        "group {}: a file with \\r\\n line ends gets different code",
        group.id
    );
    let parsed = PySource::parse("after.py", after_crlf).expect("the result parses");
    let stripped = super::strip::strip(&parsed, &settings).expect("strip");
    assert_eq!(stripped, crlf, "group {}: strip on \\r\\n", group.id);

    let vocabulary = Vocabulary::get();
    for marker in group.markers {
        assert_eq!(
            vocabulary.count(group.template, marker.block, &after),
            marker.times,
            "group {}: marker `{}`",
            group.id,
            marker.block
        );
        assert_eq!(
            vocabulary.count(group.template, marker.block, before),
            0,
            "group {}: marker `{}` found before add",
            group.id,
            marker.block
        );
    }
}

/// A sample value for every placeholder, and what of it survives `strip`.
fn sample(placeholder: &str) -> &'static str {
    match placeholder {
        "RANKS" => "{0, 3}",
        "DETAIL_LAYERS" => "(0, 1)",
        "CTX" => "distributed",
        "LAYER" => "block",
        "STAGE" => "stage1",
        "STATEMENT" => "y = step(x)",
        "SET_DEVICE" => "",
        "OPTIMIZERS" => "optimizers",
        "STEP" => "training.step",
        "PROFILER_START" => "None",
        "SNAPSHOT_DIR" => "/tmp/snaps",
        "DISPATCH" | "GATHERED" | "SCATTERED" | "OUTS" | "NAME" => "tokens",
        "EXPR" => "f(x)",
        "SHAPES" => "x={tuple(x.shape)}",
        "INNER" => "act(x)",
        "OPERATION" | "INNER_OPERATION" | "OUTER_OPERATION" => "act",
        "OUTER" => "down(gu)",
        other => panic!("no sample value for placeholder {other}: add one to testing.rs"),
    }
}

/// The user code a block carries, which `strip` must leave in its place.
fn residue(block: &Section, is_placeholder: &dyn Fn(&str) -> bool) -> Vec<String> {
    let module = ruff_python_parser::parse_module(block.text)
        .expect("a block parses")
        .into_syntax();
    let vocabulary = Vocabulary::get();
    let carrier = |stmts: &[Stmt]| match stmts {
        [Stmt::Expr(e)] => match &*e.value {
            Expr::Name(n) if is_placeholder(n.id.as_str()) => Some(sample(n.id.as_str())),
            _ => None,
        },
        _ => None,
    };
    let mut kept = Vec::new();
    for stmt in &module.body {
        let carried = match stmt {
            Stmt::Try(t) => carrier(&t.body).map(str::to_string),
            Stmt::If(i) => i
                .elif_else_clauses
                .last()
                .and_then(|c| carrier(&c.body))
                .map(str::to_string),
            Stmt::Return(r) => match r.value.as_deref() {
                Some(Expr::Name(n)) if vocabulary.split_names.iter().any(|s| *s == n.id) => {
                    Some(format!("return {}", sample("EXPR")))
                }
                Some(Expr::Name(n)) if vocabulary.nested_splits.iter().any(|(_, o)| *o == n.id) => {
                    Some("return down(act(x))".to_string())
                }
                _ => None,
            },
            _ => None,
        };
        kept.extend(carried.filter(|c| !c.is_empty()));
    }
    kept
}

/// Checks that `strip` takes every block of `group`'s template out of a host file and that
/// `status` finds each block that has a signature exactly once.
pub fn check_blocks(group: &Group) {
    let settings = settings();
    let template = group.template;
    let vocabulary = Vocabulary::get();
    for block in template.blocks() {
        let is_placeholder = |w: &str| template.is_placeholder(w);
        let values: Vec<(&str, &str)> = template.placeholders().map(|p| (p, sample(p))).collect();
        let filled = template.fill(block.name, &values);
        if filled.lines().all(|l| l.starts_with('#')) {
            // A marker left where a statement moved from: only meaningful with the move, which
            // the group's snippet test covers.
            continue;
        }
        let module_level = filled
            .lines()
            .any(|l| l.starts_with("def ") || l.starts_with("class "))
            || vocabulary.optional_imports.iter().any(|i| i.text == filled);
        let kept = residue(&block, &is_placeholder);
        let (host, expected) = if module_level {
            let tail = "def user():\n    return 1\n";
            (
                format!("import torch\n\n\n{filled}\n\n\n{tail}"),
                format!("import torch\n\n\n{tail}"),
            )
        } else {
            let head = "import torch\n\n\ndef host(self, x):\n    x = x + 1\n";
            let mut expected = head.to_string();
            for line in &kept {
                expected.push_str(&memprints_python::text::indent(line, "    "));
                expected.push('\n');
            }
            (
                format!(
                    "{head}{}\n",
                    memprints_python::text::indent(&filled, "    ")
                ),
                expected,
            )
        };
        let src = PySource::parse("host.py", host.clone())
            .unwrap_or_else(|e| panic!("group {}: block `{}`: {e}\n{host}", group.id, block.name));
        let stripped = super::strip::strip(&src, &settings).expect("strip");
        assert_eq!(
            stripped,
            expected,
            "group {}: block `{}` of {} is not taken out by strip:\n{host}",
            group.id,
            block.name,
            template.name()
        );
        if vocabulary.signature(template, block.name).is_some() {
            assert_eq!(
                vocabulary.count(template, block.name, &host),
                1,
                "group {}: block `{}` is not counted once by its signature",
                group.id,
                block.name
            );
        }
    }
}
