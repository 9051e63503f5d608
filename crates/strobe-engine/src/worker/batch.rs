//! Planning a batch: which flow's frame goes next (merged by deadline), how many frames one
//! hand-over takes, and writing them into the backend's slots flow by flow. Per frame this
//! allocates nothing: every buffer is sized once per worker.
//!
//! The fill loops are one per way of choosing (a single flow, a scan, the heap, coalesced),
//! the choice made once per batch: a shared loop that asks per frame was measured slower.

use strobe_io::{TxSlot, MAX_BATCH};
use strobe_timing::PathFloor;

use super::flow_state::FlowState;
use crate::earliest::{EarliestFlow, SCAN_MAX_FLOWS};
use crate::generator::{BatchScratch, TxTime};

/// The flow whose next frame is due first (ties: the lowest index) and its deadline, by a
/// scan: cheapest for the handful of flows a port usually carries.
#[inline(always)]
fn scan_earliest(states: &[FlowState]) -> Option<(usize, u64)> {
    let mut best: Option<(usize, u64)> = None;
    for (i, s) in states.iter().enumerate() {
        if let Some((d, _)) = s.next {
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((i, d));
            }
        }
    }
    best
}

/// The frames of one batch, struct-of-arrays, allocated once per worker.
pub(super) struct BatchPlan {
    pub(super) deadlines: Vec<u64>,
    templates: Vec<u16>,
    flows: Vec<u16>,
    /// 0, 1, 2, …: the slot order of a batch that holds a single flow.
    identity: Vec<u16>,
    /// Scratch for grouping a mixed batch by flow.
    order: Vec<u32>,
    which: Vec<u16>,
    group_templates: Vec<u16>,
    /// Which flow's frame is due first.
    earliest: EarliestFlow,
}

impl BatchPlan {
    pub(super) fn new() -> BatchPlan {
        BatchPlan {
            earliest: EarliestFlow::default(),
            deadlines: vec![0; MAX_BATCH],
            templates: vec![0; MAX_BATCH],
            flows: vec![0; MAX_BATCH],
            identity: (0..MAX_BATCH as u16).collect(),
            order: vec![0; MAX_BATCH],
            which: vec![0; MAX_BATCH],
            group_templates: vec![0; MAX_BATCH],
        }
    }

    /// The flow whose next frame is due first (ties: the lowest index) and its deadline.
    #[inline(always)]
    fn earliest(&mut self, states: &[FlowState]) -> Option<(usize, u64)> {
        if states.len() > SCAN_MAX_FLOWS {
            return self.earliest.earliest(states, |s| s.next.map(|(d, _)| d));
        }
        scan_earliest(states)
    }

    /// Flow `i`, just named by [`earliest`](Self::earliest), moved on.
    #[inline(always)]
    fn advanced(&mut self, states: &[FlowState], i: usize) {
        if states.len() > SCAN_MAX_FLOWS {
            self.earliest.advanced(i, states[i].next.map(|(d, _)| d));
        }
    }

    /// Plans up to `batch` frames: the earliest across flows, merged by deadline. Returns
    /// how many (0 when every flow is done).
    pub(super) fn fill(&mut self, states: &mut [FlowState], batch: usize) -> usize {
        if let [s] = states {
            return self.fill_single(s, batch);
        }
        // One loop per way of choosing, the choice made once per batch: one shared loop
        // that asks per frame (as `fill_coalesced` does) sent 0.90-0.96x as fast at 8 to
        // 4 096 flows (unpaced, null port; bench/run flows, run flows-20261128T112601Z).
        if states.len() > SCAN_MAX_FLOWS {
            self.fill_merged::<true>(states, batch)
        } else {
            self.fill_merged::<false>(states, batch)
        }
    }

    /// [`fill`](Self::fill) for several flows: by the heap or by a scan.
    fn fill_merged<const HEAP: bool>(&mut self, states: &mut [FlowState], batch: usize) -> usize {
        let mut n = 0;
        while n < batch {
            let found = if HEAP {
                self.earliest.earliest(states, |s| s.next.map(|(d, _)| d))
            } else {
                scan_earliest(states)
            };
            let Some((i, _)) = found else { break };
            let s = &mut states[i];
            let Some((deadline, template)) = s.next else {
                break;
            };
            self.deadlines[n] = deadline;
            self.templates[n] = template;
            self.flows[n] = i as u16;
            s.advance();
            if HEAP {
                self.earliest.advanced(i, s.next.map(|(d, _)| d));
            }
            n += 1;
        }
        n
    }

