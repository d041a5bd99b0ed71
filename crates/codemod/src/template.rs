//! The Python that memprints inserts. It lives in `templates/*.py`, one file per instrumentation
//! group, as readable Python that a reviewer can diff; this module embeds the files and fills
//! them in.
//!
//! A template file is a header of `#` comments, then named sections:
//!
//! ```text
//! # Group 3: ...                         <- header: what the group adds, and where
//! # placeholders: RANKS LABEL            <- the words `fill` replaces (or `none`)
//!
//! # block: probe                         <- a block: statements inserted as they are
//! _setup_mem("LABEL")
//!
//! # fragment: experts_parameter          <- a fragment: a piece of one statement
//! _do_mem: bool = False
//! ```
//!
//! A section runs to the next section line; its trailing blank lines are not part of it. Blocks
//! are parsed once (see [`crate::instrument::vocabulary`]) so that what `remove` and `status`
//! recognise is read off the same text `add` inserts. A placeholder is one of the header's
//! declared UPPER_CASE words, replaced by [`fill`].

/// One template file, embedded at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateFile {
    name: &'static str,
    text: &'static str,
}

macro_rules! templates {
    ($($(#[$doc:meta])* $ident:ident => $file:literal,)*) => {
        $(
            $(#[$doc])*
            pub const $ident: TemplateFile = TemplateFile {
                name: $file,
                text: include_str!(concat!("../templates/", $file)),
            };
        )*
        /// Every template file.
        pub const ALL: &[TemplateFile] = &[$($ident),*];
    };
}

templates! {
    /// Group 1A: `_mem_gb`, `_mem_detail` and the `memory_profiling` flag (dualpipev.py).
    PIPELINE_HELPERS => "pipeline_helpers.py",
    /// Group 1B: the per-layer flag, `_SavedTensorsProfiler` and `_lmem` (execution.py).
    LAYER_HELPERS => "layer_helpers.py",
    /// Group 1C: `_setup_mem` (training.py).
    SETUP_HELPERS => "setup_helpers.py",
    /// Group 2: CUDA context, NCCL and device-mesh probes (distributed.py).
    DISTRIBUTED => "distributed.py",
    /// Group 3: model set-up probes (training.py).
    SETUP => "setup.py",
    /// Group 4: the pipeline schedule's prints (dualpipev.py).
    PIPELINE => "pipeline.py",
    /// Group 5A: per-stage probes and saved-tensor profiles in `layer_forward` (execution.py).
    LAYER_FORWARD => "layer_forward.py",
    /// Groups 5B-5E: probes inside the model file.
    LAYER_INTERNALS => "layer_internals.py",
    /// Group 6: the checkpoint-load print (pretrain_lm.py).
    CHECKPOINT => "checkpoint.py",
    /// Group 7: the first-step memory snapshot (pretrain_lm.py).
    SNAPSHOT => "snapshot.py",
}

/// Whether a section is a block of statements or a fragment of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionKind {
    /// `# block: NAME`: whole statements.
    Block,
    /// `# fragment: NAME`: a piece of a statement (a parameter, an argument, a label field).
    Fragment,
}

/// One named section of a template file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// The section's name.
    pub name: &'static str,
    /// Block or fragment.
    pub kind: SectionKind,
    /// Its text, without the section line and trailing blank lines; no final newline.
    pub text: &'static str,
}

const BLOCK: &str = "# block: ";
const FRAGMENT: &str = "# fragment: ";
const PLACEHOLDERS: &str = "# placeholders:";

impl TemplateFile {
    /// The file name, e.g. `pipeline.py`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Every section, in file order.
    pub fn sections(&self) -> impl Iterator<Item = Section> + 'static {
        let text = self.text;
        let mut starts: Vec<(usize, SectionKind, &'static str)> = Vec::new();
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let bare = line.trim_end();
            if let Some(name) = bare.strip_prefix(BLOCK) {
                starts.push((offset, SectionKind::Block, name));
            } else if let Some(name) = bare.strip_prefix(FRAGMENT) {
                starts.push((offset, SectionKind::Fragment, name));
            }
            offset += line.len();
        }
        let ends: Vec<usize> = starts
            .iter()
            .skip(1)
            .map(|&(start, _, _)| start)
            .chain([text.len()])
            .collect();
        starts
            .into_iter()
            .zip(ends)
            .map(move |((start, kind, name), end)| {
                let body_start = text[start..].find('\n').map_or(end, |i| start + i + 1);
                Section {
                    name,
                    kind,
                    text: text[body_start.min(end)..end].trim_end_matches('\n'),
                }
            })
    }

    /// The blocks, in file order.
    pub fn blocks(&self) -> impl Iterator<Item = Section> + 'static {
        self.sections().filter(|s| s.kind == SectionKind::Block)
    }

    fn section(&self, kind: SectionKind, name: &str) -> &'static str {
        self.sections()
            .find(|s| s.kind == kind && s.name == name)
            .unwrap_or_else(|| panic!("template {} has no {kind:?} `{name}`", self.name))
            .text
    }

    /// The text of block `name`.
    ///
    /// Panics when there is no such block: templates are part of the binary, so a missing block
    /// is a programming error that every test run catches.
    pub fn block(&self, name: &str) -> &'static str {
        self.section(SectionKind::Block, name)
    }

    /// The text of fragment `name` (panics like [`Self::block`]).
    pub fn fragment(&self, name: &str) -> &'static str {
        self.section(SectionKind::Fragment, name)
    }

    /// The placeholder words the header declares (`# placeholders: A B`; `none` for none).
    pub fn placeholders(&self) -> impl Iterator<Item = &'static str> + 'static {
        self.text
            .lines()
            .take_while(|line| !line.starts_with(BLOCK) && !line.starts_with(FRAGMENT))
            .find_map(|line| line.strip_prefix(PLACEHOLDERS))
            .unwrap_or_else(|| panic!("template {} declares no `# placeholders:`", self.name))
            .split_whitespace()
            .filter(|word| *word != "none")
    }

    /// True when `word` is one of the declared placeholders.
    pub fn is_placeholder(&self, word: &str) -> bool {
        self.placeholders().any(|p| p == word)
    }

    /// Block (or fragment) `name` with `values` filled in (see [`fill`]).
    ///
    /// Panics when a value names a word the header does not declare, so a template and the
    /// code filling it cannot drift apart unnoticed.
    pub fn fill(&self, name: &str, values: &[(&str, &str)]) -> String {
        for (key, _) in values {
            assert!(
                self.is_placeholder(key),
                "template {} does not declare the placeholder {key}",
                self.name
            );
        }
        let text = self
            .sections()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("template {} has no section `{name}`", self.name))
            .text;
        fill(text, values)
    }
}

