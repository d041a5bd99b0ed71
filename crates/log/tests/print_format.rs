//! The log reader against the printed format's spec (`memprints-format`): every shape, filled
//! with several sets of values, reads back through [`parse_print`] as the figures it was
//! filled with, sizes converted to bytes as the reader converts them. A print whose wording
//! changes in the spec (and its template) without the reader fails here.

use memprints_format::{Kind, Piece, SHAPES, Shape, Unit, Value, fill, pieces};
use memprints_log::parse::{Event, parse_print};

/// How many sets of sample values each shape is filled with.
const SETS: usize = 4;

/// A figure as the reader gives it back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Figure {
    Bytes(i64),
    Int(u64),
    Text(String),
}

/// Sizes in hundredths of a GiB: a typical one, zero, a negative delta, a large one.
const GIB_HUNDREDTHS: [i64; SETS] = [1234, 0, -45, 98_765_432];
/// Sizes in tenths of a MiB.
const MIB_TENTHS: [i64; SETS] = [160, 0, 5, 12_345_678];
const BYTES: [i64; SETS] = [16_777_216, 0, 1, 1 << 40];
const COUNTS: [i64; SETS] = [3, 0, 412, 999_999];
const INDICES: [i64; SETS] = [3, 0, 12, 4095];

/// Sample text for each text field, by name.
fn text(field: &str, set: usize) -> &'static str {
    let samples: [&str; SETS] = match field {
        "tag" => ["activ", "weight", "activ", "weight"],
        "shape" => ["(4096, 2048)", "()", "(2048,)", "(16384, 128, 768)"],
        "dtype" => [
            "torch.bfloat16",
            "torch.float32",
            "torch.int64",
            "torch.float8_e4m3fn",
        ],
        "stage" => ["stage1", "stage3", "stage5", "stage1"],
        "tensor" => ["output_tokens", "outs", "x", "routed_output"],
        "operation" => ["gate_proj  ", "silu_mul   ", "up_proj    ", "down_proj  "],
        "shapes" => [
            "g=(16384, 768)",
            "x=(0, 2048)",
            "g=(1, 2) u=(1, 2)",
            "x=(16384, 2048)",
        ],
        "dir" => ["/tmp", "/scratch/run 7/snaps", ".", "/a/b"],
        other => panic!("give the text field `{other}` sample values in this test"),
    };
    samples[set]
}

/// Set `set`'s value of every field of `shape`, and what the reader should make of each.
fn sample(shape: &Shape, set: usize) -> (Vec<Value<'static>>, Vec<Figure>) {
    shape
        .fields
        .iter()
        .map(|field| match field.unit {
            Unit::GiB => {
                let h = GIB_HUNDREDTHS[set];
                (
                    Value::Float(h as f64 / 100.0),
                    Figure::Bytes(scaled(h, 1 << 30, 100)),
                )
            }
            Unit::MiB => {
                let t = MIB_TENTHS[set];
                (
                    Value::Float(t as f64 / 10.0),
                    Figure::Bytes(scaled(t, 1 << 20, 10)),
                )
            }
            Unit::Bytes => (Value::Int(BYTES[set]), Figure::Bytes(BYTES[set])),
            Unit::Count => (Value::Int(COUNTS[set]), Figure::Int(COUNTS[set] as u64)),
            Unit::Index => (Value::Int(INDICES[set]), Figure::Int(INDICES[set] as u64)),
            Unit::Text => {
                let t = text(field.name, set);
                (Value::Text(t), Figure::Text(t.to_owned()))
            }
        })
        .unzip()
}

/// `n / div` units, in bytes, rounded half away from zero (in i128, apart from the reader's
/// own arithmetic).
fn scaled(n: i64, unit: i64, div: i64) -> i64 {
    let num = i128::from(n) * i128::from(unit);
    let div = i128::from(div);
    let r = if num >= 0 {
        (num + div / 2) / div
    } else {
        (num - div / 2) / div
    };
    i64::try_from(r).unwrap()
}