    /// Plans the frames of one coalesced hand-over: the earliest frame, then each next one
    /// while it is better off in the same hand-over ([`PathFloor::joins`]), up to `cap`.
    /// `now_ns` is the current time on the deadlines' timeline: a late hand-over starts
    /// then, not at its first deadline. Returns how many (0 when every flow is done).
    /// `join_due`: frames already due join whatever the floor says (a check of the spacing,
    /// [`FloorEstimate::wants_spacing_check`](strobe_timing::FloorEstimate::wants_spacing_check)).
    pub(super) fn fill_coalesced(
        &mut self,
        states: &mut [FlowState],
        cap: usize,
        floor: &PathFloor,
        now_ns: u64,
        join_due: bool,
    ) -> usize {
        let mut n = 0;
        let mut start_ns = 0;
        while n < cap {
            let Some((i, deadline)) = self.earliest(states) else {
                break;
            };
            let Some((_, template)) = states[i].next else {
                break;
            };
            // A train's head goes alone: it starts a hand-over and ends it.
            let head = states[i].next_is_train_head();
            if n == 0 {
                start_ns = deadline.max(now_ns);
            } else if head
                || !(floor.joins(start_ns, n, deadline) || join_due && deadline <= now_ns)
            {
                break;
            }
            self.deadlines[n] = deadline;
            self.templates[n] = template;
            self.flows[n] = i as u16;
            states[i].take();
            self.advanced(states, i);
            n += 1;
            if head {
                break;
            }
        }
        n
    }

    /// One flow: no merge, and for a fixed frame size the schedule runs in one tight loop.
    fn fill_single(&mut self, s: &mut FlowState, batch: usize) -> usize {
        if s.stopped {
            return 0;
        }
        let mut n = 0;
        if let Some((deadline, template)) = s.next.take() {
            self.deadlines[0] = deadline;
            self.templates[0] = template;
            n = 1;
        }
        if let (Some(budget), Some((_, template))) = (s.unpaced_budget.as_mut(), s.fixed) {
            // Deadlines mean nothing here: count frames, leave departure times at zero.
            let got = (batch - n).min(*budget as usize);
            *budget -= got as u64;
            self.deadlines[n..n + got].fill(0);
            self.templates[n..n + got].fill(template);
            return n + got;
        }
        match s.fixed {
            Some((size, template)) => {
                let got = s.schedule.next_batch(size, &mut self.deadlines[n..batch]);
                self.templates[n..n + got].fill(template);
                n += got;
            }
            None => {
                while n < batch {
                    let size = s.sizes.next_size();
                    let Some(deadline) = s.schedule.next(size) else {
                        break;
                    };
                    self.deadlines[n] = deadline;
                    self.templates[n] = s.gen.template_for(size);
                    n += 1;
                }
            }
        }
        self.flows[..n].fill(0);
        n
    }

    /// Writes planned frames `from..from + slots.len()` into the backend's `slots`, flow by
    /// flow.
    pub(super) fn write(
        &mut self,
        from: usize,
        slots: &mut [TxSlot<'_>],
        states: &mut [FlowState],
        tx_time: TxTime,
        holds: &mut [u32],
        scratch: &mut BatchScratch,
    ) {
        let n = slots.len();
        if let [s] = states {
            let (which, templates) = (&self.identity[..n], &self.templates[from..from + n]);
            s.gen
                .write_batch(slots, which, templates, tx_time, holds, scratch);
            s.record(slots, which, templates);
            return;
        }
        // Group the batch by flow, keeping each flow's packets in order.
        for j in 0..n {
            self.order[j] = ((self.flows[from + j] as u32) << 16) | j as u32;
        }
        self.order[..n].sort_unstable();
        let mut start = 0;
        while start < n {
            let flow = self.order[start] >> 16;
            let mut end = start;
            while end < n && self.order[end] >> 16 == flow {
                let j = (self.order[end] & 0xFFFF) as usize;
                self.which[end - start] = j as u16;
                self.group_templates[end - start] = self.templates[from + j];
                end += 1;
            }
            let k = end - start;
            let (which, templates) = (&self.which[..k], &self.group_templates[..k]);
            let s = &mut states[flow as usize];
            s.gen
                .write_batch(slots, which, templates, tx_time, holds, scratch);
            s.record(slots, which, templates);
            start = end;
        }
    }
}
