//! System recovery (RFC 2544 §26.5): an overload at 110 % of the throughput, then half the
//! throughput watched slice by slice until frames stop being lost.

use super::report::{RecoveryPlan, RecoveryResult, ThroughputResult};
use super::session::{Label, Session, Trials};
use crate::text::{duration_text, pps_text};

impl<T: Trials> Session<'_, T> {
    /// RFC 2544 §26.5 for one size: 110 % of the throughput for a while, then 50 %; the
    /// time from the reduction until frames stop being lost, to a slice's resolution.
    pub(super) fn recovery(
        &mut self,
        t: &ThroughputResult,
    ) -> Result<Option<RecoveryResult>, T::Error> {
        let r = self.request;
        let mut result = RecoveryResult {
            size: t.size.clone(),
            throughput_pps: t.ndr().map(|n| n.pps),
            plan: None,
            outcome: None,
            recovery_ns: None,
            note: None,
        };
        let Some(throughput) = result.throughput_pps else {
            result.note = Some("no rate passed without loss: no throughput to overload".into());
            return Ok(Some(result));
        };
        let overload_pps = 1.1 * throughput;
        if overload_pps > t.max_pps * 1.000_001 {
            result.note = Some(format!(
                "110 % of the throughput ({}) is above the highest rate the port takes ({}): \
                 the DUT cannot be overloaded from here",
                pps_text(overload_pps),
                pps_text(t.max_pps)
            ));
            return Ok(Some(result));
        }
        let plan = RecoveryPlan {
            overload_pps,
            overload_ns: r.recovery_overload_ns,
            recovery_pps: 0.5 * throughput,
            slice_ns: r.recovery_slice_ns,
            slices: (r.recovery_window_ns / r.recovery_slice_ns).max(1),
        };
        result.plan = Some(plan);
        let what = format!(
            "recovery {} B: {} for {}, then {} watched for {}",
            t.size.size,
            pps_text(plan.overload_pps),
            duration_text(plan.overload_ns),
            pps_text(plan.recovery_pps),
            duration_text(plan.slices * plan.slice_ns),
        );
        let label = Label {
            what,
            progress: self.progress(1),
        };
        let Some(outcome) = self.trials.run_recovery(&t.size, &plan, label)? else {
            return Ok(None);
        };
        self.trials_done += 1;
        self.wall_done_ns += outcome.wall_ns;
        if outcome.overload.1 == 0 {
            result.note = Some(
                "nothing was lost at 110 % of the throughput: the DUT was not overloaded, \
                 there is no recovery to time (a longer overload fills deeper buffers)"
                    .into(),
            );
        } else {
            let last_lossy = outcome.slices.iter().rposition(|&(_, lost)| lost > 0);
            result.recovery_ns = match last_lossy {
                None => Some(0),
                Some(k) if k + 1 == outcome.slices.len() => {
                    result.note = Some(format!(
                        "still losing frames at the end of the {} window: not recovered",
                        duration_text(plan.slices * plan.slice_ns)
                    ));
                    None
                }
                Some(k) => Some((k as u64 + 1) * plan.slice_ns),
            };
        }
        result.outcome = Some(outcome);
        Ok(Some(result))
    }
}
