//! Each flow's sending state on a port: its compiled frames, its schedule and sizes, the
//! next frame planned, and its counters. Built once before the run; stepped per frame.

use std::sync::Arc;

use strobe_io::{TimeBase, TxSlot};
use strobe_model::{FlowSpec, SizeSequence};
use strobe_timing::Schedule;

use super::report::FlowReport;
use super::RunOptions;
use crate::generator::FlowGenerator;
use crate::live::LiveCounters;
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
}

impl FlowState {
    /// Ends the flow's schedule now (its switch was turned off).
    pub(super) fn stop(&mut self) {
        self.stopped = true;
        self.next = None;
        self.unpaced_budget = self.unpaced_budget.map(|_| 0);
    }

    /// Counts the frames just written for this flow.
    #[inline]
    pub(super) fn record(&mut self, slots: &[TxSlot<'_>], which: &[u16], templates: &[u16]) {
        let (Some(&first), Some(&last)) = (which.first(), which.last()) else {
            return;
        };
        let r = &mut self.report;
        r.frames += which.len() as u64;
        r.bytes += match self.fixed {
            Some((size, _)) => size as u64 * which.len() as u64,
            None => templates
                .iter()
                .map(|&t| self.gen.frame_size(t) as u64)
                .sum(),
        };
        r.first_ns.get_or_insert(slots[first as usize].scheduled_ns);
        r.last_ns = Some(slots[last as usize].scheduled_ns);
        if let Some(live) = &self.live {
            live.publish_tx(r.id, r.frames, r.bytes);
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
