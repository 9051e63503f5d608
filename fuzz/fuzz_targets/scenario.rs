//! The scenario loader (TOML) and what a loaded scenario drives: every flow compiled to its
//! templates and a few batches of frames written. A scenario file is user input: it gets an
//! error naming what is wrong, never a panic or an unbounded allocation. Sequence numbers
//! start just below the 2^32 wrap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_model::{load_scenario, NoFiles};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(scenario) = load_scenario(text, "fuzz.toml", &NoFiles) else {
        return;
    };
    common::write_frames(&scenario.flows);
});
