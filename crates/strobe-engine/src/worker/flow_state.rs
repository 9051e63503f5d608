//! Each flow's sending state on a port: its compiled frames, its schedule and sizes, the
//! next frame planned, and its counters. Built once before the run; stepped per frame.

use std::sync::Arc;

use strobe_io::{TimeBase, TxSlot};
use strobe_model::{FlowSpec, SizeSequence};
use strobe_timing::{Rate, Schedule};

use super::report::FlowReport;
use super::RunOptions;
use crate::generator::FlowGenerator;
use crate::live::{FlowUpdate, LiveCounters};
use crate::EngineError;

/// One flow's sending state on its port.
pub(super) struct FlowState {
    pub(super) gen: FlowGenerator,
    pub(super) sizes: SizeSequence,
    pub(super) schedule: Schedule,
    /// The next frame: (deadline ns, template), or None when the flow is done.
    pub(super) next: Option<(u64, u16)>,
    /// (size, template) when the flow has a single frame size: no size sequence to step.
    pub(super) fixed: Option<(u32, u16)>,
    /// Unpaced runs have no schedule to follow: frames left to send (u64::MAX = no end),
    /// when the duration is a packet count or continuous.
    pub(super) unpaced_budget: Option<u64>,
    /// Where the counters are published for watchers of the run.
    pub(super) live: Option<Arc<LiveCounters>>,
    /// Stopped by its switch: no frame is planned any more.
    pub(super) stopped: bool,
    /// A convoy of trains: frames per train, and frames planned so far. Each train's head
    /// is handed over alone, ahead of its train: its stamp is then taken right before it
    /// leaves, and it leaves before the kernel processes the frames behind it (through a
    /// DUT on veth the whole hand-over is processed before any of it is forwarded).
    pub(super) train: Option<(u64, u64)>,
    pub(super) report: FlowReport,
    /// The rate this worker was given for the flow (a share of it, for a Poisson flow split
    /// over workers), and the version of the last live change applied.
    pub(super) start_rate: Rate,
    pub(super) update_seen: u64,
}

impl FlowState {
    /// Ends the flow's schedule now (its switch was turned off).
    pub(super) fn stop(&mut self) {
        self.stopped = true;
        self.next = None;
        self.unpaced_budget = self.unpaced_budget.map(|_| 0);
    }

    /// Applies a live change (see [`crate::live::FlowSwitches::update`]) from the next frame
    /// on; `flow` is the spec the flow was compiled from. Between hand-overs only: a new size
    /// builds its template here, once per change. A change the flow cannot take is left
    /// out (the server checks both before it publishes one).
    #[cold]
    pub(super) fn apply(&mut self, flow: &FlowSpec, update: FlowUpdate) {
        if let Some(size) = update.size {
            if let Ok(t) = self.gen.add_size(flow, size) {
                self.fixed = Some((size, t));
                // The frame planned next (if the batch planner keeps one) takes it too.
                self.next = self.next.map(|(deadline, _)| (deadline, t));
            }
        }
        if let Some(rate) = update.rate {
            // This worker's share of the flow, as it was split at the start.
            let share = match update.base_rate {
                Some(base) if base.is_same_unit(&self.start_rate) && base.value() > 0.0 => {
                    self.start_rate.value() / base.value()
                }
                _ => 1.0,
            };
            let mine = match rate {
                Rate::Pps(v) => Rate::Pps(v * share),
                Rate::L1BitsPerSec(v) => Rate::L1BitsPerSec(v * share),
            };
            // Refused only for schedules the server does not change (bursts, profiles).
            let _ = self.schedule.change_rate_live(mine);
        }
    }

