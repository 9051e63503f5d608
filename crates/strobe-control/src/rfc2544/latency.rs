//! Latency (RFC 2544 §26.2): every frame's latency at loads relative to each size's
//! throughput, the trials at one load merged.

use strobe_analyze::latency::LatencyStats;
use strobe_engine::latency::FlowLatency;

use super::report::{LatencyPoint, LatencyResult, ThroughputResult};
use super::request::Benchmark;
use super::session::{Offer, Session, Trials};
use crate::text::pps_text;

impl<T: Trials> Session<'_, T> {
    /// RFC 2544 §26.2 for one size: every frame's latency at loads relative to the
    /// throughput, trials at one load merged.
    pub(super) fn latency(
        &mut self,
        t: &ThroughputResult,
    ) -> Result<Option<LatencyResult>, T::Error> {
        let r = self.request;
        let size = &t.size;
        let throughput = t.ndr().map(|n| n.pps);
        let mut result = LatencyResult {
            size: size.clone(),
            throughput_pps: throughput,
            points: Vec::new(),
            note: None,
        };
        let Some(throughput) = throughput else {
            result.note = Some("no rate passed without loss: no throughput to load".into());
            return Ok(Some(result));
        };
        let runs = r.latency_loads.len() * r.latency_trials as usize;
        let mut done = 0;
        for &load in &r.latency_loads {
            let pps = throughput * load;
            let mut merged: Option<FlowLatency> = None;
            let mut point = LatencyPoint {
                load_pct: load * 100.0,
                rate: size.figures(pps),
                latency: None,
                frames_tx: 0,
                frames_lost: 0,
                trials: Vec::new(),
            };
            for k in 0..r.latency_trials {
                let label = format!(
                    "latency {} B at {:.0} % of the throughput, {}{}",
                    size.size,
                    load * 100.0,
                    pps_text(pps),
                    if r.latency_trials > 1 {
                        format!(", trial {} of {}", k + 1, r.latency_trials)
                    } else {
                        String::new()
                    },
                );
                let progress = self.progress(runs - done);
                let Some(outcome) = self.trial(
                    Benchmark::Latency,
                    size,
                    Offer::Paced(pps),
                    &label,
                    progress,
                )?
                else {
                    break;
                };
                done += 1;
                if !outcome.result.interrupted {
                    point.frames_tx += outcome.result.frames_tx;
                    point.frames_lost += outcome.result.frames_lost;
                    if let Some(l) = &outcome.latency {
                        merged.get_or_insert_with(Default::default).add(l);
                    }
                }
                point.trials.push(outcome.result);
                if self.stopped() {
                    break;
                }
            }
            point.latency = merged
                .as_ref()
                .and_then(|m| LatencyStats::from_histogram(m.histogram()));
            if !point.trials.is_empty() {
                result.points.push(point);
            }
            if self.stopped() {
                break;
            }
        }
        Ok(Some(result))
    }
}
