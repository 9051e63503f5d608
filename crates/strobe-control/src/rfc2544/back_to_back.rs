//! Back-to-back frames (RFC 2544 §26.4, with RFC 9004's updates): the longest burst the
//! DUT forwards without loss, and the buffer it implies.

use strobe_analyze::search::{SearchSpec, ThroughputSearch, Trial};

use super::report::{BackToBackResult, BurstSearch, FrameSize};
use super::request::Benchmark;
use super::session::{Offer, Session, Trials};
use super::throughput::search_trials_left;
use crate::ControlError;

impl<T: Trials> Session<'_, T> {
    /// RFC 2544 §26.4 with RFC 9004's updates for one size: the longest burst at the
    /// highest rate the DUT forwards without loss, searched `b2b_searches` times and
    /// averaged, and the DUT buffer it implies.
    pub(super) fn back_to_back(
        &mut self,
        index: usize,
        size: &FrameSize,
        throughput_pps: Option<f64>,
    ) -> Result<Option<BackToBackResult>, T::Error> {
        let Some(max) = self.max_trial(index, size, Benchmark::BackToBack)? else {
            return Ok(None);
        };
        let r = self.request;
        let max_frames = ((max.max_pps * r.b2b_max_ns as f64 / 1e9).ceil() as u64).max(2);
        let mut result = BackToBackResult {
            size: size.clone(),
            max_frames,
            burst_pps: 0.0,
            searches: Vec::new(),
            mean_frames: None,
            implied_buffer_ns: None,
            throughput_pps,
            buffered_frames: None,
            buffer_drain_ns: None,
        };
        let mut rates = Vec::new();
        for k in 0..r.b2b_searches {
            if self.stopped() {
                break;
            }
            let mut search = ThroughputSearch::new(SearchSpec {
                max_rate: max_frames as f64,
                min_rate: 1.0,
                resolution: 1.0,
                relative_resolution: r.settings.relative_resolution,
                tolerances: vec![0.0],
                method: r.settings.search,
            })
            .map_err(ControlError::BadInput)?;
            let mut trials = Vec::new();
            let mut stopped_early = false;
            while let Some(frames) = search.next_rate() {
                let frames = frames.round().max(1.0) as u64;
                if trials.len() >= r.max_trials {
                    stopped_early = true;
                    break;
                }
                let label = format!(
                    "back-to-back {} B, search {} of {}, trial {}: a burst of {frames} frames",
                    size.size,
                    k + 1,
                    r.b2b_searches,
                    trials.len() + 1,
                );
                let progress = self.progress(search_trials_left(&search));
                let Some(t) = self.trial(
                    Benchmark::BackToBack,
                    size,
                    Offer::Burst(frames),
                    &label,
                    progress,
                )?
                else {
                    stopped_early = true;
                    break;
                };
                let t = t.result;
                trials.push(t.clone());
                if t.interrupted {
                    stopped_early = true;
                    break;
                }
                if t.offered_pps > 0.0 {
                    rates.push(t.offered_pps);
                }
                search.record(Trial {
                    rate: frames as f64,
                    loss_ratio: t.loss_ratio,
                });
            }
            let b = search.brackets[0];
            result.searches.push(BurstSearch {
                frames: b.passed.map(|f| f as u64),
                lowest_failed: b.failed.map(|f| f as u64),
                resolved: !stopped_early,
                trials,
            });
        }
        rates.sort_by(f64::total_cmp);
        result.burst_pps = rates.get(rates.len() / 2).copied().unwrap_or(max.max_pps);
        let found: Vec<f64> = result
            .searches
            .iter()
            .filter(|s| s.resolved)
            .filter_map(|s| s.frames.map(|f| f as f64))
            .collect();
        if !found.is_empty() && result.burst_pps > 0.0 {
            let mean = found.iter().sum::<f64>() / found.len() as f64;
            let rate = result.burst_pps;
            result.mean_frames = Some(mean);
            result.implied_buffer_ns = Some(mean / rate * 1e9);
            if let Some(t) = throughput_pps.filter(|&t| t > 0.0 && t < rate) {
                let buffered = mean * (1.0 - t / rate);
                result.buffered_frames = Some(buffered);
                result.buffer_drain_ns = Some(buffered / t * 1e9);
            }
        }
        Ok(Some(result))
    }
}
