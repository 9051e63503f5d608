//! Throughput (RFC 2544 §26.1): each size's highest rate (the line rate, a given maximum or
//! the most the generator offers), then the search for the highest rate with loss at or
//! below each tolerance (the NDR, and the PDR beside it).

use std::time::Instant;

use strobe_analyze::search::{SearchSpec, ThroughputSearch, Trial};

use super::report::{FrameSize, MaxSource, SearchOutcome, ThroughputResult, TrialResult};
use super::request::Benchmark;
use super::session::{Offer, Session, Trials};
use crate::text::pps_text;
use crate::ControlError;

/// A size's highest rate, where it came from, and the trials that found it (the last one
/// at that rate).
#[derive(Clone)]
pub(super) struct MaxTrials {
    pub(super) max_pps: f64,
    pub(super) source: MaxSource,
    pub(super) trials: Vec<TrialResult>,
}

impl<T: Trials> Session<'_, T> {
    /// The size's highest rate and the trials that found it, the last at that rate (run
    /// once, shared by the throughput and the loss curve).
    pub(super) fn max_trial(
        &mut self,
        index: usize,
        size: &FrameSize,
        benchmark: Benchmark,
    ) -> Result<Option<MaxTrials>, T::Error> {
        if let Some(m) = &self.max_trials[index] {
            return Ok(Some(m.clone()));
        }
        let line = size.line_rate_pps;
        let label = |what: String| format!("{} {} B: trial at {what}", benchmark.name(), size.size);
        let mut ran = Vec::new();
        let (max_pps, source) = match self.request.max_rate {
            Some(rate) => {
                let pps = rate.packets_per_sec(size.mean_bytes);
                if pps > line * 1.000_001 {
                    return Err(ControlError::BadInput(format!(
                        "the highest rate {} is above the {} link's line rate for {} B frames \
                         ({}): give a lower --max-rate or a faster --link",
                        pps_text(pps),
                        crate::text::bps_text(self.request.settings.link_bps),
                        size.size,
                        pps_text(line)
                    ))
                    .into());
                }
                let l = label(format!("the highest rate given, {}", pps_text(pps)));
                let progress = self.progress(4);
                let Some(t) = self.trial(benchmark, size, Offer::Paced(pps), &l, progress)? else {
                    return Ok(None);
                };
                ran.push(t.result);
                (pps, MaxSource::Given)
            }
            None => {
                let l = label("the generator's most (unpaced)".into());
                let progress = self.progress(4);
                let Some(t) = self.trial(benchmark, size, Offer::Unpaced, &l, progress)? else {
                    return Ok(None);
                };
                let offered = t.result.offered_pps;
                ran.push(t.result);
                if offered >= line && !self.stopped() {
                    // Faster than the line: the line rate, paced, is the maximum.
                    let l = label(format!("line rate, {}", pps_text(line)));
                    let progress = self.progress(4);
                    let Some(t) = self.trial(benchmark, size, Offer::Paced(line), &l, progress)?
                    else {
                        return Ok(None);
                    };
                    ran.push(t.result);
                    (line, MaxSource::LineRate)
                } else {
                    (offered, MaxSource::Generator)
                }
            }
        };
        let m = MaxTrials {
            max_pps,
            source,
            trials: ran,
        };
        if !self.stopped() && max_pps > 0.0 {
            self.max_trials[index] = Some(m.clone());
        }
        Ok(Some(m))
    }

    /// RFC 2544 §26.1 for one size: the highest rate with loss at or below each tolerance.
    pub(super) fn throughput(
        &mut self,
        index: usize,
        size: &FrameSize,
    ) -> Result<Option<ThroughputResult>, T::Error> {
        let started = Instant::now();
        let Some(MaxTrials {
            max_pps,
            source: max_source,
            mut trials,
        }) = self.max_trial(index, size, Benchmark::Throughput)?
        else {
            return Ok(None);
        };
        let r = self.request;
        let Some(first) = trials.last().cloned() else {
            return Ok(None);
        };
        let mut result = ThroughputResult {
            size: size.clone(),
            max_pps,
            max_source,
            outcomes: Vec::new(),
            trials: Vec::new(),
            elapsed_ns: 0,
        };
        if first.interrupted || max_pps <= 0.0 {
            result.trials = trials;
            return Ok(Some(result));
        }
        let mut search = ThroughputSearch::new(SearchSpec {
            max_rate: max_pps,
            min_rate: (max_pps / 1000.0).max(1.0).min(max_pps / 2.0),
            resolution: 0.0,
            relative_resolution: r.settings.relative_resolution,
            tolerances: r.settings.tolerances.clone(),
            method: r.settings.search,
        })
        .map_err(ControlError::BadInput)?;
        search.record(Trial {
            rate: max_pps,
            loss_ratio: first.loss_ratio,
        });
        let mut stopped_early = false;
        while let Some(rate) = search.next_rate() {
            if trials.len() >= r.max_trials {
                stopped_early = true;
                break;
            }
            let left = search_trials_left(&search);
            let label = format!(
                "throughput {} B, trial {}: {}",
                size.size,
                trials.len() + 1,
                pps_text(rate),
            );
            let progress = self.progress(left);
            let Some(t) = self.trial(
                Benchmark::Throughput,
                size,
                Offer::Paced(rate),
                &label,
                progress,
            )?
            else {
                break;
            };
            let t = t.result;
            trials.push(t.clone());
            if t.interrupted {
                break;
            }
            if t.offered_as_asked() {
                search.record(Trial {
                    rate,
                    loss_ratio: t.loss_ratio,
                });
            } else if t.frames_lost > 0 {
                // Less went out than asked, and the DUT lost frames of it: overloaded at what
                // was offered (a DUT that cannot keep up may also slow the sender, as a veth
                // path does). The failure counts at the rate offered.
                search.record(Trial {
                    rate: t.offered_pps,
                    loss_ratio: t.loss_ratio,
                });
            } else {
                // The sender fell short and nothing was lost: what it offered is the most
                // this port takes, and the trial passes at that rate.
                search.spec.max_rate = search.spec.max_rate.min(t.offered_pps);
                result.max_pps = search.spec.max_rate;
                result.max_source = MaxSource::Generator;
                search.record(Trial {
                    rate: t.offered_pps,
                    loss_ratio: t.loss_ratio,
                });
            }
        }
        result.outcomes = search
            .brackets
            .iter()
            .map(|b| SearchOutcome {
                tolerance: b.tolerance,
                rate: b.passed.map(|p| size.figures(p)),
                lowest_failed_pps: b.failed,
                resolved: !stopped_early && !self.stopped(),
            })
            .collect();
        result.trials = trials;
        result.elapsed_ns = started.elapsed().as_nanos() as u64;
        Ok(Some(result))
    }
}

/// About how many trials a search still needs: the aimed trial and its confirmation for the
/// widest undecided interval, or halvings when it is wide.
pub(super) fn search_trials_left(search: &ThroughputSearch) -> usize {
    search
        .brackets
        .iter()
        .filter_map(|b| {
            let hi = b.failed?;
            let lo = b.passed.unwrap_or(search.spec.min_rate);
            let goal = search.spec.width_goal(hi);
            (hi - lo > goal).then(|| ((hi - lo) / goal).log2().ceil().clamp(1.0, 3.0) as usize)
        })
        .sum::<usize>()
        .max(1)
}
