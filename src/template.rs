//! The Python snippets memprints inserts. They live in `templates/*.py` as readable, lintable
//! Python, split into named blocks by `# block: NAME` lines, and are rendered here by replacing
//! UPPER_CASE placeholder words with the values adapted to the code in front of us.

/// One template file, embedded at compile time.
#[derive(Debug, Clone, Copy)]
pub struct TemplateFile {
    name: &'static str,
    text: &'static str,
}

macro_rules! template {
    ($ident:ident, $file:literal) => {
        pub const $ident: TemplateFile = TemplateFile {
            name: $file,
            text: include_str!(concat!("../templates/", $file)),
        };
    };
}

template!(HELPERS_PIPELINE, "helpers_pipeline.py");
template!(HELPERS_LAYER, "helpers_layer.py");
template!(HELPERS_SETUP, "helpers_setup.py");
template!(DISTRIBUTED, "distributed.py");
template!(SETUP, "setup.py");
template!(PIPELINE, "pipeline.py");
template!(LAYER_FORWARD, "layer_forward.py");
template!(MODEL, "model.py");
template!(CHECKPOINT, "checkpoint.py");
template!(SNAPSHOT, "snapshot.py");

impl TemplateFile {
    /// The text of block `name`, without its marker line and trailing blank lines.
    ///
    /// Panics when the block does not exist: templates are part of the binary, so a missing
    /// block is a programming error that every test run catches.
    pub fn block(&self, name: &str) -> &'static str {
        let marker = format!("# block: {name}\n");
        let start = self
            .text
            .find(&marker)
            .unwrap_or_else(|| panic!("template {} has no block {name}", self.name))
            + marker.len();
        let rest = &self.text[start..];
        let end = rest.find("\n# block: ").map_or(rest.len(), |i| i + 1);
        rest[..end].trim_end_matches('\n')
    }

    /// Renders block `name` with `values` (see [`render`]).
    pub fn render(&self, name: &str, values: &[(&str, &str)]) -> String {
        render(self.block(name), values)
    }
}

/// Replaces each placeholder word in `block` with its value.
///
/// A placeholder is a maximal run of `[A-Z_]` characters not touching other identifier
/// characters. A placeholder that is alone on its line is replaced by every line of its value, each
/// indented like the placeholder was (this is how a wrapped statement is carried over); elsewhere
/// the value is spliced in as it is. Values are never searched for placeholders themselves.
pub fn render(block: &str, values: &[(&str, &str)]) -> String {
    let lookup = |word: &str| values.iter().find(|(key, _)| *key == word).map(|(_, v)| *v);
    let mut out = String::with_capacity(block.len() + 64);
    for (i, line) in block.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let trimmed = line.trim_start();
        if let Some(value) = lookup(trimmed) {
            let indent = &line[..line.len() - trimmed.len()];
            for (j, value_line) in value.split('\n').enumerate() {
                if j > 0 {
                    out.push('\n');
                }
                if !value_line.is_empty() {
                    out.push_str(indent);
                }
                out.push_str(value_line);
            }
            continue;
        }
        replace_words(line, &lookup, &mut out);
    }
    out
}

fn replace_words<'a>(line: &str, lookup: &impl Fn(&str) -> Option<&'a str>, out: &mut String) {
    let bytes = line.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let word = &line[start..i];
            let is_placeholder = word.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
            match lookup(word).filter(|_| is_placeholder) {
                Some(value) => out.push_str(value),
                None => out.push_str(word),
            }
        } else {
            let ch = line[i..]
                .chars()
                .next()
                .expect("index is on a char boundary");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
}

/// Indents every non-empty line of `text` by `indent`.
pub fn indent(text: &str, indent: &str) -> String {
    text.split('\n')
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{indent}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Removes `width` columns of leading whitespace from every line (lines with less lose all).
pub fn dedent(text: &str, width: usize) -> String {
    text.split('\n')
        .map(|line| {
            let strip = line.len() - line.trim_start_matches(' ').len();
            &line[strip.min(width)..]
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_replaced_only_when_whole() {
        let out = render(
            "if CTX.rank in RANKS:\n    RANKS_X = 1",
            &[("CTX", "distributed"), ("RANKS", "{0}")],
        );
        assert_eq!(out, "if distributed.rank in {0}:\n    RANKS_X = 1");
    }

    #[test]
    fn a_placeholder_alone_on_its_line_carries_every_line_of_its_value() {
        let out = render(
            "try:\n    STATEMENT\nexcept E:",
            &[("STATEMENT", "a = f(\n    1,\n)")],
        );
        assert_eq!(out, "try:\n    a = f(\n        1,\n    )\nexcept E:");
    }

    #[test]
    fn values_are_not_rendered_again() {
        assert_eq!(
            render("LABEL", &[("LABEL", "RANKS"), ("RANKS", "{0}")]),
            "RANKS"
        );
    }

    #[test]
    fn every_block_named_by_the_instrumentation_exists() {
        assert!(
            PIPELINE
                .block("before_pipeline")
                .starts_with("_profiling = ")
        );
        assert!(
            HELPERS_LAYER
                .block("module_helpers")
                .ends_with("flush=True)")
        );
        assert_eq!(SETUP.block("probe"), "_setup_mem(\"LABEL\")");
    }

    #[test]
    fn dedent_and_indent_are_inverse_on_indented_text() {
        let text = "    a\n\n        b";
        assert_eq!(indent(&dedent(text, 4), "    "), text);
    }
}
