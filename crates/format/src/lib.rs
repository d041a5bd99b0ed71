#![doc = include_str!("../README.md")]

mod spec;

pub use spec::SHAPES;

/// What a figure of a print counts, and how it is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// GiB (`bytes / 1024**3`), printed with two decimals (`{x:.2f}`); a reader takes it back
    /// to bytes as `round(x × 1024³)`, half away from zero.
    GiB,
    /// MiB (`bytes / 1024**2`), printed `{x:.1f} MB`: PyTorch's and the skill's "MB".
    MiB,
    /// An exact byte count, printed as an integer.
    Bytes,
    /// A count (iterations, tensors, parameter entries), printed as an integer.
    Count,
    /// An index (rank, pipeline stage, loop index, layer, training step), printed as an integer.
    Index,
    /// Text: a tensor shape, a dtype, a name or a path, printed as it is.
    Text,
}

/// One figure or piece of text a print carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Its placeholder name in [`Shape::text`].
    pub name: &'static str,
    /// What it counts.
    pub unit: Unit,
    /// What it is, in a few words.
    pub meaning: &'static str,
}

impl Field {
    const fn new(name: &'static str, unit: Unit, meaning: &'static str) -> Self {
        Field {
            name,
            unit,
            meaning,
        }
    }
}

/// Which kind of line a print is: one for each event the log reader makes of a print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `[rank=R] setup_model | LABEL: alloc=… cached=… non-pt=…` (`_setup_mem`).
    Setup,
    /// `[rank=R] init_process_group | …`.
    ProcessGroup,
    /// `[rank=R] init_device_mesh | …`.
    DeviceMesh,
    /// `[rank=R] load_ckpt | …`.
    CheckpointLoad,
    /// `[rank=R pp=P] …`: a point of DualPipeV's schedule.
    Pipeline,
    /// `[rank=R]   LABEL: alloc=X` (`_lmem`).
    Probe,
    /// `[rank=R] layerN stageK saved tensors:`.
    SavedHeader,
    /// `[rank=R]     saved (activ|weight): …`.
    SavedTensor,
    /// `[rank=R]   activ=… weight=… total=N tensors`.
    SavedSummary,
    /// `[rank=R] Memory snapshot saved to PATH`.
    Snapshot,
}

/// One line the instrumentation prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Its name, unique; a pipeline print's is the log reader's name of its schedule point.
    pub name: &'static str,
    /// What kind of line it is.
    pub kind: Kind,
    /// The skill's group whose `add` places it (`2`, `3`, `4`, `5A`, `5B-5E`, `6`, `7`).
    pub group: &'static str,
    /// The line as a Python format string: literal text and `{name:spec}` placeholders, one
    /// per [`Field`], `{{` and `}}` for literal braces. A name may appear more than once.
    pub text: &'static str,
    /// The fields, in the order their names first appear in `text`.
    pub fields: &'static [Field],
    /// The part of `text` a reader keeps as text: the label of `_setup_mem` and `_lmem`, the
    /// snapshot's path.
    pub label: Option<&'static str>,
    /// How `add` lists the print under "log labels you will see" (several prints may share
    /// one entry); `None` when it is not listed.
    pub listed: Option<&'static str>,
    /// Printed by earlier versions of the instrumentation only; readers still read it.
    pub legacy: bool,
}

/// A piece of a [`Shape::text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Literal text (`{{` already read as `{`).
    Literal(&'a str),
    /// A placeholder: the field's name and its Python format spec (`.2f`, `+.2f`, or empty).
    Field {
        /// The field's name.
        name: &'a str,
        /// The format spec after `:`, empty when there is none.
        spec: &'a str,
    },
}

/// A value to fill a field with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A size in the field's unit (GiB, MiB).
    Float(f64),
    /// A count, an index or a byte count.
    Int(i64),
    /// Text, printed as it is.
    Text(&'a str),
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

macro_rules! int_values {
    ($($t:ty),*) => {$(
        impl From<$t> for Value<'_> {
            fn from(v: $t) -> Self {
                Value::Int(i64::try_from(v).expect("an integer a print can hold"))
            }
        }
    )*};
}
int_values!(i32, i64, u32, u64, usize);

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(v)
    }
}

