//! One memory print (a slice starting at `[rank=`) → one [`Event`].
//!
//! Contract: [`parse_print`] returns `None` for anything that is not exactly one of the print
//! formats of the add-memory-prints instrumentation (the shapes of `memprints-format`, which
//! `tests/print_format.rs` fills and reads back here; garbage, cut-off prints, unknown labels);
//! the caller counts those as unparsed. Sizes come back in bytes, converted from the printed
//! decimal text with integer arithmetic (`GiB × 1024³`, `MB × 1024²`, rounded half away from
//! zero), so `12.34` GiB is always the same number of bytes. Trailing whitespace is ignored, and
//! so is trailing text after the last number when it cannot be part of that number (another
//! launcher's prefix glued on by interleaving). Labels are borrowed from the input.

use std::str;

use memchr::memmem;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// `alloc=A cached=C non-pt=N`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// `alloc=A`: memory allocated by PyTorch's caching allocator.
    pub allocated: i64,
    /// `cached=C`: reserved by the allocator but free.
    pub cached: i64,
    /// `non-pt=N`: device memory in use outside PyTorch (CUDA context, NCCL buffers).
    pub non_pytorch: i64,
}

/// Where in DualPipeV's schedule a pipeline print sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PipelineKind {
    /// `Before pipeline`.
    BeforePipeline,
    /// `Step1 F0 i=I`.
    Step1F0,
    /// `After Step1 (N F0)`.
    AfterStep1,
    /// `Step2 i=I forward_chunk(0)`.
    Step2ForwardChunk0,
    /// `Step2 i=I forward_chunk(1)`.
    Step2ForwardChunk1,
    /// `After Step2 (N F0F1)`.
    AfterStep2,
    /// `Step3 i=I before B1`.
    Step3BeforeB1,
    /// `Step3 i=I after B1`.
    Step3AfterB1,
    /// `Step3 i=I after W1`.
    Step3AfterW1,
    /// `Step3 i=I after F1`.
    Step3AfterF1,
    /// `After Step3 (N B1W1F1)`.
    AfterStep3,
    /// `Step4 i=I`.
    Step4,
    /// `After Step4 (N F0B1F1B0)`.
    AfterStep4,
    /// `After Step8 (end of pipeline)`.
    AfterStep8,
}

impl PipelineKind {
    /// The schedule step (1-8) the print belongs to; 0 before the pipeline starts.
    pub fn step(self) -> u8 {
        use PipelineKind::*;
        match self {
            BeforePipeline => 0,
            Step1F0 | AfterStep1 => 1,
            Step2ForwardChunk0 | Step2ForwardChunk1 | AfterStep2 => 2,
            Step3BeforeB1 | Step3AfterB1 | Step3AfterW1 | Step3AfterF1 | AfterStep3 => 3,
            Step4 | AfterStep4 => 4,
            AfterStep8 => 8,
        }
    }
}

/// One `[rank=R pp=P] …` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelinePoint {
    /// Where in the schedule it sits.
    pub kind: PipelineKind,
    /// Loop index `i=I`, for prints inside a step's loop.
    pub i: Option<u32>,
    /// Iteration count `N` of `After StepK (N …)`.
    pub count: Option<u32>,
    /// The first number after the label (`X GiB`).
    pub allocated: i64,
    /// The printed delta: `(+D)` is against `Before pipeline`, `(delta=±D)` against the same
    /// iteration's `before B1`.
    pub delta: Option<i64>,
    /// The print's `| DETAIL` part.
    pub detail: Detail,
}

/// What one memory print says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// `setup_model | <label>: DETAIL`.
    Setup {
        /// The label between `| ` and `:`.
        label: &'a str,
        /// The print's figures.
        detail: Detail,
    },
    /// `init_process_group | cuda_ctx=X after_nccl_world=Y nccl_world_cost=Z` (non-PyTorch),
    /// then ` gpu_total=T (B bytes)` once the instrumentation records the GPU's total memory.
    ProcessGroup {
        /// `cuda_ctx=X`: device memory in use once the CUDA context exists.
        cuda_context: i64,
        /// `after_nccl_world=Y`: device memory in use after `init_process_group`.
        after_nccl_world: i64,
        /// `nccl_world_cost=Z`: what `init_process_group` added (NCCL's world communicator).
        nccl_world_cost: i64,
        /// `B bytes` of `gpu_total=T (B bytes)`: the GPU's total memory, exact
        /// (`torch.cuda.mem_get_info()`'s total); `None` in a print from before it was printed.
        gpu_total: Option<i64>,
    },
    /// `init_device_mesh | non-pt=X mesh_cost=Y`.
    DeviceMesh {
        /// `non-pt=X`: device memory in use after `init_device_mesh`.
        non_pytorch: i64,
        /// `mesh_cost=Y`: what `init_device_mesh` added (the mesh's communicators).
        mesh_cost: i64,
    },
    /// `load_ckpt | optimizer state: X GiB (N param entries) | DETAIL`.
    CheckpointLoad {
        /// `X GiB` of optimizer state.
        optimizer_state: i64,
        /// `N param entries`.
        param_entries: u64,
        /// The figures after the load.
        detail: Detail,
    },
    /// `[rank=R pp=P] <schedule point>: X GiB … | DETAIL`.
    Pipeline {
        /// `pp=P` of the tag: the pipeline stage.
        pp: u32,
        /// What the print says.
        point: PipelinePoint,
    },
    /// `_lmem` probe `  <label>: alloc=X`; `label` keeps its own leading spaces (the nesting).
    Probe {
        /// The label, leading spaces included.
        label: &'a str,
        /// `alloc=X`.
        allocated: i64,
    },
    /// `layer5 stage1 saved tensors:`.
    SavedHeader {
        /// `N` of `layerN`, when there.
        layer: Option<u32>,
        /// The stage word (`stage1`).
        stage: &'a str,
    },
    /// `    saved (activ|weight): (shape) dtype (X MB)`, or `(X MB, B bytes)` once the
    /// instrumentation prints exact bytes.
    SavedTensor {
        /// `weight` rather than `activ`.
        weight: bool,
        /// The shape as printed, parentheses included.
        shape: &'a str,
        /// The dtype as printed (`torch.bfloat16`).
        dtype: &'a str,
        /// `B bytes` when printed, else `X MB` in bytes (PyTorch's MB here are MiB).
        size: i64,
        /// `size` is the printed byte count, not the rounded MB.
        exact: bool,
    },
    /// `  activ=X MB, weight=Y MB, total=N tensors`, or with ` (B bytes)` after each MB.
    SavedSummary {
        /// `activ=X MB`, or its bytes.
        activations: i64,
        /// `weight=Y MB`, or its bytes.
        weights: i64,
        /// `total=N tensors`.
        count: u64,
        /// Both sizes are printed byte counts, not rounded MB.
        exact: bool,
    },
    /// `Memory snapshot saved to PATH`.
    Snapshot {
        /// The path as printed.
        path: &'a str,
    },
}