/// Replaces each placeholder word in `text` with its value.
///
/// A placeholder is a whole word (not part of a longer identifier) that `values` names. One
/// alone on its line is replaced by every line of its value, each indented like the placeholder
/// (this is how a wrapped statement is carried over); an empty value removes that line. Elsewhere
/// the value is spliced in as it is. Values are never searched for placeholders themselves.
///
/// ```
/// use memprints_codemod::template::fill;
///
/// assert_eq!(fill("if CTX.rank in RANKS:", &[("CTX", "ctx"), ("RANKS", "{0}")]), "if ctx.rank in {0}:");
/// assert_eq!(fill("try:\n    STATEMENT\nexcept E:", &[("STATEMENT", "a = f(\n    1,\n)")]),
///            "try:\n    a = f(\n        1,\n    )\nexcept E:");
/// assert_eq!(fill("a\nSET_DEVICE\nb", &[("SET_DEVICE", "")]), "a\nb");
/// ```
pub fn fill(text: &str, values: &[(&str, &str)]) -> String {
    let lookup = |word: &str| values.iter().find(|(key, _)| *key == word).map(|(_, v)| *v);
    let mut lines: Vec<String> = Vec::new();
    for line in text.split('\n') {
        let trimmed = line.trim_start();
        if let Some(value) = lookup(trimmed) {
            if !value.is_empty() {
                lines.push(memprints_python::text::indent(
                    value,
                    memprints_python::text::leading_whitespace(line),
                ));
            }
            continue;
        }
        let mut out = String::with_capacity(line.len());
        replace_words(line, &lookup, &mut out);
        lines.push(out);
    }
    lines.join("\n")
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
            match lookup(word) {
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

/// Whole words of `text` that `is_placeholder` accepts, in order (with repeats).
pub fn placeholder_words(
    text: &str,
    is_placeholder: impl Fn(&str) -> bool,
) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(move |word| !word.is_empty() && is_placeholder(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_replaced_only_when_whole() {
        let out = fill(
            "if CTX.rank in RANKS:\n    RANKS_X = 1",
            &[("CTX", "distributed"), ("RANKS", "{0}")],
        );
        assert_eq!(out, "if distributed.rank in {0}:\n    RANKS_X = 1");
    }

    #[test]
    fn values_are_not_filled_again() {
        assert_eq!(
            fill("LABEL", &[("LABEL", "RANKS"), ("RANKS", "{0}")]),
            "RANKS"
        );
    }

    #[test]
    fn an_empty_value_alone_on_its_line_removes_the_line() {
        assert_eq!(fill("a\n    X\nb", &[("X", "")]), "a\nb");
        assert_eq!(fill("a X b", &[("X", "")]), "a  b");
    }

    #[test]
    fn every_template_declares_its_placeholders_and_has_blocks() {
        for template in ALL {
            let _ = template.placeholders().count();
            assert!(template.blocks().count() > 0, "{}", template.name());
            for section in template.sections() {
                assert!(
                    !section.text.is_empty(),
                    "{}: empty {}",
                    template.name(),
                    section.name
                );
                assert!(!section.text.starts_with('\n'), "{}", section.name);
            }
        }
    }

    #[test]
    fn sections_end_before_the_next_section_and_lose_trailing_blank_lines() {
        let probe = SETUP_HELPERS.block("module_helpers");
        assert!(probe.starts_with("def _setup_mem(label: str) -> None:"));
        assert!(probe.ends_with("flush=True,\n        )"));
        assert_eq!(
            LAYER_INTERNALS.fragment("experts_parameter"),
            "_do_mem: bool = False"
        );
    }

    #[test]
    #[should_panic(expected = "does not declare the placeholder NOPE")]
    fn filling_an_undeclared_word_is_a_programming_error() {
        SETUP.fill("before_model_creation", &[("NOPE", "x")]);
    }
}