/// The figures the reader made of a print, by the spec's field names.
fn read_back(rank: u32, event: &Event<'_>) -> Vec<(String, Figure)> {
    let bytes = |name: &str, v: i64| (name.to_owned(), Figure::Bytes(v));
    let int = |name: &str, v: u64| (name.to_owned(), Figure::Int(v));
    let text = |name: &str, v: &str| (name.to_owned(), Figure::Text(v.to_owned()));
    let mut out = vec![int("rank", u64::from(rank))];
    match event {
        Event::Setup { label, detail } => out.extend([
            text("label", label),
            bytes("alloc", detail.allocated),
            bytes("cached", detail.cached),
            bytes("non_pt", detail.non_pytorch),
        ]),
        Event::ProcessGroup {
            cuda_context,
            after_nccl_world,
            nccl_world_cost,
            gpu_total,
        } => {
            out.extend([
                bytes("cuda_ctx", *cuda_context),
                bytes("after_nccl_world", *after_nccl_world),
                bytes("nccl_world_cost", *nccl_world_cost),
            ]);
            out.extend(gpu_total.map(|b| bytes("gpu_total_bytes", b)));
        }
        Event::DeviceMesh {
            non_pytorch,
            mesh_cost,
        } => out.extend([
            bytes("non_pt", *non_pytorch),
            bytes("mesh_cost", *mesh_cost),
        ]),
        Event::CheckpointLoad {
            optimizer_state,
            param_entries,
            detail,
        } => out.extend([
            bytes("optimizer_state", *optimizer_state),
            int("param_entries", *param_entries),
            bytes("alloc", detail.allocated),
            bytes("cached", detail.cached),
            bytes("non_pt", detail.non_pytorch),
        ]),
        Event::Pipeline { pp, point } => {
            let kind = serde_json::to_value(point.kind).unwrap();
            out.extend([
                int("pp", u64::from(*pp)),
                text("kind", kind.as_str().unwrap()),
                bytes("allocated", point.allocated),
                bytes("alloc", point.detail.allocated),
                bytes("cached", point.detail.cached),
                bytes("non_pt", point.detail.non_pytorch),
            ]);
            out.extend(point.i.map(|i| int("i", u64::from(i))));
            out.extend(point.count.map(|n| int("count", u64::from(n))));
            out.extend(point.delta.map(|d| bytes("delta", d)));
        }
        Event::Probe { label, allocated } => {
            out.extend([text("label", label), bytes("alloc", *allocated)])
        }
        Event::SavedHeader { layer, stage } => {
            out.extend(layer.map(|l| int("layer", u64::from(l))));
            out.push(text("stage", stage));
        }
        Event::SavedTensor {
            weight,
            shape,
            dtype,
            size,
            exact,
        } => out.extend([
            text("tag", if *weight { "weight" } else { "activ" }),
            text("shape", shape),
            text("dtype", dtype),
            bytes(if *exact { "bytes" } else { "mb" }, *size),
        ]),
        Event::SavedSummary {
            activations,
            weights,
            count,
            exact,
        } => {
            let (activ, weight) = if *exact {
                ("activ", "weight")
            } else {
                ("activ_mb", "weight_mb")
            };
            out.extend([
                bytes(activ, *activations),
                bytes(weight, *weights),
                int("count", *count),
            ]);
        }
        Event::Snapshot { path } => out.push(text("label", path)),
    }
    out.sort();
    out
}

/// What the reader should give back of `shape` filled with `values`: every field outside the
/// label, the label as text, and a pipeline print's schedule point by the shape's name.
fn expected(shape: &Shape, values: &[Value<'_>], figures: &[Figure]) -> Vec<(String, Figure)> {
    let outside_label = shape.label.map_or(shape.text.to_owned(), |label| {
        shape.text.replacen(label, "", 1)
    });
    let named_outside: Vec<&str> = pieces(&outside_label)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Field { name, .. } => Some(name),
            Piece::Literal(_) => None,
        })
        .collect();
    // Where a line prints exact bytes, the rounded size right before them is for people; the
    // reader keeps the bytes.
    let rounded = shape.rounded();
    let mut out: Vec<(String, Figure)> = shape
        .fields
        .iter()
        .zip(figures)
        .filter(|(f, _)| named_outside.contains(&f.name))
        .filter(|(f, _)| !rounded.contains(&f.name))
        .map(|(f, figure)| (f.name.to_owned(), figure.clone()))
        .collect();
    if let Some(label) = shape.fill_label(values) {
        out.push(("label".to_owned(), Figure::Text(label)));
    }
    if shape.kind == Kind::Pipeline {
        out.push(("kind".to_owned(), Figure::Text(shape.name.to_owned())));
    }
    out.sort();
    out
}

#[test]
fn every_shape_reads_back_as_the_figures_it_was_filled_with() {
    let mut failures = Vec::new();
    for shape in SHAPES {
        for set in 0..SETS {
            let (values, figures) = sample(shape, set);
            let line = fill(shape, &values);
            let Some(print) = parse_print(line.as_bytes()) else {
                failures.push(format!(
                    "shape `{}`: the reader does not parse\n    {line}",
                    shape.name
                ));
                continue;
            };
            let got = read_back(print.rank, &print.event);
            let want = expected(shape, &values, &figures);
            if got != want {
                failures.push(format!(
                    "shape `{}`: the reader reads other figures from\n    {line}\n  spec:   {want:?}\n  reader: {got:?}",
                    shape.name
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the log reader disagrees with memprints-format:\n{}",
        failures.join("\n")
    );
}