/// A parsed print: whose it is and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Print<'a> {
    /// `rank=R` of the tag: the global rank.
    pub rank: u32,
    /// What it says.
    pub event: Event<'a>,
}

/// The tag that starts every memory print.
pub const RANK_TAG: &[u8] = b"[rank=";
/// PithTrain's rank-0 training step line: `... | INFO | step 00000001/00004096 | ...`.
pub const STEP_NEEDLE: &[u8] = b"| step ";
/// The message of `torch.OutOfMemoryError`.
pub const OOM_NEEDLE: &[u8] = b"CUDA out of memory";

/// The finder of [`RANK_TAG`], built once.
pub fn rank_finder() -> &'static memmem::Finder<'static> {
    static FINDER: std::sync::LazyLock<memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memmem::Finder::new(RANK_TAG));
    &FINDER
}

/// Reads the rank of a print's `[rank=N` tag, if the digits are there.
pub fn tag_rank(print: &[u8]) -> Option<u32> {
    let rest = print.strip_prefix(b"[rank=")?;
    let (rank, _) = uint(rest)?;
    Some(rank as u32)
}

/// A print's tag, `[rank=R] ` or `[rank=R pp=P] `: the rank, the stage, and the body after it.
#[inline]
pub fn tag(print: &[u8]) -> Option<(u32, Option<u32>, &[u8])> {
    let rest = print.strip_prefix(b"[rank=")?;
    let (rank, rest) = small_uint(rest)?;
    let (pp, rest) = match rest.strip_prefix(b" pp=") {
        Some(r) => {
            let (pp, r) = small_uint(r)?;
            (Some(pp), r)
        }
        None => (None, rest),
    };
    Some((rank, pp, rest.strip_prefix(b"] ")?))
}

/// [`uint`] that fits a `u32`, with the usual few digits read without the general loop.
#[inline(always)]
fn small_uint(s: &[u8]) -> Option<(u32, &[u8])> {
    let mut v = 0u32;
    for (i, &b) in s.iter().take(7).enumerate() {
        if !b.is_ascii_digit() {
            return (i > 0).then_some((v, &s[i..]));
        }
        v = v * 10 + u32::from(b - b'0');
    }
    let (v, rest) = uint(s)?;
    Some((u32::try_from(v).ok()?, rest))
}

/// The rank of a detail print (an `_lmem` probe or a saved-tensor print: body indented, or a `layerN … saved tensors:` header; `fold::passes` keeps them raw until their pass is read), or `None` for any other print (those are
/// parsed as they are read).
pub fn detail_rank(print: &[u8]) -> Option<u32> {
    match tag(print)? {
        (rank, None, body) => is_detail_body(body).then_some(rank),
        (_, Some(_), _) => None,
    }
}

/// Whether the body of a print without a stage (after `[rank=R] `) is a detail print's.
#[inline]
pub fn is_detail_body(body: &[u8]) -> bool {
    if body.starts_with(b"  ") {
        return true;
    }
    let trailing = body
        .iter()
        .rev()
        .take_while(|&&b| TRAILING.contains(&char::from(b)))
        .count();
    let body = &body[..body.len() - trailing];
    body.starts_with(b"layer") && body.ends_with(b" saved tensors:")
}