    /// Counts the frames just written for this flow.
    #[inline]
    pub(super) fn record(&mut self, slots: &[TxSlot<'_>], which: &[u16], templates: &[u16]) {
        let (Some(&first), Some(&last)) = (which.first(), which.last()) else {
            return;
        };
        let r = &mut self.report;
        r.frames += which.len() as u64;
        // The frames as written, without the FCS the NIC appends (as receivers count them).
        let fcs = u64::from(strobe_model::FCS_LEN);
        r.bytes += match self.fixed {
            Some((size, _)) => u64::from(size).saturating_sub(fcs) * which.len() as u64,
            None => templates
                .iter()
                .map(|&t| u64::from(self.gen.frame_size(t)).saturating_sub(fcs))
                .sum(),
        };
        r.first_ns.get_or_insert(slots[first as usize].scheduled_ns);
        r.last_ns = Some(slots[last as usize].scheduled_ns);
        if let Some(live) = &self.live {
            match self.gen.tag_counts() {
                // Each tag position under its own id (they add up to the flow).
                Some((ids, frames, bytes)) => {
                    for p in self.gen.last_positions(which.len()) {
                        live.publish_tx(ids[p], frames[p], bytes[p]);
                    }
                }
                None => live.publish_tx(r.id, r.frames, r.bytes),
            }
        }
    }

    #[inline(always)]
    pub(super) fn advance(&mut self) {
        let (size, template) = match self.fixed {
            Some(fixed) => fixed,
            None => {
                let size = self.sizes.next_size();
                (size, self.gen.template_for(size))
            }
        };
        self.next = self
            .schedule
            .next(size)
            .map(|deadline| (deadline, template));
    }

    /// Whether the next frame is the head of a train.
    #[inline]
    pub(super) fn next_is_train_head(&self) -> bool {
        self.train
            .is_some_and(|(frames, planned)| planned % frames == 0)
    }

    /// Plans the next frame: counts it and steps to the one after.
    #[inline]
    pub(super) fn take(&mut self) {
        if let Some((_, planned)) = &mut self.train {
            *planned += 1;
        }
        self.advance();
    }
}

/// Each flow's sending state on a port: its schedule, its compiled frames, its sizes, and
/// its first deadline planned (an unpaced single flow counts frames instead).
pub(super) fn flow_states(
    flows: &[FlowSpec],
    time_base: TimeBase,
    opts: &RunOptions,
) -> Result<Vec<FlowState>, EngineError> {
    let mut states = Vec::with_capacity(flows.len());
    for f in flows {
        let schedule = Schedule::new(f.schedule.clone()).map_err(|e| EngineError::Flow {
            flow: f.name.clone(),
            message: e.to_string(),
        })?;
        let tag = opts.run_tag.unwrap_or(crate::DEFAULT_RUN_TAG);
        let gen = FlowGenerator::compile(f, tag, opts.seq_start)?;
        let sizes = f.size.distinct_sizes();
        let fixed = (sizes.len() == 1).then(|| (sizes[0], gen.template_for(sizes[0])));
        let unpaced_budget = match f.schedule.duration {
            _ if !opts.unpaced || flows.len() > 1 || time_base == TimeBase::Scheduled => None,
            strobe_timing::Duration::Continuous => Some(u64::MAX),
            strobe_timing::Duration::Packets(n) => Some(n),
            _ => None,
        };
        let mut s = FlowState {
            live: opts.live.clone(),
            unpaced_budget,
            fixed,
            report: FlowReport {
                name: f.name.clone(),
                id: f.id,
                instrumented: gen.instrumented(),
                ..FlowReport::default()
            },
            gen,
            sizes: f.size.sequence(f.size_seed),
            schedule,
            next: None,
            stopped: false,
            start_rate: f.schedule.rate,
            update_seen: 0,
            train: match f.schedule.duration {
                strobe_timing::Duration::Bursts { packets, .. } if packets > 1 => {
                    Some((packets, 0))
                }
                _ => None,
            },
        };
        if s.unpaced_budget.is_none() {
            s.advance();
        }
        states.push(s);
    }
    Ok(states)
}
