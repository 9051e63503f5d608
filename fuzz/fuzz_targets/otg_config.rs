//! An OTG config as `strobe serve` receives it (any bytes as a request body): read as JSON,
//! mapped to a scenario with OTG's defaults, and every flow that loads compiled and a few
//! frames written. The body is untrusted: an OTG error naming the field, never a panic or
//! an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_control::otg::scenario_from_otg;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(config) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let map = [("mapped".to_string(), "null".to_string())];
    let Ok(read) = scenario_from_otg(&config, &map) else {
        return;
    };
    common::write_frames(&read.scenario.flows);
});
