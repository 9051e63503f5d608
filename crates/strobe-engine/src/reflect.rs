//! The reflector: receives frames on a port and sends them straight back with source and
//! destination swapped (MAC, IP, ports), so the generator on the far side measures
//! round-trip latency on its own clock. The trailer goes back as it came but for its
//! marker, rewritten to 'R' (checksums kept valid).
//!
//! What it refuses, so that it never floods or loops: frames not addressed to its own MAC
//! (a promiscuous receiver sees others' traffic), frames to a group address, frames from a
//! group source (the reflection would go to the group), and frames already marked 'R' by a
//! reflector (two reflectors facing each other would bounce them forever).
//!
//! Frames are copied from the receive ring into a staging area (the receive callback cannot
//! hold the ring while the transmit side fills its own slots), turned around there, and
//! handed to the backend as one batch per poll. Nothing is allocated per frame.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use strobe_io::{Backend, Receiver, RxDrops, TxSlot};
use strobe_wire::reflect::{mark_reflected, swap_addresses};
use strobe_wire::trailer::Trailer;

use crate::rx_worker::IdlePolicy;

/// Frames taken from the receiver per poll, and reflected per transmit call.
const STAGE_FRAMES: usize = 64;
/// How far a trailer's transmit stamp may be from the reflector's CLOCK_REALTIME for the
/// frame to count as strobe's: a day, for generators on hosts whose clocks disagree.
pub const PLAUSIBLE_STAMP_NS: u64 = 86_400 * 1_000_000_000;
/// Transmit calls in a row that take nothing before the rest of a batch is dropped.
const MAX_STALLS: u32 = 100_000;

/// How the reflector behaves.
#[derive(Clone, Debug, Default)]
pub struct ReflectOptions {
    /// The port's own MAC address: only frames addressed to it are reflected.
    pub mac: [u8; 6],
    /// Reflect every frame addressed to the port, not only those with strobe's trailer.
    pub all_frames: bool,
    /// What to do when nothing arrives.
    pub idle: IdlePolicy,
    /// Stop after reflecting this many frames.
    pub max_frames: Option<u64>,
}

/// Counters a watcher can read while the reflector runs.
#[derive(Debug, Default)]
pub struct ReflectCounters {
    pub received: AtomicU64,
    pub reflected: AtomicU64,
}

/// What the reflector did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReflectReport {
    pub receiver: String,
    pub backend: String,
    /// Every frame taken from the receiver.
    pub received: u64,
    /// Frames sent back.
    pub reflected: u64,
    /// Frames without strobe's trailer, left alone (see [`ReflectOptions::all_frames`]).
    pub not_instrumented: u64,
    /// Frames addressed to another unicast MAC address than the port's.
    pub not_for_us: u64,
    /// Frames to a broadcast or multicast address.
    pub group_destination: u64,
    /// Frames from a broadcast or multicast source address (the reflection would go to the
    /// group).
    pub group_source: u64,
    /// Frames a reflector already sent back (trailer marked 'R'): never reflected again.
    pub already_reflected: u64,
    /// Frames captured shorter than they were on the wire, longer than a transmit slot, or
    /// whose trailer's checksum cannot be kept valid when marked (IPv4 fragments).
    pub unfit: u64,
    /// Frames the backend would not take (its ring stayed full).
    pub tx_dropped: u64,
    pub rx_drops: RxDrops,
    /// Why the reflector stopped before it was told to (its receiver or its transmitter
    /// failed: an interface that went away, a ring error). The counts are those until then.
    pub failure: Option<String>,
}

