//! `memprints snapshot` on the kept real step-0 snapshots of the GPU run (tests/data/e2e): the
//! figures a user reads there are the true ones (issue 11, point 6).

use std::io::Read;

use assert_cmd::Command;
use serde_json::Value;

const QWEN3: &str = "tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz";
const DSV2: &str = "tests/data/e2e/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz";
const MIB: u64 = 1 << 20;

fn memprints() -> Command {
    let mut c = Command::cargo_bin("memprints").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn json(path: &str) -> Value {
    let out = memprints()
        .args(["snapshot", path, "--format", "json", "--top", "100"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["snapshots"][0].clone()
}

fn group<'a>(s: &'a Value, frame: &str) -> Option<&'a Value> {
    s["top_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["frame"] == frame)
}

/// Kept from before this change: what the peak is, when, and what was live before the trace.
#[test]
fn the_peaks_are_those_of_the_python_replay() {
    let q = json(QWEN3);
    assert_eq!(q["peak_allocated_bytes"], 188_720_776); // 179.98 MiB
    assert_eq!(q["peak_time_us"], 1_796_094_657_943_293u64);
    assert_eq!(q["peak_event_index"], 2880);
    assert_eq!(q["events"], 10545);
    let d = json(DSV2);
    assert_eq!(d["peak_allocated_bytes"], 230_279_292); // 219.61 MiB
    assert_eq!(d["peak_event_index"], 9094);
}

/// The unwinder (`torch::unwind::unwind()`), the capture machinery and native frames such as
/// the interpreter binary or libstdc++ never name a group; cuBLAS's two 32 MiB workspaces are
/// owned by cuBLAS, the one allocated on the autograd thread asked for by the function that
/// allocates it.
#[test]
fn stacks_are_named_past_the_unwinder_and_native_frames() {
    for path in [QWEN3, DSV2] {
        let s = json(path);
        let workspace = s["top_stacks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| {
                g["owner"] == "cuBLAS/cuBLASLt workspace"
                    && g["frame"].as_str().unwrap().starts_with("<native only")
            })
            .unwrap_or_else(|| panic!("{path}: no workspace group"));
        assert_eq!(workspace["bytes"], 32 * MIB, "{path}");
        assert_eq!(workspace["count"], 1, "{path}");
        let key = workspace["key_frame"].as_u64().unwrap() as usize;
        assert!(
            workspace["stack"][key]
                .as_str()
                .unwrap()
                .ends_with("at::cuda::getCurrentCUDABlasHandle()"),
            "{path}: {workspace}"
        );
        for g in s["top_stacks"].as_array().unwrap() {
            let frame = g["frame"].as_str().unwrap();
            for wrong in [
                "unwind::unwind",
                "CapturedTraceback",
                "libstdc++",
                "/usr/bin/python",
            ] {
                assert!(!frame.contains(wrong), "{path}: {frame}");
            }
            let stack = g["stack"].as_array().unwrap();
            assert!(
                !stack
                    .iter()
                    .any(|f| f.as_str().unwrap().contains("unwind::unwind")),
                "{path}: {frame}"
            );
        }
        // Formerly the interpreter binary's own frame: now the Python frame that allocated.
        assert!(
            group(
                &s,
                "torch/distributed/fsdp/_fully_shard/_fsdp_param.py:681 to_accumulated_grad_if_needed"
            )
            .is_some(),
            "{path}"
        );
    }
}

/// Whole stacks, not 8 frames: the workspace stack runs from the allocator to the autograd
/// engine's thread, the Python ones to `train.py`.
#[test]
fn stacks_are_whole() {
    let s = json(QWEN3);
    let longest = s["top_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["stack"].as_array().unwrap().len())
        .max()
        .unwrap();
    assert!(longest > 40, "{longest}");
    let g = group(&s, "pithtrain/dualpipe/utils.py:95 run_backward").unwrap();
    let stack: Vec<&str> = g["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(
        stack[g["key_frame"].as_u64().unwrap() as usize],
        "pithtrain/dualpipe/utils.py:95 run_backward"
    );
    assert!(stack.last().unwrap().contains("train.py"), "{stack:?}");
}

/// Reserved and active at the peak, not at the end; free bytes stranded beside live blocks,
/// wholly free segments apart.
#[test]
fn reserved_active_and_fragmentation_are_those_of_their_moment() {
    let s = json(QWEN3);
    assert_eq!(s["reserved_bytes"], 242 * MIB);
    assert_eq!(s["peak_reserved_bytes"], 196 * MIB);
    assert_eq!(s["peak_active_bytes"], 188_720_776);
    assert_eq!(s["stranded_free_bytes"], 39_492_608); // 37.66 MiB
    assert_eq!(s["empty_segments"], 38);
    assert_eq!(s["empty_segment_bytes"], 94 * MIB);
    let share = s["fragmentation"].as_f64().unwrap();
    assert!(
        (share - 39_492_608.0 / (148.0 * MIB as f64)).abs() < 1e-9,
        "{share}"
    );
    let d = json(DSV2);
    assert_eq!(d["peak_reserved_bytes"], 238 * MIB);
    assert_eq!(d["stranded_free_bytes"], 34_530_304);
}

/// Times are told from the start of the trace.
#[test]
fn times_are_since_the_trace_began() {
    let s = json(QWEN3);
    assert_eq!(s["trace_start_us"], 1_796_094_649_624_612u64);
    assert_eq!(s["peak_since_start_us"], 8_318_681);
    let out = memprints().args(["snapshot", QWEN3]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("peak allocated 179.98 MiB at 8.319 s into the trace (time_us 1796094657943293) after event 2880 of 10545; there active 179.98 MiB, reserved 196.00 MiB"),
        "{text}"
    );
    assert!(
        text.contains("37.66 MiB stranded in 17 partly used segments (25% of them), 94.00 MiB in 38 empty segments"),
        "{text}"
    );
}

fn decompressed(path: &str) -> Vec<u8> {
    let file = std::fs::File::open(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// An `.xz` snapshot reads like the gzip one; a compression memprints does not read is named,
/// with the command that undoes it.
#[test]
fn xz_reads_and_other_compressions_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let xz = dir.path().join("memory_snapshot_rank0_step0.pickle.xz");
    let mut enc = liblzma::write::XzEncoder::new(std::fs::File::create(&xz).unwrap(), 6);
    std::io::Write::write_all(&mut enc, &decompressed(QWEN3)).unwrap();
    enc.finish().unwrap();
    let mut a = json(xz.to_str().unwrap());
    let mut b = json(QWEN3);
    for v in [&mut a, &mut b] {
        v["path"] = Value::Null;
        v["file_bytes"] = Value::Null;
    }
    assert_eq!(a, b);

    let bz = dir.path().join("snap.pickle.bz2");
    std::fs::write(&bz, b"BZh91AY&SY\x00\x00").unwrap();
    let out = memprints().arg("snapshot").arg(&bz).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.ends_with(
            "snap.pickle.bz2: compressed with bzip2, which memprints does not read: decompress it first (bunzip2 FILE)\n"
        ),
        "{stderr}"
    );
}

/// A folder of per-rank snapshots, xz among them, read on all cores, in rank order.
#[test]
fn a_folder_reads_every_compression_in_rank_order() {
    let dir = tempfile::tempdir().unwrap();
    let raw = decompressed(DSV2);
    std::fs::write(dir.path().join("memory_snapshot_rank1_step0.pickle"), &raw).unwrap();
    let mut enc = liblzma::write::XzEncoder::new(
        std::fs::File::create(dir.path().join("memory_snapshot_rank0_step0.pickle.xz")).unwrap(),
        1,
    );
    std::io::Write::write_all(&mut enc, &raw).unwrap();
    enc.finish().unwrap();
    let out = memprints()
        .arg("snapshot")
        .arg(dir.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks: Vec<_> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["rank"].as_u64().unwrap(),
                s["peak_allocated_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ranks, vec![(0, 230_279_292), (1, 230_279_292)]);
}

/// Every kept real snapshot: (issue 22) a block whose stack runs through cuBLAS's workspace,
/// FSDP's collectives or an autotuner is owned by that library, never filed under the model
/// line that ran it; the model line is kept as the group's frame ("asked for by"). The owners
/// at the peak cover every byte there. Fails before the owners existed.
#[test]
fn no_library_buffer_is_filed_under_a_model_line() {
    let mut paths: Vec<String> = std::fs::read_dir("tests/data/e2e/defaults-pp1")
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".pickle.gz"))
        .collect();
    paths.extend([QWEN3.to_owned(), DSV2.to_owned()]);
    paths.extend(
        (0..3).map(|r| format!("tests/data/snapshot/ranks/memory_snapshot_rank{r}_step0.pickle")),
    );
    let library = [
        "getCurrentCUDABlasHandle",
        "getCUDABlasLtWorkspace",
        "distributed/fsdp/",
        "triton/testing.py",
        "triton/runtime/autotuner.py",
        "torch/_inductor/select_algorithm.py",
    ];
    let mut named = 0;
    for path in &paths {
        let s = json(path);
        let groups = s["top_stacks"].as_array().unwrap();
        for g in groups {
            let owner = g["owner"].as_str().unwrap();
            let frame = g["frame"].as_str().unwrap();
            let stack: Vec<&str> = g["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            // The library's frames inside the model call: innermost, before the model line.
            let inside = stack
                .iter()
                .take_while(|f| !f.contains("pithtrain/"))
                .any(|f| library.iter().any(|l| f.contains(l)));
            if inside {
                named += 1;
                assert!(!owner.contains("pithtrain/"), "{path}: {owner} for {frame}");
                assert!(
                    owner.starts_with("cuBLAS") || owner.starts_with("FSDP"),
                    "{path}: {owner}"
                );
            }
        }
        let owners = s["owners_at_peak"].as_array().unwrap();
        let sum: u64 = owners.iter().map(|o| o["bytes"].as_u64().unwrap()).sum();
        assert_eq!(sum, s["peak_allocated_bytes"].as_u64().unwrap(), "{path}");
    }
    assert!(named >= 20, "{named} library groups checked");
}

/// The text table names each group by its owner and keeps the model line as "asked for by".
#[test]
fn the_text_table_has_an_owner_and_an_asked_for_by_column() {
    let out = memprints()
        .args(["snapshot", QWEN3, "--top", "12"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("asked for by"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("forward_stage3") && l.contains("FSDP"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("FSDP all-gather (unsharded weights)"),
        "{line}"
    );
    assert!(
        text.contains("owners at the peak: cuBLAS/cuBLASLt workspace 64.00 MiB"),
        "{text}"
    );
    assert!(text.contains("allocator's unused reserve"), "{text}");
}
