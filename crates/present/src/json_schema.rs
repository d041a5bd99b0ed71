//! The JSON Schemas of memprints' JSON outputs, generated from the serde types that write them:
//! `schemars` reads their `serde` attributes (`rename_all`, `skip_serializing_if`, `flatten`,
//! `Option` as nullable) and turns their doc comments into descriptions. The files under
//! `schema/` are these schemas pretty-printed; `tests/schema_generated.rs` keeps them in step.
//!
//! Contract: draft 2020-12, definitions under `$defs` named after the types; every object the
//! types write is closed (`additionalProperties: false`), maps excepted, so a field the schema
//! does not name fails validation; descriptions are the doc comments as a JSON reader reads
//! them: rustdoc links (``[`Report`]``) become code spans and `` `None` `` is `null`.

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{Schema, SchemaGenerator};

/// Where the schemas are published; a schema's `$id` is this and its file name.
const ID_BASE: &str = "https://github.com/memprints/memprints/schema/";

/// A generator with memprints' settings (see the module doc): the schema of what the types
/// serialise (a `skip_serializing_if` field is optional), not of what they would accept.
pub(crate) fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(close_objects))
        .with_transform(RecursiveTransform(for_json_readers))
        .into_generator()
}

/// `root` with the document's own keys: `$id` from `file`, its `title` and `description`
/// (which replace what the root type's name and doc comment gave).
pub(crate) fn document(mut root: Schema, file: &str, title: &str, description: &str) -> Schema {
    root.insert("$id".into(), format!("{ID_BASE}{file}").into());
    root.insert("title".into(), title.into());
    root.insert("description".into(), description.into());
    root
}

/// Structs are closed: serde writes exactly their fields. A map (`additionalProperties` set to
/// its values' schema) is left open.
fn close_objects(schema: &mut Schema) {
    if schema.get("properties").is_some() && schema.get("additionalProperties").is_none() {
        schema.insert("additionalProperties".into(), false.into());
    }
}

/// A doc comment's description as a JSON reader reads it: ``[`X`]`` and ``[`X`](path)`` are
/// rustdoc links, seen as `` `X` ``; `` `None` `` is a Rust `Option`'s, `null` in JSON.
fn for_json_readers(schema: &mut Schema) {
    let Some(text) = schema.get("description").and_then(|d| d.as_str()) else {
        return;
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else {
            break;
        };
        let end = start + 2 + len;
        out.push_str(&rest[..start]);
        out.push_str(&rest[start + 1..end + 1]);
        rest = &rest[end + 2..];
        if rest.starts_with('(')
            && let Some(close) = rest.find(')')
        {
            rest = &rest[close + 1..];
        }
    }
    out.push_str(rest);
    let out = unwrap_lines(&out).replace("`None`", "null");
    schema.insert("description".into(), out.into());
}

/// A doc comment's lines joined into paragraphs: a single line break is where the comment was
/// wrapped, a blank line ends a paragraph.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.split('\n').collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(text: &str) -> String {
        let mut schema = schemars::json_schema!({ "description": text });
        for_json_readers(&mut schema);
        schema
            .get("description")
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn doc_links_become_code_spans() {
        assert_eq!(described("See [`Report`]."), "See `Report`.");
        assert_eq!(
            described("As [`LayerProbe::change`](super::LayerProbe), [`x`]"),
            "As `LayerProbe::change`, `x`"
        );
    }

    #[test]
    fn wrapped_lines_are_one_paragraph() {
        assert_eq!(described("one\ntwo\n\nthree"), "one two\n\nthree");
    }

    #[test]
    fn none_is_null() {
        assert_eq!(described("`None` when absent."), "null when absent.");
    }

    #[test]
    fn text_without_links_is_left_alone() {
        assert_eq!(described("`a` [b] [`c"), "`a` [b] [`c");
    }
}