/// Splits a line into memory prints, each starting with `[rank=` and running to the next tag
/// or the end of the line. Text before the first tag is not part of any print.
pub fn split_prints(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    let finder = rank_finder();
    let mut rest = finder.find(line).map(|p| &line[p..]);
    std::iter::from_fn(move || {
        let current = rest?;
        match finder.find(&current[1..]) {
            Some(p) => {
                rest = Some(&current[p + 1..]);
                Some(&current[..p + 1])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// Returns `line` without a trailing `\r` and without ANSI escape sequences (CSI `ESC [ … final`
/// and two-byte `ESC x`). Borrows `line` when there is no escape byte, else writes into `scratch`.
pub fn clean<'a>(line: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if memchr::memchr(0x1b, line).is_none() {
        return line;
    }
    scratch.clear();
    let mut i = 0;
    while i < line.len() {
        if line[i] != 0x1b {
            scratch.push(line[i]);
            i += 1;
            continue;
        }
        i += 1;
        if line.get(i) == Some(&b'[') {
            i += 1;
            // Parameter and intermediate bytes are 0x20..=0x3f; the final byte is 0x40..=0x7e.
            while i < line.len() && (0x20..=0x3f).contains(&line[i]) {
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    let end = scratch.len() - scratch.ends_with(b"\r") as usize;
    &scratch[..end]
}

/// Parses one print (starting at `[rank=`, ending before the next tag or the line end).
pub fn parse_print(print: &[u8]) -> Option<Print<'_>> {
    let (rank, pp, body) = tag(print)?;
    let event = match pp {
        Some(pp) => Event::Pipeline {
            pp,
            point: pipeline_body(body)?,
        },
        None => plain(trim_end(str::from_utf8(body).ok()?))?,
    };
    Some(Print { rank, event })
}

/// What a pipeline print says after its tag ([`tag`]).
///
/// It keeps no text: read on bytes, its places for text other than ASCII (the label's free
/// text, what follows its last figure) checked on their own.
pub fn pipeline_body(body: &[u8]) -> Option<PipelinePoint> {
    pipeline(trim_end_bytes(body))
}

fn plain(body: &str) -> Option<Event<'_>> {
    if let Some(rest) = body.strip_prefix("setup_model | ") {
        let (label, detail) = rest.rsplit_once(": alloc=")?;
        return Some(Event::Setup {
            label,
            detail: detail_after_alloc(detail)?,
        });
    }
    if let Some(rest) = body.strip_prefix("init_process_group | ") {
        let (cuda_context, rest) = gib_field(rest, "cuda_ctx=")?;
        let (after_nccl_world, rest) = gib_field(rest.strip_prefix(' ')?, "after_nccl_world=")?;
        let (nccl_world_cost, rest) = gib_field(rest.strip_prefix(' ')?, "nccl_world_cost=")?;
        // Earlier prints end here; a print that goes on to the total must hold all of it.
        let (gpu_total, rest) = match rest.strip_prefix(" gpu_total=") {
            Some(r) => {
                let (_rounded, r) = gib(r)?;
                let (bytes, r) = byte_count(r.strip_prefix(" (")?)?;
                (Some(bytes), r.strip_prefix(')')?)
            }
            // Cut inside the word: not the earlier print with junk after it.
            None if !rest.is_empty() && " gpu_total=".starts_with(rest) => return None,
            None => (None, rest),
        };
        end(rest)?;
        return Some(Event::ProcessGroup {
            cuda_context,
            after_nccl_world,
            nccl_world_cost,
            gpu_total,
        });
    }
    if let Some(rest) = body.strip_prefix("init_device_mesh | ") {
        let (non_pytorch, rest) = gib_field(rest, "non-pt=")?;
        let (mesh_cost, rest) = gib_field(rest.strip_prefix(' ')?, "mesh_cost=")?;
        end(rest)?;
        return Some(Event::DeviceMesh {
            non_pytorch,
            mesh_cost,
        });
    }
    if let Some(rest) = body.strip_prefix("load_ckpt | optimizer state: ") {
        let (optimizer_state, rest) = gib(rest)?;
        let rest = rest.strip_prefix(" GiB (")?;
        let (param_entries, tail) = uint(rest.as_bytes())?;
        let rest = rest[rest.len() - tail.len()..].strip_prefix(" param entries) | ")?;
        let detail = detail(rest)?;
        return Some(Event::CheckpointLoad {
            optimizer_state,
            param_entries,
            detail,
        });
    }
    if let Some(path) = body.strip_prefix("Memory snapshot saved to ") {
        return (!path.is_empty()).then_some(Event::Snapshot { path });
    }
    if let Some(rest) = body.strip_prefix("    saved (") {
        let (kind, rest) = rest.split_once("): ")?;
        let weight = match kind {
            "weight" => true,
            "activ" => false,
            _ => return None,
        };
        let shape_end = rest.find(')')? + 1;
        let (shape, rest) = rest.split_at(shape_end);
        let (dtype, rest) = rest.strip_prefix(' ')?.split_once(" (")?;
        let (rounded, rest) = mib(rest)?;
        let rest = rest.strip_prefix(" MB")?;
        let (size, exact, rest) = match rest.strip_prefix(", ") {
            Some(r) => {
                let (bytes, r) = byte_count(r)?;
                (bytes, true, r)
            }
            None => (rounded, false, rest),
        };
        end(rest.strip_prefix(')')?)?;
        return Some(Event::SavedTensor {
            weight,
            shape,
            dtype,
            size,
            exact,
        });
    }
    if let Some(rest) = body.strip_prefix("  activ=") {
        let (activations, activ_exact, rest) = summary_size(rest)?;
        let (weights, weight_exact, rest) = summary_size(rest.strip_prefix(", weight=")?)?;
        let rest = rest.strip_prefix(", total=")?;
        let (count, tail) = uint(rest.as_bytes())?;
        end(rest[rest.len() - tail.len()..].strip_prefix(" tensors")?)?;
        return Some(Event::SavedSummary {
            activations,
            weights,
            count,
            exact: activ_exact && weight_exact,
        });
    }
    if let Some(head) = body.strip_suffix(" saved tensors:") {
        let (layer, stage) = head.split_once(' ')?;
        let layer = layer.strip_prefix("layer")?;
        let layer = layer.parse().ok();
        return Some(Event::SavedHeader { layer, stage });
    }
    if let Some(rest) = body.strip_prefix("  ") {
        let (label, value) = rest.rsplit_once(": alloc=")?;
        let (allocated, tail) = gib(value)?;
        end(tail)?;
        if label.trim().is_empty() {
            return None;
        }
        return Some(Event::Probe { label, allocated });
    }
    None
}

/// `X MB` of a saved-tensor summary, then ` (B bytes)` when printed: (bytes, exact, rest).
fn summary_size(s: &str) -> Option<(i64, bool, &str)> {
    let (rounded, rest) = mib(s)?;
    let rest = rest.strip_prefix(" MB")?;
    match rest.strip_prefix(" (") {
        Some(r) => {
            let (bytes, r) = byte_count(r)?;
            Some((bytes, true, r.strip_prefix(')')?))
        }
        None => Some((rounded, false, rest)),
    }
}

/// `B bytes` (an exact count): (B, rest).
fn byte_count(s: &str) -> Option<(i64, &str)> {
    let (n, rest) = uint(s.as_bytes())?;
    let rest = &s[s.len() - rest.len()..];
    let n = i64::try_from(n).ok().filter(|&n| n <= MAX_BYTES)?;
    Some((n, rest.strip_prefix(" bytes")?))
}

/// `s.split_once(": ")` on bytes, by memchr: the pattern searcher `split_once` builds for
/// each call costs more than the search on a print's few bytes.
fn split_at_colon_space(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = memchr::memchr_iter(b':', s).find(|&i| s.get(i + 1) == Some(&b' '))?;
    Some((&s[..at], &s[at + 2..]))
}

/// `s.split_once(needle)` on bytes, for a needle of a byte or two.
fn split_once_bytes<'a>(s: &'a [u8], needle: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    let at = memchr::memchr_iter(needle[0], s).find(|&i| s[i..].starts_with(needle))?;
    Some((&s[..at], &s[at + needle.len()..]))
}

/// A loop index or count as `str::parse::<u32>` reads it (a `+` sign allowed, nothing else).
fn index(s: &[u8]) -> Option<u32> {
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u32, |v, &d| {
        v.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

/// The schedule point of a pipeline print's label: its kind, `i=I` and the `N` of `(N …)`.
fn pipeline_label(label: &[u8]) -> Option<(PipelineKind, Option<u32>, Option<u32>)> {
    use PipelineKind::*;
    if label == b"Before pipeline" {
        return Some((BeforePipeline, None, None));
    }
    if let Some(rest) = label.strip_prefix(b"After Step") {
        let (step, paren) = split_once_bytes(rest, b" (")?;
        let paren = paren.strip_suffix(b")")?;
        let kind = match step {
            b"1" => AfterStep1,
            b"2" => AfterStep2,
            b"3" => AfterStep3,
            b"4" => AfterStep4,
            b"8" => AfterStep8,
            _ => return None,
        };
        if kind == AfterStep8 {
            return Some((kind, None, None));
        }
        let (n, mnemonic) = split_once_bytes(paren, b" ")?;
        if mnemonic.is_empty() {
            return None;
        }
        return Some((kind, None, Some(index(n)?)));
    }
    let rest = label.strip_prefix(b"Step")?;
    let (step, rest) = (rest.first()?, &rest[1..]);
    let (kind, i) = match step {
        b'1' => (Step1F0, rest.strip_prefix(b" F0 i=")?),
        b'4' => (Step4, rest.strip_prefix(b" i=")?),
        b'2' | b'3' => {
            let (i, what) = split_once_bytes(rest.strip_prefix(b" i=")?, b" ")?;
            let kind = match (step, what) {
                (b'2', b"forward_chunk(0)") => Step2ForwardChunk0,
                (b'2', b"forward_chunk(1)") => Step2ForwardChunk1,
                (b'3', b"before B1") => Step3BeforeB1,
                (b'3', b"after B1") => Step3AfterB1,
                (b'3', b"after W1") => Step3AfterW1,
                (b'3', b"after F1") => Step3AfterF1,
                _ => return None,
            };
            (kind, i)
        }
        _ => return None,
    };
    Some((kind, Some(index(i)?), None))
}

/// The body of a pipeline print (after `] `, trailing whitespace cut).
fn pipeline(body: &[u8]) -> Option<PipelinePoint> {
    let (label, value) = split_at_colon_space(body)?;
    // The label's free text (a mnemonic, `end of pipeline`) must be text, as a print read as
    // text must.
    if !label.is_ascii() {
        str::from_utf8(label).ok()?;
    }
    let (kind, i, count) = pipeline_label(label)?;
    // The figures: `strip_prefix` of a byte string is a compare of known length.
    let (allocated, rest) = gib_bytes(value)?;
    let rest = rest.strip_prefix(b" GiB")?;
    let (delta, rest) = match rest.strip_prefix(b" (") {
        Some(r) => {
            let r = r.strip_prefix(b"delta=").unwrap_or(r);
            let r = r.strip_prefix(b"+").unwrap_or(r);
            let (d, r) = gib_bytes(r)?;
            (Some(d), r.strip_prefix(b")")?)
        }
        None => (None, rest),
    };
    let (detail, rest) = detail_figures(rest.strip_prefix(b" | alloc=")?)?;
    end_bytes(rest)?;
    // What a print read as text would have refused.
    if !rest.is_ascii() {
        str::from_utf8(rest).ok()?;
    }
    Some(PipelinePoint {
        kind,
        i,
        count,
        allocated,
        delta,
        detail,
    })
}

/// `alloc=A cached=C non-pt=N` with nothing but junk that cannot continue a number after it.
fn detail(s: &str) -> Option<Detail> {
    detail_after_alloc(s.strip_prefix("alloc=")?)
}

fn detail_after_alloc(s: &str) -> Option<Detail> {
    let (detail, rest) = detail_figures(s.as_bytes())?;
    end_bytes(rest)?;
    Some(detail)
}

/// `A cached=C non-pt=N` (after `alloc=`) and what follows.
fn detail_figures(s: &[u8]) -> Option<(Detail, &[u8])> {
    let (allocated, rest) = gib_bytes(s)?;
    let (cached, rest) = gib_bytes(rest.strip_prefix(b" cached=")?)?;
    let (non_pytorch, rest) = gib_bytes(rest.strip_prefix(b" non-pt=")?)?;
    let detail = Detail {
        allocated,
        cached,
        non_pytorch,
    };
    Some((detail, rest))
}

fn gib_field<'a>(s: &'a str, key: &str) -> Option<(i64, &'a str)> {
    gib(s.strip_prefix(key)?)
}

/// What may follow the last number of a print: nothing, or text that is plainly not part of it.
fn end(rest: &str) -> Option<()> {
    end_bytes(rest.as_bytes())
}

fn end_bytes(rest: &[u8]) -> Option<()> {
    match rest.first() {
        None => Some(()),
        Some(b) if b.is_ascii_digit() || *b == b'.' => None,
        Some(_) => Some(()),
    }
}

#[inline(always)]
fn gib_bytes(s: &[u8]) -> Option<(i64, &[u8])> {
    let (d, rest) = decimal(s)?;
    Some((d.bytes(GIB)?, rest))
}

/// [`gib_bytes`] on text.
fn gib(s: &str) -> Option<(i64, &str)> {
    let (v, rest) = gib_bytes(s.as_bytes())?;
    // `decimal` consumed ASCII only, so the split is on a char boundary.
    Some((v, &s[s.len() - rest.len()..]))
}

fn mib(s: &str) -> Option<(i64, &str)> {
    let (d, rest) = decimal(s.as_bytes())?;
    Some((d.bytes(MIB)?, &s[s.len() - rest.len()..]))
}

/// The largest size (in bytes, either sign) a print may state: 1 PiB, far above any device's
/// memory. A larger figure is garbage, and reads so; with every size within it, the sums and
/// differences the report makes of a few of them cannot overflow.
pub const MAX_BYTES: i64 = 1 << 50;

/// 10^k for k in 0..=18, the powers an `i64` holds.
const POW10: [i64; 19] = {
    let mut t = [1i64; 19];
    let mut k = 1;
    while k < 19 {
        t[k] = t[k - 1] * 10;
        k += 1;
    }
    t
};

/// A printed decimal: `mantissa / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    /// The digits, sign included, without the point.
    pub mantissa: i64,
    /// Digits after the point.
    pub scale: u32,
}

impl Decimal {
    /// `self × unit` ([`Self::scaled`]) as a size: `None` beyond ±[`MAX_BYTES`].
    #[inline(always)]
    pub fn bytes(self, unit: i64) -> Option<i64> {
        let v = self.scaled(unit);
        (v.unsigned_abs() <= MAX_BYTES as u64).then_some(v)
    }

    /// `self × unit`, rounded half away from zero.
    #[inline(always)]
    pub fn scaled(self, unit: i64) -> i64 {
        // The common case stays in i64 (i128 division is a slow library call).
        // 10^scale as `checked_pow` gives it (`None` past 10^18), by table: this runs for
        // every figure of every print. The instrumentation prints two decimals: a division by
        // the constant 100 is a multiplication, a division by a table entry is not.
        if self.scale == 2
            && let Some(num) = self.mantissa.checked_mul(unit)
            && num.checked_add(100).is_some()
            && num.checked_sub(100).is_some()
        {
            return if num >= 0 {
                (num + 50) / 100
            } else {
                (num - 50) / 100
            };
        }
        if let (Some(num), Some(&div)) = (
            self.mantissa.checked_mul(unit),
            POW10.get(self.scale as usize),
        ) && num.checked_add(div).is_some()
            && num.checked_sub(div).is_some()
        {
            return if num >= 0 {
                (num + div / 2) / div
            } else {
                (num - div / 2) / div
            };
        }
        let div = 10i128.pow(self.scale);
        let num = self.mantissa as i128 * unit as i128;
        let rounded = if num >= 0 {
            (num + div / 2) / div
        } else {
            (num - div / 2) / div
        };
        rounded.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

/// Parses `-?\d+(\.\d+)?` (at most 18 significant digits) from the start of `s`.
///
/// The integer part and the fraction are each read in a loop of their own: this runs for
/// every figure of every print, and one loop asking at each byte whether it is a digit, the
/// point or the end costs more.
#[inline(always)]
pub fn decimal(s: &[u8]) -> Option<(Decimal, &[u8])> {
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let mut mantissa: i64 = 0;
    let mut i = 0;
    while let Some(&b) = s.get(i)
        && b.is_ascii_digit()
    {
        if i == 18 {
            return None;
        }
        mantissa = mantissa * 10 + i64::from(b - b'0');
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut scale = 0;
    if s.get(i) == Some(&b'.') && s.get(i + 1).is_some_and(u8::is_ascii_digit) {
        let point = i;
        i += 1;
        while let Some(&b) = s.get(i)
            && b.is_ascii_digit()
        {
            // `i - 1` digits so far: all but the point.
            if i - 1 == 18 {
                return None;
            }
            mantissa = mantissa * 10 + i64::from(b - b'0');
            i += 1;
        }
        scale = (i - point - 1) as u32;
    }
    let mantissa = if neg { -mantissa } else { mantissa };
    Some((Decimal { mantissa, scale }, &s[i..]))
}

/// Parses `\d{1,19}` from the start of `s` (19 digits always fit a `u64`).
pub(super) fn uint(s: &[u8]) -> Option<(u64, &[u8])> {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 19 {
        return None;
    }
    let v = s[..n]
        .iter()
        .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0'));
    Some((v, &s[n..]))
}

/// The whitespace a print's end may carry and parsing ignores.
pub(super) const TRAILING: [char; 4] = [' ', '\t', '\r', '\n'];

fn trim_end(s: &str) -> &str {
    s.trim_end_matches(TRAILING)
}

/// [`trim_end`] on bytes.
fn trim_end_bytes(s: &[u8]) -> &[u8] {
    let kept = s.len()
        - s.iter()
            .rev()
            .take_while(|&&b| TRAILING.contains(&char::from(b)))
            .count();
    &s[..kept]
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: i64 = 1 << 30;

    fn gb(hundredths: i64) -> i64 {
        Decimal {
            mantissa: hundredths,
            scale: 2,
        }
        .scaled(G)
    }

    fn event(line: &str) -> Event<'_> {
        parse_print(line.as_bytes())
            .unwrap_or_else(|| panic!("unparsed: {line}"))
            .event
    }

    fn detail(a: i64, c: i64, n: i64) -> Detail {
        Detail {
            allocated: gb(a),
            cached: gb(c),
            non_pytorch: gb(n),
        }
    }

    #[test]
    fn sizes_are_converted_to_bytes_with_exact_rounding() {
        assert_eq!(gb(100), G);
        assert_eq!(gb(1234), 13_249_974_108);
        assert_eq!(gb(-5), -53_687_091);
        assert_eq!(
            Decimal {
                mantissa: 160,
                scale: 1
            }
            .scaled(MIB),
            16 * MIB
        );
    }

    #[test]
    fn setup_prints_keep_their_label() {
        assert_eq!(
            event(
                "[rank=3] setup_model | after module[0] creation: alloc=1.50 cached=0.25 non-pt=3.71"
            ),
            Event::Setup {
                label: "after module[0] creation",
                detail: detail(150, 25, 371)
            }
        );
    }

    #[test]
    fn distributed_prints_parse() {
        assert_eq!(
            event(
                "[rank=0] init_process_group | cuda_ctx=0.52 after_nccl_world=1.10 nccl_world_cost=0.58"
            ),
            Event::ProcessGroup {
                cuda_context: gb(52),
                after_nccl_world: gb(110),
                nccl_world_cost: gb(58),
                gpu_total: None,
            }
        );
        assert_eq!(
            event(
                "[rank=0] init_process_group | cuda_ctx=0.51 after_nccl_world=1.10 nccl_world_cost=0.59 gpu_total=139.80 (150110011392 bytes)"
            ),
            Event::ProcessGroup {
                cuda_context: gb(51),
                after_nccl_world: gb(110),
                nccl_world_cost: gb(59),
                gpu_total: Some(150_110_011_392),
            }
        );
        assert_eq!(
            event("[rank=0] init_device_mesh | non-pt=1.40 mesh_cost=0.30"),
            Event::DeviceMesh {
                non_pytorch: gb(140),
                mesh_cost: gb(30)
            }
        );
    }

    #[test]
    fn a_process_group_print_cut_inside_its_total_does_not_parse() {
        let whole = "[rank=0] init_process_group | cuda_ctx=0.51 after_nccl_world=1.10 nccl_world_cost=0.59 gpu_total=139.80 (150110011392 bytes)";
        let at = whole.find(" gpu_total=").unwrap();
        // (Cut right after the space, it is the earlier print: trailing whitespace is ignored.)
        for end in at + 2..whole.len() {
            assert_eq!(
                parse_print(&whole.as_bytes()[..end]),
                None,
                "{:?}",
                &whole[..end]
            );
        }
        // What a launcher glues on after the whole print is not part of it.
        assert!(parse_print(format!("{whole}W0722 12:00").as_bytes()).is_some());
        // The line before the total, cut after its last figure, is still the earlier print.
        assert!(parse_print(&whole.as_bytes()[..at]).is_some());
    }

    #[test]
    fn checkpoint_load_parses() {
        assert_eq!(
            event(
                "[rank=1] load_ckpt | optimizer state: 7.25 GiB (412 param entries) | alloc=10.00 cached=1.00 non-pt=3.00"
            ),
            Event::CheckpointLoad {
                optimizer_state: gb(725),
                param_entries: 412,
                detail: detail(1000, 100, 300)
            }
        );
    }

    #[test]
    fn every_pipeline_print_shape_parses() {
        use PipelineKind::*;
        let cases = [
            (
                "Before pipeline: 11.00 GiB",
                BeforePipeline,
                None,
                None,
                None,
            ),
            (
                "Step1 F0 i=2: 11.00 GiB (+1.00)",
                Step1F0,
                Some(2),
                None,
                Some(100),
            ),
            (
                "After Step1 (3 F0): 11.00 GiB (+1.00)",
                AfterStep1,
                None,
                Some(3),
                Some(100),
            ),
            (
                "Step2 i=0 forward_chunk(0): 11.00 GiB (+1.00)",
                Step2ForwardChunk0,
                Some(0),
                None,
                Some(100),
            ),
            (
                "Step2 i=0 forward_chunk(1): 11.00 GiB (+1.00)",
                Step2ForwardChunk1,
                Some(0),
                None,
                Some(100),
            ),
            (
                "After Step2 (2 F0F1): 11.00 GiB (+1.00)",
                AfterStep2,
                None,
                Some(2),
                Some(100),
            ),
            (
                "Step3 i=1 before B1: 11.00 GiB",
                Step3BeforeB1,
                Some(1),
                None,
                None,
            ),
            (
                "Step3 i=1 after B1: 11.00 GiB (delta=-0.30)",
                Step3AfterB1,
                Some(1),
                None,
                Some(-30),
            ),
            (
                "Step3 i=1 after W1: 11.00 GiB (delta=+1.20)",
                Step3AfterW1,
                Some(1),
                None,
                Some(120),
            ),
            (
                "Step3 i=1 after F1: 11.00 GiB (delta=+0.00)",
                Step3AfterF1,
                Some(1),
                None,
                Some(0),
            ),
            (
                "After Step3 (4 B1W1F1): 11.00 GiB (+-0.05)",
                AfterStep3,
                None,
                Some(4),
                Some(-5),
            ),
            ("Step4 i=7: 11.00 GiB", Step4, Some(7), None, None),
            (
                "After Step4 (8 F0B1F1B0): 11.00 GiB",
                AfterStep4,
                None,
                Some(8),
                None,
            ),
            (
                "After Step8 (end of pipeline): 11.00 GiB",
                AfterStep8,
                None,
                None,
                None,
            ),
        ];
        for (text, kind, i, count, delta) in cases {
            let line = format!("[rank=12 pp=3] {text} | alloc=11.00 cached=0.50 non-pt=3.71");
            let Event::Pipeline { pp, point } = event(&line) else {
                panic!("{line}")
            };
            assert_eq!(pp, 3);
            assert_eq!(
                (point.kind, point.i, point.count),
                (kind, i, count),
                "{line}"
            );
            assert_eq!(point.delta, delta.map(gb), "{line}");
            assert_eq!(point.allocated, gb(1100));
            assert_eq!(point.detail, detail(1100, 50, 371));
        }
    }

    #[test]
    fn layer_probes_split_at_the_last_alloc_and_keep_their_indent() {
        assert_eq!(
            event(
                "[rank=0]   layer5 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=12.34"
            ),
            Event::Probe {
                label: "layer5 after stage1 (forward_stage1: attn + gate + dispatch_prep)",
                allocated: gb(1234)
            }
        );
        assert_eq!(
            event("[rank=0]       experts: after gate_proj   g=(8192, 768): alloc=1.00"),
            Event::Probe {
                label: "    experts: after gate_proj   g=(8192, 768)",
                allocated: gb(100)
            }
        );
    }

    #[test]
    fn saved_tensor_lines_parse() {
        assert_eq!(
            event("[rank=0] layer5 stage1 saved tensors:"),
            Event::SavedHeader {
                layer: Some(5),
                stage: "stage1"
            }
        );
        assert_eq!(
            event("[rank=0]     saved (activ): (4096, 2048) torch.bfloat16 (16.0 MB)"),
            Event::SavedTensor {
                weight: false,
                shape: "(4096, 2048)",
                dtype: "torch.bfloat16",
                size: 16 * MIB,
                exact: false
            }
        );
        assert_eq!(
            event("[rank=0]     saved (weight): (2048,) torch.float32 (0.0 MB)"),
            Event::SavedTensor {
                weight: true,
                shape: "(2048,)",
                dtype: "torch.float32",
                size: 0,
                exact: false
            }
        );
        assert_eq!(
            event("[rank=0]   activ=160.5 MB, weight=8.0 MB, total=12 tensors"),
            Event::SavedSummary {
                activations: 160 * MIB + MIB / 2,
                weights: 8 * MIB,
                count: 12,
                exact: false
            }
        );
    }

    #[test]
    fn saved_tensor_lines_with_exact_bytes_parse_to_those_bytes() {
        assert_eq!(
            event("[rank=0]     saved (activ): (128, 256) torch.bfloat16 (0.1 MB, 65536 bytes)"),
            Event::SavedTensor {
                weight: false,
                shape: "(128, 256)",
                dtype: "torch.bfloat16",
                size: 65536,
                exact: true
            }
        );
        assert_eq!(
            event(
                "[rank=0]   activ=0.2 MB (262144 bytes), weight=0.1 MB (131072 bytes), total=5 tensors"
            ),
            Event::SavedSummary {
                activations: 262_144,
                weights: 131_072,
                count: 5,
                exact: true
            }
        );
        for cut in [
            "[rank=0]     saved (activ): (128, 256) torch.bfloat16 (0.1 MB, 65536 byt",
            "[rank=0]     saved (activ): (128, 256) torch.bfloat16 (0.1 MB, bytes)",
            "[rank=0]   activ=0.2 MB (262144 bytes), weight=0.1 MB (13107",
        ] {
            assert!(parse_print(cut.as_bytes()).is_none(), "{cut}");
        }
    }

    #[test]
    fn sizes_beyond_a_pebibyte_are_garbage() {
        let at = |v: &str| format!("[rank=0] init_device_mesh | non-pt={v} mesh_cost=0.30");
        assert!(parse_print(at("1048576.00").as_bytes()).is_some());
        assert!(parse_print(at("1048576.01").as_bytes()).is_none());
        assert!(parse_print(at("-16666666666666").as_bytes()).is_none());
        assert!(
            parse_print(b"[rank=0]   activ=0.2 MB (1125899906842625 bytes), weight=0.1 MB (1 bytes), total=5 tensors").is_none()
        );
    }

    #[test]
    fn snapshot_path_is_kept() {
        assert_eq!(
            event("[rank=2] Memory snapshot saved to /tmp/memory_snapshot_rank2.pickle"),
            Event::Snapshot {
                path: "/tmp/memory_snapshot_rank2.pickle"
            }
        );
    }

    #[test]
    fn trailing_junk_from_interleaving_is_tolerated_but_cut_numbers_are_not() {
        assert!(
            parse_print(b"[rank=0] init_device_mesh | non-pt=1.40 mesh_cost=0.30[rank1]: ")
                .is_some()
        );
        assert!(
            parse_print(b"[rank=0 pp=0] Before pipeline: 10.00 GiB | alloc=10.00 cached=0.50 non-")
                .is_none()
        );
        assert!(parse_print(b"[rank=0 pp=0] Step1 F0 i=0: 12.3").is_none());
    }

    #[test]
    fn garbage_and_unknown_labels_are_unparsed() {
        for line in [
            "[rank=",
            "[rank=x] setup_model | a: alloc=1.00 cached=1.00 non-pt=1.00",
            "[rank=0]",
            "[rank=0] hello world",
            "[rank=0 pp=0] Step9 i=0: 1.00 GiB | alloc=1.00 cached=0.00 non-pt=0.00",
            "[rank=0]   : alloc=1.00",
        ] {
            assert!(parse_print(line.as_bytes()).is_none(), "{line}");
        }
    }

    #[test]
    fn tag_rank_reads_the_rank_even_when_the_rest_is_garbage() {
        assert_eq!(tag_rank(b"[rank=17 pp=zz"), Some(17));
        assert_eq!(tag_rank(b"[rank=]"), None);
    }

    /// The byte-at-a-time reading [`decimal`] replaced, kept as its reference.
    fn decimal_by_bytes(s: &[u8]) -> Option<(Decimal, &[u8])> {
        let (neg, s) = match s.first() {
            Some(b'-') => (true, &s[1..]),
            _ => (false, s),
        };
        let (mut mantissa, mut digits, mut scale, mut i, mut seen_dot) = (0i64, 0, 0, 0, false);
        while i < s.len() {
            let b = s[i];
            if b.is_ascii_digit() {
                if digits == 18 {
                    return None;
                }
                mantissa = mantissa * 10 + i64::from(b - b'0');
                digits += 1;
                scale += u32::from(seen_dot);
            } else if b == b'.'
                && !seen_dot
                && i > 0
                && s.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                seen_dot = true;
            } else {
                break;
            }
            i += 1;
        }
        if digits == 0 {
            return None;
        }
        let mantissa = if neg { -mantissa } else { mantissa };
        Some((Decimal { mantissa, scale }, &s[i..]))
    }

    proptest::proptest! {
        #[test]
        fn decimal_reads_what_the_byte_loop_read(text in "-?[0-9]{0,20}([.][0-9]{0,20})?[.x -]?[0-9]{0,3}") {
            proptest::prop_assert_eq!(decimal(text.as_bytes()), decimal_by_bytes(text.as_bytes()));
        }

        #[test]
        fn scaled_rounds_as_the_general_path_does(mantissa in proptest::num::i64::ANY, unit in 1i64..(1 << 31)) {
            let two = Decimal { mantissa, scale: 2 };
            let by_i128 = {
                let num = mantissa as i128 * unit as i128;
                let r = if num >= 0 { (num + 50) / 100 } else { (num - 50) / 100 };
                r.clamp(i64::MIN as i128, i64::MAX as i128) as i64
            };
            proptest::prop_assert_eq!(two.scaled(unit), by_i128);
        }
    }

    /// The reading of a pipeline print's body as text, which [`pipeline`] replaced, kept as
    /// its reference.
    fn pipeline_as_text(body: &str) -> Option<PipelinePoint> {
        use PipelineKind::*;
        let (label, value) = body.split_once(": ")?;
        let (kind, i, count) = if label == "Before pipeline" {
            (BeforePipeline, None, None)
        } else if let Some(rest) = label.strip_prefix("After Step") {
            let (step, paren) = rest.split_once(" (")?;
            let paren = paren.strip_suffix(')')?;
            let kind = match step {
                "1" => AfterStep1,
                "2" => AfterStep2,
                "3" => AfterStep3,
                "4" => AfterStep4,
                "8" => AfterStep8,
                _ => return None,
            };
            let count = if kind == AfterStep8 {
                None
            } else {
                let (n, mnemonic) = paren.split_once(' ')?;
                if mnemonic.is_empty() {
                    return None;
                }
                Some(n.parse().ok()?)
            };
            (kind, None, count)
        } else if let Some(i) = label.strip_prefix("Step1 F0 i=") {
            (Step1F0, Some(i.parse().ok()?), None)
        } else if let Some(rest) = label.strip_prefix("Step2 i=") {
            let (i, what) = rest.split_once(' ')?;
            let kind = match what {
                "forward_chunk(0)" => Step2ForwardChunk0,
                "forward_chunk(1)" => Step2ForwardChunk1,
                _ => return None,
            };
            (kind, Some(i.parse().ok()?), None)
        } else if let Some(rest) = label.strip_prefix("Step3 i=") {
            let (i, what) = rest.split_once(' ')?;
            let kind = match what {
                "before B1" => Step3BeforeB1,
                "after B1" => Step3AfterB1,
                "after W1" => Step3AfterW1,
                "after F1" => Step3AfterF1,
                _ => return None,
            };
            (kind, Some(i.parse().ok()?), None)
        } else if let Some(i) = label.strip_prefix("Step4 i=") {
            (Step4, Some(i.parse().ok()?), None)
        } else {
            return None;
        };
        let (allocated, rest) = gib(value)?;
        let rest = rest.strip_prefix(" GiB")?;
        let (delta, rest) = match rest.strip_prefix(" (") {
            Some(r) => {
                let r = r.strip_prefix("delta=").unwrap_or(r);
                let r = r.strip_prefix('+').unwrap_or(r);
                let (d, r) = gib(r)?;
                (Some(d), r.strip_prefix(')')?)
            }
            None => (None, rest),
        };
        let detail = super::detail(rest.strip_prefix(" | ")?)?;
        Some(PipelinePoint {
            kind,
            i,
            count,
            allocated,
            delta,
            detail,
        })
    }

    /// A pipeline print's body, from parts that are right or nearly right.
    fn pipeline_body() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let label = prop_oneof![
            Just("Before pipeline".to_string()),
            (0u32..3, "[0-9+]{0,3}").prop_map(|(k, i)| [
                format!("Step1 F0 i={i}"),
                format!("Step4 i={i}"),
                format!("Step1 i={i}")
            ][k as usize]
                .clone()),
            (
                "[0-9]{1,2}",
                prop_oneof![
                    Just("forward_chunk(0)"),
                    Just("forward_chunk(1)"),
                    Just("forward_chunk(2)"),
                    Just("")
                ]
            )
                .prop_map(|(i, w)| format!("Step2 i={i} {w}")),
            (
                "[0-9]{1,2}",
                prop_oneof![
                    Just("before B1"),
                    Just("after B1"),
                    Just("after W1"),
                    Just("after F1"),
                    Just("after X1")
                ]
            )
                .prop_map(|(i, w)| format!("Step3 i={i} {w}")),
            ("[0-9]", "[0-9]{0,2}", "[A-Z0-9 é]{0,5}")
                .prop_map(|(k, n, m)| format!("After Step{k} ({n} {m})")),
            Just("After Step8 (end of pipeline)".to_string()),
        ];
        let figure = "-?[0-9]{1,3}([.][0-9]{1,3})?";
        let delta = prop_oneof![
            Just(String::new()),
            figure.prop_map(|d| format!(" (+{d})")),
            figure.prop_map(|d| format!(" (delta={d})")),
            figure.prop_map(|d| format!(" (delta=+{d})")),
        ];
        let junk = prop_oneof![Just(String::new()), "[ \t\r\n]{1,3}", "[0-9.a-zé\\[]{1,4}"];
        (
            label,
            figure,
            delta,
            figure,
            figure,
            figure,
            junk,
            any::<(u8, u8, u16)>(),
        )
            .prop_map(|(label, x, delta, a, c, n, junk, (op, byte, at))| {
                let mut body =
                    format!("{label}: {x} GiB{delta} | alloc={a} cached={c} non-pt={n}{junk}")
                        .into_bytes();
                let at = at as usize % (body.len() + 1);
                match op % 4 {
                    0 => body.insert(at, byte),
                    1 if at < body.len() => body[at] = byte,
                    2 if at < body.len() => _ = body.remove(at),
                    _ => {}
                }
                body
            })
    }

    proptest::proptest! {
        #[test]
        fn index_reads_what_str_parse_reads(text in "[+-]?[0-9]{0,12}[ a+]?[0-9]{0,2}") {
            proptest::prop_assert_eq!(index(text.as_bytes()), text.parse::<u32>().ok());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4096, .. Default::default() })]
        #[test]
        fn pipeline_reads_what_the_text_reading_read(body in pipeline_body()) {
            let as_text = str::from_utf8(&body).ok().and_then(|t| pipeline_as_text(trim_end(t)));
            proptest::prop_assert_eq!(pipeline(trim_end_bytes(&body)), as_text);
        }
    }
}