/// Reflects frames from `rx` out of `tx` until `stop` is set (or `max_frames` is reached,
/// or a port fails: what was counted until then is kept, and the report names the failure).
pub fn run_reflect<R: Receiver, B: Backend>(
    rx: &mut R,
    tx: &mut B,
    opts: &ReflectOptions,
    stop: &AtomicBool,
    live: Option<&ReflectCounters>,
) -> ReflectReport {
    let mut report = ReflectReport {
        receiver: rx.describe(),
        backend: tx.describe(),
        ..ReflectReport::default()
    };
    let slot_len = tx.max_frame_len().min(strobe_io::MAX_FRAME_LEN);
    let per_call = STAGE_FRAMES.min(tx.slot_count().max(1));
    let mut stage = vec![0u8; per_call * slot_len];
    let mut lens = [0usize; STAGE_FRAMES];
    let mut idle_polls = 0u32;
    let mut last_alive_check = crate::clock::clock_ns(libc::CLOCK_MONOTONIC);
    while !stop.load(Ordering::Relaxed) {
        let mut staged = 0usize;
        let now_ns = crate::clock::clock_ns(libc::CLOCK_REALTIME);
        let received = rx.poll(per_call, |f| {
            let data = f.data;
            // A tag the kernel took out goes back in, after the MAC addresses.
            let tag = f.vlan.map(|t| t.bytes());
            let len = data.len() + tag.map_or(0, |t| t.len());
            if (data.len() as u64) < f.wire_len as u64 || len > slot_len || data.len() < 14 {
                report.unfit += 1;
                return;
            }
            // Other traffic is counted as such first, so the refusals below count strobe's
            // frames (and with --all, the rest).
            // One marker byte alone would take about 1 in 256 other frames for strobe's; a
            // transmit stamp near the reflector's clock makes a match by chance negligible.
            let trailer = Trailer::from_frame(data)
                .filter(|t| t.tx_ns.abs_diff(now_ns) <= PLAUSIBLE_STAMP_NS);
            if trailer.is_none() && !opts.all_frames {
                report.not_instrumented += 1;
                return;
            }
            let is_group = |mac: &[u8]| mac[0] & 1 != 0;
            if is_group(&data[..6]) {
                report.group_destination += 1;
                return;
            }
            if data[..6] != opts.mac {
                report.not_for_us += 1;
                return;
            }
            if is_group(&data[6..12]) {
                report.group_source += 1;
                return;
            }
            if trailer.is_some_and(|t| t.reflected) {
                report.already_reflected += 1;
                return;
            }
            let buf = &mut stage[staged * slot_len..staged * slot_len + len];
            match tag {
                Some(tag) => {
                    buf[..12].copy_from_slice(&data[..12]);
                    buf[12..16].copy_from_slice(&tag);
                    buf[16..].copy_from_slice(&data[12..]);
                }
                None => buf.copy_from_slice(data),
            }
            // A trailer whose checksum cannot be kept valid (a fragment, say) stays here.
            if trailer.is_some() && mark_reflected(buf).is_err() {
                report.unfit += 1;
                return;
            }
            swap_addresses(buf);
            lens[staged] = len;
            staged += 1;
        });
        let received = match received {
            Ok(n) => n,
            Err(e) => {
                report.failure = Some(format!("receiving: {e}"));
                break;
            }
        };
        report.received += received as u64;
        if received == 0 {
            // A ring whose interface went away just stays empty: ask now and then.
            let now = crate::clock::clock_ns(libc::CLOCK_MONOTONIC);
            if now.saturating_sub(last_alive_check) > crate::rx_worker::ALIVE_CHECK_NS {
                last_alive_check = now;
                if let Err(e) = rx.check_alive() {
                    report.failure = Some(format!("receiving: {e}"));
                    break;
                }
            }
            idle_polls = idle_polls.saturating_add(1);
            opts.idle.back_off(idle_polls);
            continue;
        }
        idle_polls = 0;
        let (sent, failed) = hand_over(tx, &stage, slot_len, &lens[..staged]);
        report.reflected += sent as u64;
        report.tx_dropped += (staged - sent) as u64;
        if let Some(e) = failed {
            report.failure = Some(format!("sending back: {e}"));
            break;
        }
        if let Some(live) = live {
            live.received.store(report.received, Ordering::Relaxed);
            live.reflected.store(report.reflected, Ordering::Relaxed);
        }
        if opts.max_frames.is_some_and(|max| report.reflected >= max) {
            break;
        }
    }
    if let Some(live) = live {
        live.received.store(report.received, Ordering::Relaxed);
        live.reflected.store(report.reflected, Ordering::Relaxed);
    }
    if let Err(e) = tx.finish() {
        report
            .failure
            .get_or_insert_with(|| format!("sending back: {e}"));
    }
    match rx.drops() {
        Ok(drops) => report.rx_drops = drops,
        Err(e) => {
            report
                .failure
                .get_or_insert_with(|| format!("receiving: {e}"));
        }
    }
    report
}