/// The shape named `name`.
///
/// Panics when there is none: shape names are part of the program, not input.
pub fn shape(name: &str) -> &'static Shape {
    SHAPES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("memprints-format has no shape `{name}`"))
}

/// The entries `add` lists for group `group` under "log labels you will see", in order, each
/// once.
pub fn listed(group: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for listed in SHAPES
        .iter()
        .filter(|s| s.group == group)
        .filter_map(|s| s.listed)
    {
        if !out.contains(&listed) {
            out.push(listed);
        }
    }
    out
}

/// The line `shape` prints with `values`, exactly as Python's f-string renders it.
///
/// `values` holds one value per field, in [`Shape::fields`] order. Panics when their number or
/// kind does not fit (a float for a text field, text for a `.2f`): a programming error.
///
/// ```
/// use memprints_format::{fill, shape};
///
/// assert_eq!(
///     fill(shape("device_mesh"), &[3.into(), 1.4.into(), (-0.004).into()]),
///     "[rank=3] init_device_mesh | non-pt=1.40 mesh_cost=-0.00"
/// );
/// ```
pub fn fill(shape: &Shape, values: &[Value<'_>]) -> String {
    assert_eq!(
        values.len(),
        shape.fields.len(),
        "shape {} has {} fields, given {} values",
        shape.name,
        shape.fields.len(),
        values.len()
    );
    render(shape, shape.text, values)
}

impl Shape {
    /// The pieces of [`Self::text`], in order.
    pub fn pieces(&self) -> Vec<Piece<'static>> {
        pieces(self.text)
    }

    /// The text a reader keeps of the line `values` fill ([`Self::label`]), when it keeps any.
    pub fn fill_label(&self, values: &[Value<'_>]) -> Option<String> {
        Some(render(self, self.label?, values))
    }

    /// The fields printed only for people: a size in GiB or MiB whose next figure is the same
    /// size in exact bytes (`{mb:.1f} MB, {bytes} bytes`, `{gpu_total:.2f} ({gpu_total_bytes}
    /// bytes)`). A reader keeps the bytes and need not read these.
    pub fn rounded(&self) -> Vec<&'static str> {
        let fields: Vec<&Field> = self
            .pieces()
            .into_iter()
            .filter_map(|p| match p {
                Piece::Field { name, .. } => self.fields.iter().find(|f| f.name == name),
                Piece::Literal(_) => None,
            })
            .collect();
        let mut out: Vec<&'static str> = Vec::new();
        for pair in fields.windows(2) {
            if matches!(pair[0].unit, Unit::GiB | Unit::MiB)
                && pair[1].unit == Unit::Bytes
                && !out.contains(&pair[0].name)
            {
                out.push(pair[0].name);
            }
        }
        out
    }

    /// [`Self::text`] with every placeholder reduced to its spec, `{}` or `{:.2f}`: what can be
    /// compared with an f-string whose expressions are not named like the fields.
    pub fn normalised(&self) -> String {
        normalise(&self.pieces())
    }
}

/// `pieces` as text, each field as `{}` or `{:spec}`, literal braces doubled.
pub fn normalise(pieces: &[Piece<'_>]) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Literal(text) => out.push_str(&text.replace('{', "{{").replace('}', "}}")),
            Piece::Field { spec: "", .. } => out.push_str("{}"),
            Piece::Field { spec, .. } => {
                out.push_str("{:");
                out.push_str(spec);
                out.push('}');
            }
        }
    }
    out
}

/// Splits a format string ([`Shape::text`], [`Shape::label`]) into literal text and
/// `{name:spec}` placeholders.
///
/// Panics on an unclosed `{` or a lone `}`: shape texts are part of the program.
pub fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let at = rest.find(['{', '}']).unwrap_or(rest.len());
        if at > 0 {
            out.push(Piece::Literal(&rest[..at]));
        }
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("{{") {
            out.push(Piece::Literal("{"));
            rest = after;
        } else if let Some(after) = rest.strip_prefix("}}") {
            out.push(Piece::Literal("}"));
            rest = after;
        } else if let Some(after) = rest.strip_prefix('{') {
            let end = after
                .find('}')
                .unwrap_or_else(|| panic!("unclosed `{{` in {text:?}"));
            let (name, spec) = after[..end].split_once(':').unwrap_or((&after[..end], ""));
            out.push(Piece::Field { name, spec });
            rest = &after[end + 1..];
        } else if !rest.is_empty() {
            panic!("lone `}}` in {text:?}");
        }
    }
    out
}

