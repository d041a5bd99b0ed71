//! The interactive timeline of `snapshot --format html` in a real headless Chromium: the page
//! renders, the chart is drawn, a scripted zoom to the peak and a hover there show the peak's
//! allocation with its whole stack. The page's `#selftest` hook writes what it saw into the
//! DOM, which `--dump-dom` returns. Without Chromium the Chromium parts fail when CI=true and
//! are skipped with a note otherwise.

mod support;

use std::path::Path;

use memprints_present::snapshot as render;
use memprints_snapshot::analyze::{self, FrameNames};
use memprints_snapshot::decode::{Action, Frame, FrameTable, Snapshot, TraceEntry};
use memprints_snapshot::{LoadOptions, SnapshotReport, load_with, timeline};
use serde_json::Value;

const QWEN3: &str = "tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz";

/// Loads `page#selftest` headless and returns what the page's self-test wrote.
fn selftest(page: &Path) -> Value {
    let dom = support::chromium::dump_dom(
        &format!("file://{}#selftest", page.display()),
        &[
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=30000",
        ],
    );
    let start = dom
        .find("<pre id=\"mp-selftest\">")
        .unwrap_or_else(|| panic!("no self-test output in the DOM"))
        + "<pre id=\"mp-selftest\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn html_of(report: SnapshotReport) -> String {
    render::html::report(&[report], &[], 10)
}

#[test]
fn the_timeline_zooms_to_the_peak_and_shows_its_stack_in_chromium() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let options = LoadOptions {
        timeline: true,
        ..LoadOptions::default()
    };
    let report = load_with(&root.join(QWEN3), options).unwrap();
    let peak_bytes = report.primary().peak_allocated_bytes;
    // The stack the hover must show: the peak event's, as the page lists frames.
    let file = std::fs::File::open(root.join(QWEN3)).unwrap();
    let snapshot = Snapshot::read(flate2::read::GzDecoder::new(file)).unwrap();
    let peak_index = report.primary().peak_event_index.unwrap();
    let peak = snapshot.device_traces[0][peak_index];
    let (expected_stack, expected_key) = FrameNames::new(&snapshot.frames).whole(Some(peak.stack));
    assert!(
        expected_stack.len() > 8,
        "a whole stack: {expected_stack:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("qwen3.html");
    let html = html_of(report);
    assert!(html.len() < 512 * 1024, "{} bytes", html.len());
    std::fs::write(&page, &html).unwrap();
    if !support::chromium::present() {
        return;
    }
    let seen = selftest(&page);
    assert_eq!(seen["charts"], 1, "{seen}");
    assert!(
        seen["painted_pixels"].as_u64().unwrap() > 10_000,
        "the chart is drawn: {seen}"
    );
    // Zoomed to the peak's 101 events, hovering it.
    let view = seen["view"].as_array().unwrap();
    let width = view[1].as_f64().unwrap() - view[0].as_f64().unwrap();
    assert_eq!(width, 101.0, "{seen}");
    assert_eq!(seen["hovered"], seen["peak_event"], "{seen}");
    assert_eq!(
        seen["hovered_allocated"].as_u64(),
        Some(peak_bytes),
        "{seen}"
    );
    assert_eq!(seen["hovered_size"].as_u64(), Some(peak.size), "{seen}");
    let stack: Vec<String> = serde_json::from_value(seen["stack"].clone()).unwrap();
    assert_eq!(stack, expected_stack);
    assert_eq!(seen["key_frame"].as_i64(), expected_key.map(|k| k as i64));
    let detail = seen["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("alloc 512.00 KiB (524288 bytes)"),
        "{detail}"
    );
    assert!(
        detail.contains("after it: allocated 179.98 MiB"),
        "{detail}"
    );
    // Allocated is drawn in owner bands that share out the peak exactly.
    let bands: Vec<String> = serde_json::from_value(seen["bands"].clone()).unwrap();
    assert!(
        bands.iter().any(|b| b == "cuBLAS/cuBLASLt workspace"),
        "{bands:?}"
    );
    assert!(
        bands.iter().any(|b| b == "allocated before the trace"),
        "{bands:?}"
    );
    let levels: Vec<f64> = serde_json::from_value(seen["band_levels"].clone()).unwrap();
    assert_eq!(levels.iter().sum::<f64>(), peak_bytes as f64, "{seen}");
    assert!(detail.contains("\nowner: "), "{detail}");
    // No OOM in this snapshot: its empty segments were not "released before an OOM".
    assert!(!html.contains("before an OOM"));
    assert!(
        html.contains("at 8318.7 ms from the first event"),
        "time in ms"
    );
    assert!(
        html.contains("<h4>Segments reserved at the peak</h4><p>50 segments, 196.00 MiB reserved")
    );
    assert_eq!(
        html.matches("<g class=\"segment\"><title>segment 0x")
            .count(),
        50
    );
}

