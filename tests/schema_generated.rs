//! `schema/*.schema.json` are generated from the serde types that write the JSON
//! (`memprints_present::report::json::schema`, `memprints_present::snapshot::json::schema`):
//! this test fails, with the difference, when a committed file is not what the types generate
//! now, and `UPDATE_SCHEMAS=1` writes the generated one instead.

mod support;

use similar::TextDiff;

const REGENERATE: &str = "UPDATE_SCHEMAS=1 cargo test --test schema_generated";

/// Compares `schema/<file>` with `schema`, pretty-printed with a trailing newline.
fn assert_committed(file: &str, schema: &impl serde::Serialize) {
    let path = support::root().join("schema").join(file);
    let mut generated = serde_json::to_string_pretty(schema).expect("a schema is JSON");
    generated.push('\n');
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).expect("write the schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let diff = TextDiff::from_lines(&committed, &generated)
            .unified_diff()
            .context_radius(3)
            .header(
                &format!("schema/{file} (committed)"),
                "generated from the types",
            )
            .to_string();
        panic!(
            "schema/{file} is not what the types generate; regenerate it with `{REGENERATE}`\n{diff}"
        );
    }
}

#[test]
fn the_report_schema_is_generated_from_the_report_types() {
    assert_committed(
        "report.schema.json",
        &memprints_present::report::json::schema(),
    );
}

#[test]
fn the_snapshot_schema_is_generated_from_the_snapshot_json_types() {
    assert_committed(
        "snapshot.schema.json",
        &memprints_present::snapshot::json::schema(),
    );
}
