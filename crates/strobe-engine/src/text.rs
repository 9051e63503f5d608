//! How times and rates read in prose, in the engine's warnings and (re-exported by the
//! run-control layer) in every front end: one definition, in the model's `text`.

pub use strobe_model::text::{bps_text, duration_text, duration_text_f64, pps_text};