/// Several ranks on one page: one y scale for all their timelines, each with its legend.
#[test]
fn the_ranks_timelines_share_one_scale() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let options = LoadOptions {
        progress: false,
        timeline: true,
        ..Default::default()
    };
    let reports: Vec<SnapshotReport> = (0..3)
        .map(|k| {
            let file = format!("tests/data/snapshot/ranks/memory_snapshot_rank{k}_step0.pickle");
            load_with(&root.join(file), options).unwrap()
        })
        .collect();
    let html = render::html::report(&reports, &[], 10);
    // The highest of the three ranks' reserved, on every chart.
    let y_max = "\"y_max\":264241152";
    assert_eq!(html.matches(y_max).count(), 3, "one scale");
    assert_eq!(html.matches("<div class=\"mp-legend\">").count(), 3);
    // Their snapshots hold OOMs: there the empty segments were released before one.
    assert_eq!(html.matches("(released before an OOM)").count(), 3);
}

/// `snapshot diff --format html` draws who held the memory at each peak.
#[test]
fn the_diff_page_draws_the_owners_at_each_peak() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let load = |f: &str| memprints_snapshot::load(&root.join(f), false).unwrap();
    let (a, b) = (
        load(QWEN3),
        load("tests/data/e2e/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz"),
    );
    let d = memprints_snapshot::diff::diff(&a.path, a.primary(), &b.path, b.primary());
    let html = render::html::diff(&d, 10);
    assert!(
        html.contains("<svg id=\"owners-chart\""),
        "drawn, not only tabled"
    );
    // Two bars (A and B) of ten parts: nine owners and the rest.
    assert_eq!(html.matches("class=\"segment\"").count(), 20);
    assert!(html.contains("<title>A: cuBLAS/cuBLASLt workspace 64.00 MiB at the peak"));
    assert!(html.contains("pithtrain/models/deepseek_v2.py"));
    assert!(
        !serde_json::to_string(&d).unwrap().contains("owners"),
        "JSON unchanged"
    );
}

/// A synthetic trace like `bench/snapshot.sh`'s: `n` alloc/free pairs over 2,000 stacks of 8 to
/// 12 frames, sizes from 512 B to 64 MiB, 1 to 49 µs apart (a fixed LCG, no randomness).
fn synthetic(n: usize) -> Snapshot {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |m: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % m
    };
    let frames: Vec<Frame> = (0..400)
        .map(|i| Frame {
            filename: format!("/work/PithTrain/pithtrain/models/m{}.py", i % 24).into(),
            line: next(2000) as i64,
            name: format!("fn_{i}").into(),
        })
        .collect();
    let mut stacks: Vec<Box<[u32]>> = vec![Box::new([])];
    for _ in 0..2000 {
        let len = 8 + next(5) as usize;
        stacks.push((0..len).map(|_| next(400) as u32).collect());
    }
    let sizes = [512, 4096, 1 << 20, 8 << 20, 64 << 20];
    let (mut t, mut addr) = (1_700_000_000_000_000i64, 0x7f00_0000_0000u64);
    let mut live: Vec<(u64, u64, u32)> = Vec::new();
    let mut trace = Vec::with_capacity(n);
    while trace.len() < n {
        t += 1 + next(49) as i64;
        let entry = if !live.is_empty() && (live.len() > 5000 || next(2) == 0) {
            let (a, size, stack) = live.swap_remove(next(live.len() as u64) as usize);
            (Action::FreeRequested, a, size, stack)
        } else {
            let size = sizes[next(5) as usize];
            addr += size;
            let stack = 1 + next(2000) as u32;
            live.push((addr, size, stack));
            (Action::Alloc, addr, size, stack)
        };
        trace.push(TraceEntry {
            action: entry.0,
            addr: entry.1,
            size: entry.2,
            time_us: t,
            stack: entry.3,
            stream: 0,
        });
    }
    Snapshot {
        device_traces: vec![trace],
        frames: FrameTable { frames, stacks },
        ..Snapshot::default()
    }
}

/// 1,048,576 events make a page of at most 8 MiB (PyTorch's is 82.7 MB) that Chromium draws
/// and zooms.
#[test]
fn a_million_events_make_a_small_page_that_chromium_draws() {
    let snapshot = synthetic(1 << 20);
    let devices = analyze::analyze(&snapshot);
    let timelines = vec![timeline::DeviceTimeline::build(&snapshot, &devices[0])];
    let report = SnapshotReport {
        path: "synthetic".into(),
        rank: None,
        file_bytes: 0,
        events: 1 << 20,
        devices,
        allocator_settings: Vec::new(),
        timelines,
    };
    let peak_bytes = report.primary().peak_allocated_bytes;
    let html = html_of(report);
    assert!(html.len() <= 8 << 20, "{} bytes", html.len());
    if !support::chromium::present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("million.html");
    std::fs::write(&page, &html).unwrap();
    let seen = selftest(&page);
    assert_eq!(seen["events"], 1 << 20, "{seen}");
    assert!(seen["painted_pixels"].as_u64().unwrap() > 10_000, "{seen}");
    assert_eq!(seen["hovered"], seen["peak_event"], "{seen}");
    assert_eq!(
        seen["hovered_allocated"].as_u64(),
        Some(peak_bytes),
        "{seen}"
    );
}
