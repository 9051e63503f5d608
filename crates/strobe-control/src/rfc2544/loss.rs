//! The frame loss rate curve (RFC 2544 §26.3): loss from the highest rate down in steps.

use super::report::{FrameSize, LossCurve, LossPoint, TrialResult};
use super::request::Benchmark;
use super::session::{Offer, Session, Trials};
use super::throughput::MaxTrials;
use crate::text::pps_text;

impl<T: Trials> Session<'_, T> {
    /// RFC 2544 §26.3 for one size: loss from the highest rate down in steps until two
    /// steps in a row lose nothing.
    pub(super) fn loss_curve(
        &mut self,
        index: usize,
        size: &FrameSize,
    ) -> Result<Option<LossCurve>, T::Error> {
        let Some(MaxTrials {
            max_pps,
            source: max_source,
            trials,
        }) = self.max_trial(index, size, Benchmark::Loss)?
        else {
            return Ok(None);
        };
        let Some(first) = trials.last().cloned() else {
            return Ok(None);
        };
        let step = self.request.loss_step;
        let point = |load: f64, trial: TrialResult| LossPoint {
            load_pct: load * 100.0,
            rate: size.figures(trial.offered_pps),
            loss_ratio: trial.loss_ratio,
            trial,
        };
        let mut curve = LossCurve {
            size: size.clone(),
            max_pps,
            max_source,
            points: vec![point(1.0, first.clone())],
        };
        let mut clean_in_a_row = usize::from(first.frames_lost == 0);
        let mut k = 1;
        while clean_in_a_row < 2 && !first.interrupted {
            let load = 1.0 - step * k as f64;
            if load <= 1e-9 {
                break;
            }
            let pps = max_pps * load;
            let steps_left = (load / step).ceil() as usize;
            let label = format!(
                "loss {} B at {:.0} % of the highest rate, {}",
                size.size,
                load * 100.0,
                pps_text(pps),
            );
            let progress = self.progress(steps_left.min(3));
            let Some(t) = self.trial(Benchmark::Loss, size, Offer::Paced(pps), &label, progress)?
            else {
                break;
            };
            let interrupted = t.result.interrupted;
            clean_in_a_row = if t.result.frames_lost == 0 {
                clean_in_a_row + 1
            } else {
                0
            };
            curve.points.push(point(load, t.result));
            if interrupted {
                break;
            }
            k += 1;
        }
        Ok(Some(curve))
    }
}
