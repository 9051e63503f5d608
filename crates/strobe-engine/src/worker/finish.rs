//! The end of a port's run: the backend sends what it still holds, and the report is drawn
//! up from what the send loop counted and measured.

use strobe_io::Backend;
use strobe_model::FlowSpec;

use super::report::{departure_fit, HandoverError, PortReport};
use super::send::Sent;
use super::PortShape;
use crate::clock::Clock;

/// Waits for the backend to send every frame it still holds, and takes its counts (a
/// failure here, or one that stopped the loop, leaves the frames written for each flow).
pub(super) fn drain<B: Backend>(backend: &mut B, mut sent: Sent) -> Sent {
    let (report, states) = (&mut sent.report, &sent.states);
    match backend.finish() {
        Ok(stats) if report.failure.is_none() => {
            report.frames = stats.frames;
            report.segmentation = stats.segmentation;
            report.xmit_errors = stats.xmit_errors;
            report.tx_metadata_stamps = stats.tx_stamps;
        }
        finished => {
            if let Err(e) = finished {
                report.failure.get_or_insert(e.to_string());
                report.stopped_early = true;
            }
            // The frames written for each flow, up to the failing batch.
            report.frames = states.iter().map(|s| s.report.frames).sum();
        }
    }
    sent
}

/// The port's report: its counts, the pacing it learned, the hand-over and departure
/// figures from the loop's histograms, the span it sent over and each flow's report.
pub(super) fn final_report(
    sent: Sent,
    flows: &[FlowSpec],
    clock: &Clock,
    shape: &PortShape,
    batch: usize,
) -> PortReport {
    let mut report = sent.report;
    let scheduled_time = shape.scheduled_time;
    report.bytes = sent.states.iter().map(|s| s.report.bytes).sum();
    report.shifted_ns = sent.shift_ns;
    if let (Some(p), Some((_, estimate))) = (&mut report.pacing, &sent.coalesce) {
        p.observed = estimate.handover_known().then(|| estimate.guess());
        // Only a spacing this run timed is remembered and reported as observed.
        p.observed_spacing_known = estimate.spacing_known() && estimate.spacing_seen();
    }
    if let Some(pacer) = sent.pacer {
        report.scheduling = Some(pacer.scheduling());
        report.host_stalls = Some(pacer.stalls());
        report.spin_margin_ns = Some(pacer.margin_ns());
    }
    report.handover = HandoverError::from_histogram(&sent.handover);
    report.departure = HandoverError::from_histogram(&sent.departure);
    if let Some((_, estimate)) = &sent.coalesce {
        report.departure_fit = departure_fit(flows, &sent.departure_gaps, estimate.guess(), batch);
    }
    // A pause after the first frame is not sending time.
    report.elapsed_ns = match (scheduled_time, sent.first_tx_ticks) {
        (false, Some(first)) => clock
            .ticks_to_ns(sent.last_tx_ticks.saturating_sub(first))
            .saturating_sub(sent.paused_while_sending_ns),
        _ => 0,
    };
    // When the first frame really went, on CLOCK_REALTIME, and when it was due: a
    // synchronized start's skew between hosts is read from these.
    report.first_deadline_ns = sent.first_deadline;
    report.first_handover_unix_ns = match (report.t0_unix_ns, sent.first_tx_ticks) {
        (Some(t0), Some(first)) if first >= sent.t0_start_ticks => {
            Some(t0 + clock.ticks_to_ns(first - sent.t0_start_ticks))
        }
        (Some(t0), Some(first)) => {
            Some(t0.saturating_sub(clock.ticks_to_ns(sent.t0_start_ticks - first)))
        }
        _ => None,
    };
    report.planned_ns = sent
        .first_deadline
        .map_or(0, |first| sent.previous_deadline.saturating_sub(first));
    report.flows = sent
        .states
        .into_iter()
        .map(|s| {
            let mut r = s.report;
            if let Some((ids, frames, bytes)) = s.gen.tag_counts() {
                r.tag_positions = (0..ids.len())
                    .map(|p| (ids[p], frames[p], bytes[p]))
                    .collect();
            }
            r
        })
        .collect();
    report
}