/// Sends the staged frames, in order, in as many transmit calls as the backend needs.
/// Returns how many it took before its ring stayed full or it failed, and the failure.
fn hand_over<B: Backend>(
    tx: &mut B,
    stage: &[u8],
    slot_len: usize,
    lens: &[usize],
) -> (usize, Option<strobe_io::IoError>) {
    let mut done = 0;
    let mut stalls = 0u32;
    while done < lens.len() {
        let sent = tx.transmit(lens.len() - done, |slots: &mut [TxSlot<'_>]| {
            for (k, slot) in slots.iter_mut().enumerate() {
                let i = done + k;
                let len = lens[i];
                slot.buf[..len].copy_from_slice(&stage[i * slot_len..i * slot_len + len]);
                slot.len = len;
                slot.scheduled_ns = 0;
            }
        });
        let sent = match sent {
            Ok(sent) => sent,
            Err(e) => return (done, Some(e)),
        };
        done += sent;
        if sent == 0 {
            stalls += 1;
            if stalls > MAX_STALLS {
                break;
            }
            std::hint::spin_loop();
        }
    }
    (done, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use strobe_io::{IoError, RxFrame, TimeBase};
    use strobe_wire::trailer::LEN as TRAILER_LEN;

    /// How a [`Script`] receiver ends once its frames are out.
    #[derive(Clone, Copy)]
    enum Ending<'a> {
        /// It sets this flag (the reflector's stop).
        Stops(&'a AtomicBool),
        /// Its poll fails (a ring error).
        PollFails,
        /// It stays empty and says it is dead when asked (an interface that went away).
        GoesQuiet,
    }

    /// A receiver that hands out prepared frames, then ends as `ending` says.
    struct Script<'a> {
        frames: VecDeque<Vec<u8>>,
        /// A tag the "kernel" took out of every frame.
        vlan: Option<strobe_io::VlanTag>,
        ending: Ending<'a>,
    }

    /// A receiver that hands out `frames`, then sets `stop`.
    fn script(frames: impl IntoIterator<Item = Vec<u8>>, stop: &AtomicBool) -> Script<'_> {
        Script {
            frames: frames.into_iter().collect(),
            vlan: None,
            ending: Ending::Stops(stop),
        }
    }

    impl Receiver for Script<'_> {
        fn describe(&self) -> String {
            "script".into()
        }
        fn poll<F: FnMut(&RxFrame<'_>)>(
            &mut self,
            max: usize,
            mut each: F,
        ) -> Result<usize, IoError> {
            if self.frames.is_empty() {
                match self.ending {
                    Ending::Stops(_) => {}
                    Ending::PollFails => return Err(IoError::Other("the ring broke".into())),
                    Ending::GoesQuiet => return Ok(0),
                }
            }
            let mut n = 0;
            while n < max {
                let Some(f) = self.frames.pop_front() else {
                    if let Ending::Stops(stop) = self.ending {
                        stop.store(true, Ordering::Relaxed);
                    }
                    break;
                };
                each(&RxFrame {
                    data: &f,
                    wire_len: f.len() as u32,
                    timestamp: None,
                    vlan: self.vlan,
                });
                n += 1;
            }
            Ok(n)
        }
        fn drops(&mut self) -> Result<RxDrops, IoError> {
            Ok(RxDrops::default())
        }
        fn check_alive(&mut self) -> Result<(), IoError> {
            match self.ending {
                Ending::Stops(_) => Ok(()),
                Ending::PollFails | Ending::GoesQuiet => Err(IoError::Other(
                    "interface `x` went away while receiving".into(),
                )),
            }
        }
    }

    /// Bytes of every [`Sink`] slot.
    const SLOT_LEN: usize = 128;

    /// A backend that keeps what it is given and takes at most `take` frames per call.
    struct Sink {
        slots: Vec<Vec<u8>>,
        sent: Vec<Vec<u8>>,
        take: usize,
        /// Every call fails once this many frames were sent (a link that went down).
        fails_after: Option<usize>,
    }

    impl Sink {
        fn new(slots: usize, take: usize) -> Sink {
            Sink {
                slots: vec![vec![0; SLOT_LEN]; slots],
                sent: Vec::new(),
                take,
                fails_after: None,
            }
        }
    }

    impl Backend for Sink {
        fn describe(&self) -> String {
            "sink".into()
        }
        fn slot_count(&self) -> usize {
            self.slots.len()
        }
        fn max_frame_len(&self) -> usize {
            SLOT_LEN
        }
        fn time_base(&self) -> TimeBase {
            TimeBase::RealTime
        }
        fn transmit<F: FnOnce(&mut [TxSlot<'_>])>(
            &mut self,
            count: usize,
            fill: F,
        ) -> Result<usize, IoError> {
            if self.fails_after.is_some_and(|n| self.sent.len() >= n) {
                return Err(IoError::Other("the link went down".into()));
            }
            let n = count.min(self.take);
            let mut batch: strobe_io::TxBatch<'_> = self
                .slots
                .iter_mut()
                .take(n)
                .enumerate()
                .map(|(i, buf)| TxSlot {
                    id: i as u32,
                    buf,
                    len: 0,
                    scheduled_ns: 0,
                })
                .collect();
            fill(&mut batch);
            let out: Vec<Vec<u8>> = batch.iter().map(|s| s.buf[..s.len].to_vec()).collect();
            drop(batch);
            self.sent.extend(out);
            Ok(n)
        }
        fn finish(&mut self) -> Result<strobe_io::BackendStats, IoError> {
            Ok(Default::default())
        }
    }

    /// The reflector's own address in these tests.
    const OWN: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn opts() -> ReflectOptions {
        ReflectOptions {
            mac: OWN,
            ..ReflectOptions::default()
        }
    }

    fn instrumented(seq: u32) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(&OWN);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 1, 1]);
        let at = f.len() - TRAILER_LEN;
        let t: &mut [u8; TRAILER_LEN] = (&mut f[at..]).try_into().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Trailer::sent(0x77, 3, seq, now).write(t);
        f
    }

    #[test]
    fn a_marker_with_a_stamp_far_from_now_is_not_taken_for_strobe() {
        let stop = AtomicBool::new(false);
        let mut far = instrumented(0);
        let at = far.len() - 8;
        far[at..].copy_from_slice(&1234u64.to_be_bytes()); // 1970
        let mut rx = script([far, instrumented(1)], &stop);
        let mut tx = Sink::new(16, 16);
        let r = run_reflect(&mut rx, &mut tx, &opts(), &stop, None);
        assert_eq!((r.received, r.reflected, r.not_instrumented), (2, 1, 1));
        assert_eq!(Trailer::from_frame(&tx.sent[0]).unwrap().seq, 1);
    }

    #[test]
    fn reflects_instrumented_frames_in_order_and_skips_the_rest() {
        let stop = AtomicBool::new(false);
        let mut frames: VecDeque<Vec<u8>> = (0..200).map(instrumented).collect();
        let mut chatter = vec![0x33; 90]; // without a trailer
        chatter[..6].copy_from_slice(&OWN);
        chatter[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        frames.insert(5, chatter);
        frames.insert(9, vec![0x44; 500]); // longer than a slot
        let mut rx = script(frames, &stop);
        // The backend takes 3 frames per call: batches are completed over several calls.
        let mut tx = Sink::new(16, 3);
        let r = run_reflect(&mut rx, &mut tx, &opts(), &stop, None);
        assert_eq!((r.received, r.reflected), (202, 200));
        assert_eq!((r.not_instrumented, r.unfit, r.tx_dropped), (1, 1, 0));
        for (seq, f) in tx.sent.iter().enumerate() {
            let t = Trailer::from_frame(f).unwrap();
            assert_eq!((t.seq, t.tag), (seq as u32, 0x77));
            assert!(t.reflected, "marked as reflected");
            assert_eq!(f[..6], [2, 0, 0, 0, 0, 1], "destination is the sender now");
            assert_eq!(f[26..30], [198, 18, 1, 1]);
            assert_eq!(f[30..34], [198, 18, 0, 1]);
        }
    }

    #[test]
    fn a_tag_the_kernel_stripped_goes_back_in() {
        let stop = AtomicBool::new(false);
        let mut rx = Script {
            vlan: Some(strobe_io::VlanTag {
                tpid: 0x8100,
                tci: 7,
            }),
            ..script((0..3).map(instrumented), &stop)
        };
        let mut tx = Sink::new(4, 4);
        let r = run_reflect(&mut rx, &mut tx, &opts(), &stop, None);
        assert_eq!(r.reflected, 3);
        for (seq, f) in tx.sent.iter().enumerate() {
            assert_eq!(f.len(), 68);
            assert_eq!(f[12..16], [0x81, 0x00, 0x00, 0x07]);
            // Addresses swapped behind the tag, trailer intact.
            assert_eq!(f[..6], [2, 0, 0, 0, 0, 1]);
            assert_eq!(f[30..34], [198, 18, 1, 1]);
            assert_eq!(Trailer::from_frame(f).unwrap().seq, seq as u32);
        }
    }

    #[test]
    fn stops_after_max_frames() {
        let stop = AtomicBool::new(false);
        let mut rx = script((0..500).map(instrumented), &stop);
        let mut tx = Sink::new(64, 64);
        let opts = ReflectOptions {
            max_frames: Some(100),
            ..opts()
        };
        let r = run_reflect(&mut rx, &mut tx, &opts, &stop, None);
        assert!(r.reflected >= 100 && r.reflected < 200, "{}", r.reflected);
    }

    #[test]
    fn only_frames_to_its_own_address_are_reflected_and_never_twice() {
        let stop = AtomicBool::new(false);
        let with_macs = |dst: [u8; 6], src: [u8; 6]| {
            let mut f = instrumented(1);
            f[..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&src);
            f
        };
        let peer = [2, 0, 0, 0, 0, 1];
        let frames = [
            with_macs(OWN, peer),                        // reflected
            with_macs([2, 0, 0, 0, 0, 9], peer),         // another unicast address
            with_macs([0xff; 6], peer),                  // broadcast
            with_macs([0x01, 0, 0x5e, 0, 0, 1], peer),   // IPv4 multicast
            with_macs([0x33, 0x33, 0, 0, 0, 1], peer),   // IPv6 multicast
            with_macs(OWN, [0xff; 6]),                   // broadcast source
            with_macs(OWN, [0x01, 0x80, 0xc2, 0, 0, 0]), // group source
        ];
        let mut rx = script(frames, &stop);
        let mut tx = Sink::new(8, 8);
        let all = ReflectOptions {
            all_frames: true,
            ..opts()
        };
        let r = run_reflect(&mut rx, &mut tx, &all, &stop, None);
        assert_eq!((r.received, r.reflected), (7, 1));
        assert_eq!(
            (r.not_for_us, r.group_destination, r.group_source),
            (1, 3, 2)
        );
        // The reflection, handed to a second reflector (the first one's peer), stops there.
        let mut back = tx.sent[0].clone();
        assert!(Trailer::from_frame(&back).unwrap().reflected);
        back[..6].copy_from_slice(&OWN);
        stop.store(false, Ordering::Relaxed);
        let mut rx = script([back], &stop);
        let r = run_reflect(&mut rx, &mut tx, &all, &stop, None);
        assert_eq!((r.reflected, r.already_reflected), (0, 1));
    }

    /// A receiver that hands out five instrumented frames, then fails as `ending` says.
    fn dying(ending: Ending<'static>) -> Script<'static> {
        Script {
            frames: (0..5).map(instrumented).collect(),
            vlan: None,
            ending,
        }
    }

    /// Runs the reflector on `rx` into `tx`; a watchdog stops it after 20 s so that a
    /// reflector missing its port's failure fails the test instead of hanging it.
    fn reflect_until_it_fails<R: Receiver + Send, B: Backend + Send>(
        rx: &mut R,
        tx: &mut B,
    ) -> ReflectReport {
        let stop = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while !done.load(Ordering::Relaxed) && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                stop.store(true, Ordering::Relaxed);
            });
            let r = run_reflect(rx, tx, &opts(), &stop, None);
            done.store(true, Ordering::Relaxed);
            r
        })
    }

    #[test]
    fn a_port_that_fails_keeps_what_was_reflected_and_names_the_failure() {
        for (ending, said) in [
            (Ending::PollFails, "receiving: the ring broke"),
            (Ending::GoesQuiet, "receiving: interface `x` went away"),
        ] {
            let mut rx = dying(ending);
            let mut tx = Sink::new(8, 8);
            let r = reflect_until_it_fails(&mut rx, &mut tx);
            assert_eq!((r.received, r.reflected), (5, 5));
            assert!(r.failure.as_deref().unwrap().starts_with(said), "{r:?}");
        }
        // The transmit side fails after taking two frames of a batch of five.
        let mut rx = dying(Ending::GoesQuiet);
        let mut tx = Sink {
            fails_after: Some(2),
            ..Sink::new(8, 2)
        };
        let r = reflect_until_it_fails(&mut rx, &mut tx);
        assert_eq!((r.received, r.reflected, r.tx_dropped), (5, 2, 3));
        assert!(
            r.failure
                .as_deref()
                .unwrap()
                .starts_with("sending back: the link went down"),
            "{r:?}"
        );
    }
}