fn render(shape: &Shape, text: &str, values: &[Value<'_>]) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    for piece in pieces(text) {
        match piece {
            Piece::Literal(text) => out.push_str(text),
            Piece::Field { name, spec } => {
                let at = shape
                    .fields
                    .iter()
                    .position(|f| f.name == name)
                    .unwrap_or_else(|| panic!("shape {} has no field {name}", shape.name));
                python_format(&mut out, values[at], spec)
                    .unwrap_or_else(|why| panic!("shape {} field {name}: {why}", shape.name));
            }
        }
    }
    out
}

/// `format(value, spec)` as Python does it, for the specs the prints use: empty, `.Nf` and
/// `+.Nf`.
fn python_format(out: &mut String, value: Value<'_>, spec: &str) -> Result<(), String> {
    use std::fmt::Write;
    if spec.is_empty() {
        match value {
            Value::Int(v) => write!(out, "{v}").expect("writing to a String"),
            Value::Text(v) => out.push_str(v),
            Value::Float(v) => return Err(format!("{v} needs a format spec")),
        }
        return Ok(());
    }
    let (plus, rest) = match spec.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let precision: usize = rest
        .strip_prefix('.')
        .and_then(|r| r.strip_suffix('f'))
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| format!("the spec {spec:?} is not one the prints use"))?;
    let v = match value {
        Value::Float(v) => v,
        // Python formats an int with `.2f` as the float it equals.
        Value::Int(v) => v as f64,
        Value::Text(v) => return Err(format!("text {v:?} for the spec {spec:?}")),
    };
    // Rust rounds as Python does (the exact binary value, ties to even) and writes `-0.00`
    // for a negative zero as Python does; only NaN is spelled differently.
    if v.is_nan() {
        out.push_str(if plus { "+nan" } else { "nan" });
    } else if plus {
        write!(out, "{v:+.precision$}").expect("writing to a String");
    } else {
        write!(out, "{v:.precision$}").expect("writing to a String");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholder_names(text: &str) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for piece in pieces(text) {
            if let Piece::Field { name, .. } = piece
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
        names
    }

    #[test]
    fn every_shape_declares_its_fields_in_the_order_the_text_names_them() {
        for shape in SHAPES {
            let declared: Vec<&str> = shape.fields.iter().map(|f| f.name).collect();
            assert_eq!(placeholder_names(shape.text), declared, "{}", shape.name);
        }
    }

    #[test]
    fn names_are_unique_and_labels_are_part_of_their_line() {
        for (i, shape) in SHAPES.iter().enumerate() {
            assert!(
                SHAPES[..i].iter().all(|s| s.name != shape.name),
                "{} twice",
                shape.name
            );
            if let Some(label) = shape.label {
                assert!(shape.text.contains(label), "{}", shape.name);
            }
            assert_eq!(
                shape.label.is_some(),
                matches!(shape.kind, Kind::Setup | Kind::Probe | Kind::Snapshot),
                "{}",
                shape.name
            );
        }
    }

    #[test]
    fn every_line_starts_with_its_rank_tag() {
        for shape in SHAPES {
            let tag = if shape.kind == Kind::Pipeline {
                "[rank={rank} pp={pp}] "
            } else {
                "[rank={rank}] "
            };
            assert!(shape.text.starts_with(tag), "{}", shape.name);
        }
    }

    #[test]
    fn the_crate_doc_lists_every_shape() {
        let doc = include_str!("../README.md");
        for shape in SHAPES {
            let text = shape.text.replace('|', "\\|");
            let row = format!("| `{}` | {} | `{text}` |", shape.name, shape.group);
            assert!(doc.contains(&row), "README.md lacks the row\n{row}");
        }
    }

    #[test]
    fn sizes_are_rendered_as_python_renders_them() {
        let mut out = String::new();
        for (value, spec, python) in [
            (Value::Float(0.125), ".2f", "0.12"),
            (Value::Float(0.375), ".2f", "0.38"),
            (Value::Float(2.675), ".2f", "2.67"),
            (Value::Float(-0.001), ".2f", "-0.00"),
            (Value::Float(-0.0), "+.2f", "-0.00"),
            (Value::Float(0.0), "+.2f", "+0.00"),
            (Value::Float(1.5), "+.2f", "+1.50"),
            (Value::Float(0.05), ".1f", "0.1"),
            (Value::Float(0.25), ".1f", "0.2"),
            (Value::Float(f64::INFINITY), ".2f", "inf"),
            (Value::Float(f64::NAN), ".2f", "nan"),
            (Value::Int(7), ".2f", "7.00"),
            (Value::Int(-12), "", "-12"),
            (Value::Text("(2048,)"), "", "(2048,)"),
        ] {
            out.clear();
            python_format(&mut out, value, spec).unwrap();
            assert_eq!(out, python, "{value:?} {spec}");
        }
    }

    #[test]
    fn fill_writes_a_repeated_field_each_time() {
        let line = fill(
            shape("snapshot_step"),
            &[12.into(), "/tmp/snaps".into(), 0.into()],
        );
        assert_eq!(
            line,
            "[rank=12] Memory snapshot saved to /tmp/snaps/memory_snapshot_rank12_step0.pickle"
        );
        assert_eq!(
            shape("snapshot_step")
                .fill_label(&[12.into(), "/tmp/snaps".into(), 0.into()])
                .as_deref(),
            Some("/tmp/snaps/memory_snapshot_rank12_step0.pickle")
        );
    }

    #[test]
    fn normalised_text_keeps_only_the_specs() {
        assert_eq!(
            shape("step3_after_b1").normalised(),
            "[rank={} pp={}] Step3 i={} after B1: {:.2f} GiB (delta={:+.2f}) | alloc={:.2f} cached={:.2f} non-pt={:.2f}"
        );
        assert_eq!(
            normalise(&pieces("a {{b}} {c:.1f}")),
            "a {{b}} {:.1f}".to_string()
        );
    }

    #[test]
    fn a_size_right_before_its_exact_bytes_is_rounded_for_people() {
        assert_eq!(shape("saved_tensor").rounded(), ["mb"]);
        assert_eq!(shape("saved_summary").rounded(), ["activ_mb", "weight_mb"]);
        assert_eq!(shape("process_group").rounded(), ["gpu_total"]);
        assert!(shape("process_group_without_total").rounded().is_empty());
        assert!(shape("saved_tensor_mb").rounded().is_empty());
        assert!(shape("step4").rounded().is_empty());
    }

    /// What `init_process_group` prints on one H200 (`torch.cuda.mem_get_info()` gives a total
    /// of 150,110,011,392 bytes there), exactly.
    #[test]
    fn the_process_group_print_on_an_h200() {
        let line = fill(
            shape("process_group"),
            &[
                0.into(),
                (547_356_672.0 / GIB).into(),
                (1_178_599_424.0 / GIB).into(),
                (631_242_752.0 / GIB).into(),
                (150_110_011_392.0 / GIB).into(),
                150_110_011_392_i64.into(),
            ],
        );
        assert_eq!(
            line,
            "[rank=0] init_process_group | cuda_ctx=0.51 after_nccl_world=1.10 nccl_world_cost=0.59 gpu_total=139.80 (150110011392 bytes)"
        );
    }

    const GIB: f64 = (1u64 << 30) as f64;

    #[test]
    #[should_panic(expected = "has 3 fields, given 2 values")]
    fn too_few_values_is_a_programming_error() {
        fill(shape("device_mesh"), &[0.into(), 1.0.into()]);
    }

    #[test]
    fn listed_entries_come_once_in_order() {
        assert_eq!(
            listed("5A"),
            ["layerN after stage1..5", "layerN stageK saved tensors:"]
        );
        assert!(listed("1A").is_empty());
    }
}
