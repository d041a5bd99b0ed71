//! Any bytes: the pickle reader and the snapshot model return a value or one error, never
//! panic; whatever they accept, the analysis, the timeline packing and every renderer handle.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memprints_present::snapshot as render;
use memprints_snapshot::{analyze, decode::Snapshot, pickle, timeline};

fuzz_target!(|data: &[u8]| {
    if let Ok(_value) = pickle::read(data, &mut pickle::ValueBuilder) {}
    if let Ok(snapshot) = Snapshot::read(data) {
        let devices = analyze::analyze(&snapshot);
        if !devices.is_empty() {
            let timelines = devices
                .iter()
                .map(|d| timeline::DeviceTimeline::build(&snapshot, d))
                .collect();
            let report = memprints_snapshot::SnapshotReport {
                path: "fuzz".into(),
                rank: None,
                file_bytes: data.len() as u64,
                events: snapshot.device_traces.iter().map(Vec::len).sum(),
                devices,
                allocator_settings: snapshot.allocator_settings,
                timelines,
            };
            let reports = [report];
            let _ = render::text::report(&reports, 5);
            let _ = render::json::report(&reports, &[], 5);
            let _ = render::html::report(&reports, &[], 5);
        }
    }
});
