//! Capture reading in `strobe analyze`: any pcap or pcapng file, however broken, gets an
//! error naming what is wrong, and a readable one is analysed without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_analyze::{analyze, Capture, Options};

fuzz_target!(|data: &[u8]| {
    // read_capture takes a path, as `analyze` does: the bytes go through a file in memory.
    let path = format!("/dev/shm/strobe-fuzz-capture-{}", std::process::id());
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let mut timestamps_ns = Vec::new();
    let mut frame_lens = Vec::new();
    let read = strobe_io::read_capture(&path, true, |f| {
        assert!(f.data.len() <= data.len());
        timestamps_ns.push(f.ts_ns);
        frame_lens.push(f.orig_len);
    });
    let _ = std::fs::remove_file(&path);
    let Ok(info) = read else {
        return;
    };
    let capture = Capture {
        timestamps_ns,
        frame_lens,
        resolution_ns: info.resolution_ns,
    };
    for bins in [1, 20] {
        let options = Options {
            expect: "poisson:1mpps".parse().ok(),
            // The floor-aware fit draws a million model gaps per call, too slow to fuzz;
            // its handling of extreme gaps has a unit test in strobe-analyze.
            floor_model: None,
            burst_gap_ns: None,
            histogram_bins: bins,
        };
        let _ = analyze(&capture, &options);
    }
});
