//! strobe's own check of the offset between two hosts' clocks, NTP-style, over UDP on the
//! management network: reported beside each agent's sync source ([`crate::timesync`]), so
//! the controller does not merge one-way latency across hosts on the sources' word alone.
//!
//! The agent runs a responder, [`ClockEcho`]; the controller (or another agent) runs
//! [`measure`] against it. One exchange:
//!
//! ```text
//!   measuring side                         responder
//!   t1 = clock, sendto  ── request ──▶  t2 = kernel receive stamp
//!                                       t3 = clock, sendto
//!   t4 = kernel receive stamp ◀── reply ──
//! ```
//!
//! θ = ((t2 − t1) + (t3 − t4)) / 2 estimates the responder's clock minus ours, and
//! δ = (t4 − t1) − (t3 − t2) is the round trip without the responder's dwell. θ is off by
//! half the difference of the two one-way delays, and since neither delay is negative, the
//! true offset lies within θ ± δ/2 ([`Sample`]). [`estimate`] keeps the exchanges of least δ
//! (NTP's clock filter idea): the median θ of the lowest-δ quarter.
//!
//! The one-way delays are the same path in both directions: a user-space clock read, sendto
//! and the network, ending at the kernel's receive stamp (SO_TIMESTAMPNS). Neither end's
//! wake-up latency or processing enters θ, only the difference between the two sendto
//! paths, which run the same code ([`sys`]). Every stamp goes through [`crate::test_clock`],
//! so a test can shift one end's clock by a known amount and check that this finds it.
//!
//! Wire format (little-endian, 48 bytes both ways, so a reply is never larger than its
//! request):
//!
//! | bytes  | field |
//! | ---    | --- |
//! | 0..7   | magic `STRBCLK` |
//! | 7      | version, `1` (ASCII; the first 8 bytes read `STRBCLK1`) |
//! | 8      | kind: 1 request, 2 reply |
//! | 9..16  | zero |
//! | 16..24 | id, chosen by the measuring side, echoed |
//! | 24..32 | t1, echoed |
//! | 32..40 | t2 (0 in a request) |
//! | 40..48 | t3 (0 in a request) |
//!
//! Datagrams are untrusted: [`ClockMessage::decode`] takes any bytes and refuses anything
//! but exactly this; the responder answers requests only, the measuring side takes replies
//! only to its own outstanding requests.

mod sys;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Length of every clock-check datagram.
pub const WIRE_LEN: usize = 48;
/// The first 7 bytes of every clock-check datagram.
pub const MAGIC: [u8; 7] = *b"STRBCLK";
/// The wire format's version, byte 7.
pub const VERSION: u8 = b'1';

const KIND_AT: usize = 8;
const ID_AT: usize = 16;
const T1_AT: usize = 24;
const T2_AT: usize = 32;
const T3_AT: usize = 40;

/// Requests [`measure`] sends by default.
pub const DEFAULT_SAMPLES: usize = 64;

/// Pause between one exchange's reply and the next request: none; see [`measure`] for why.
pub const SAMPLE_GAP: Duration = Duration::ZERO;

/// How often the responder's thread looks at its stop flag.
const RESPONDER_POLL: Duration = Duration::from_millis(20);

/// A request or a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    Request,
    Reply,
}

/// One clock-check datagram, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockMessage {
    pub kind: MessageKind,
    /// Chosen by the measuring side; the reply echoes it.
    pub id: u64,
    /// The measuring side's send stamp; the reply echoes it.
    pub t1: u64,
    /// Reply only: the responder's receive stamp of the request.
    pub t2: u64,
    /// Reply only: the responder's send stamp of the reply.
    pub t3: u64,
}

impl ClockMessage {
    /// The message's 48 bytes.
    pub fn encode(&self) -> [u8; WIRE_LEN] {
        let mut out = [0u8; WIRE_LEN];
        out[..7].copy_from_slice(&MAGIC);
        out[7] = VERSION;
        out[KIND_AT] = match self.kind {
            MessageKind::Request => 1,
            MessageKind::Reply => 2,
        };
        for (at, value) in [
            (ID_AT, self.id),
            (T1_AT, self.t1),
            (T2_AT, self.t2),
            (T3_AT, self.t3),
        ] {
            out[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        out
    }

    /// The message in `bytes`, or None for anything that is not exactly one message of this
    /// version (wrong length, magic, version or kind, reserved bytes not zero). Never panics.
    pub fn decode(bytes: &[u8]) -> Option<ClockMessage> {
        let bytes: &[u8; WIRE_LEN] = bytes.try_into().ok()?;
        if bytes[..7] != MAGIC || bytes[7] != VERSION || bytes[KIND_AT + 1..ID_AT] != [0; 7] {
            return None;
        }
        let kind = match bytes[KIND_AT] {
            1 => MessageKind::Request,
            2 => MessageKind::Reply,
            _ => return None,
        };
        let field = |at: usize| {
            let mut le = [0u8; 8];
            le.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(le)
        };
        Some(ClockMessage {
            kind,
            id: field(ID_AT),
            t1: field(T1_AT),
            t2: field(T2_AT),
            t3: field(T3_AT),
        })
    }
}

/// The reply to the datagram `request` received at `t2` (the responder's shifted kernel
/// stamp), with t3 still 0 (stamped as it is sent); None when `request` is not a request.
pub fn reply_to(request: &[u8], t2: u64) -> Option<[u8; WIRE_LEN]> {
    let request = ClockMessage::decode(request)?;
    if request.kind != MessageKind::Request {
        return None;
    }
    Some(
        ClockMessage {
            kind: MessageKind::Reply,
            id: request.id,
            t1: request.t1,
            t2,
            t3: 0,
        }
        .encode(),
    )
}

/// One exchange's four stamps, in ns: t1 and t4 on the measuring side's clock, t2 and t3 on
/// the responder's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Request sent (the clock read just before sendto).
    pub t1: u64,
    /// Request received (the responder's kernel receive stamp).
    pub t2: u64,
    /// Reply sent (the responder's clock read just before sendto).
    pub t3: u64,
    /// Reply received (the kernel receive stamp).
    pub t4: u64,
}

impl Sample {
    /// 2θ = (t2 − t1) + (t3 − t4): twice the responder's clock minus ours, exact.
    fn offset_x2(&self) -> i128 {
        (i128::from(self.t2) - i128::from(self.t1)) + (i128::from(self.t3) - i128::from(self.t4))
    }

    /// θ = ((t2 − t1) + (t3 − t4)) / 2, rounded down: the responder's clock minus ours,
    /// off by half the difference of the two one-way delays (saturating at i64's range).
    pub fn offset_ns(&self) -> i64 {
        clamp_i64(self.offset_x2().div_euclid(2))
    }

    /// δ = (t4 − t1) − (t3 − t2): the two one-way delays together. None when the stamps
    /// cannot be of one real exchange (the reply received before the request was sent, sent
    /// before the request arrived, or a δ below 0: a clock stepped in between).
    pub fn delay_ns(&self) -> Option<u64> {
        let round_trip = self.t4.checked_sub(self.t1)?;
        let dwell = self.t3.checked_sub(self.t2)?;
        round_trip.checked_sub(dwell)
    }
}

fn clamp_i64(value: i128) -> i64 {
    value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// What one measurement found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetEstimate {
    /// The target's clock minus ours, ns: the median θ of the exchanges in the lowest
    /// quarter by δ (at least one).
    pub offset_ns: i64,
    /// A bound on |offset_ns − the true offset| that holds whatever the path's asymmetry:
    /// each exchange k places the true offset within θ_k ± δ_k/2 (both one-way delays are
    /// ≥ 0, and the clocks do not drift apart measurably within one round trip), so
    /// |offset_ns − true| ≤ |offset_ns − θ_k| + δ_k/2; this is the least of those over all
    /// exchanges, rounded up, about δ_min/2. The typical error is far smaller: it is half
    /// the *difference* of the two one-way delays, which the check keeps symmetric.
    pub bound_ns: u64,
    /// The least round trip δ among the exchanges, ns.
    pub min_delay_ns: u64,
    /// Requests sent.
    pub samples: usize,
    /// Requests answered with a usable reply.
    pub answered: usize,
}

/// The estimate from `exchanges` (the answered ones, of `sent` requests); None when no
/// exchange is usable ([`Sample::delay_ns`] is None for all of them).
///
/// The exchanges are ranked by δ and the lowest quarter (at least one) kept: a longer δ
/// means queueing or a preemption somewhere on the way, and those delays are rarely the
/// same both ways, so θ's error grows with δ. Among those kept, the median θ: it keeps one
/// unlucky fast exchange from deciding alone, as the minimum-δ sample of NTP's clock filter
/// would, and is not pulled by the one that is wrong.
pub fn estimate(exchanges: &[Sample], sent: usize) -> Option<OffsetEstimate> {
    let mut usable: Vec<(u64, i128)> = exchanges
        .iter()
        .filter_map(|s| Some((s.delay_ns()?, s.offset_x2())))
        .collect();
    if usable.is_empty() {
        return None;
    }
    usable.sort_by_key(|&(delay, _)| delay);
    let min_delay_ns = usable[0].0;
    let keep = usable.len().div_ceil(4);
    let mut kept: Vec<i128> = usable[..keep].iter().map(|&(_, x2)| x2).collect();
    kept.sort_unstable();
    let median_x2 = if keep % 2 == 1 {
        kept[keep / 2]
    } else {
        (kept[keep / 2 - 1] + kept[keep / 2]).div_euclid(2)
    };
    let offset_ns = clamp_i64(median_x2.div_euclid(2));
    // In doubled units, exactly: |2·offset − 2θ_k| + δ_k, then halved and rounded up.
    let bound_x2 = usable
        .iter()
        .map(|&(delay, x2)| (2 * i128::from(offset_ns) - x2).unsigned_abs() + u128::from(delay))
        .min()
        .unwrap_or(0);
    Some(OffsetEstimate {
        offset_ns,
        bound_ns: u64::try_from(bound_x2.div_ceil(2)).unwrap_or(u64::MAX),
        min_delay_ns,
        samples: sent,
        answered: exchanges.len(),
    })
}

/// What [`run`] needs from a socket: the seam the unit tests replace.
trait Link {
    /// Stamps t1 into `request` (the clock read right before sendto), sends it to the
    /// target; returns t1.
    fn send_request(&mut self, request: &mut [u8; WIRE_LEN]) -> io::Result<u64>;
    /// The next datagram within `wait`: (bytes copied into `buf`, whether it was longer,
    /// its shifted kernel receive stamp); None when none came.
    fn receive(
        &mut self,
        buf: &mut [u8],
        wait: Duration,
    ) -> io::Result<Option<(usize, bool, Option<u64>)>>;
}

struct SocketLink {
    sock: UdpSocket,
    target: SocketAddr,
}

impl Link for SocketLink {
    fn send_request(&mut self, request: &mut [u8; WIRE_LEN]) -> io::Result<u64> {
        sys::send_stamped(&self.sock, request, T1_AT, self.target)
    }

    fn receive(
        &mut self,
        buf: &mut [u8],
        wait: Duration,
    ) -> io::Result<Option<(usize, bool, Option<u64>)>> {
        Ok(sys::recv_stamped(&self.sock, buf, wait)?.map(|d| (d.len, d.truncated, d.kernel_ns)))
    }
}

/// Measures the offset of the clock of the [`ClockEcho`] at `target` from ours (the
/// target's minus ours) with `samples` exchanges ([`DEFAULT_SAMPLES`] is a good number),
/// one at a time and back to back: each request goes out as soon as the previous reply came
/// ([`SAMPLE_GAP`] is zero).
///
/// One at a time, because a request that meets the previous reply on its way, or follows
/// it into a busy queue, is an asymmetric exchange the filter would have to throw away.
/// Back to back, because then both ends do the same thing right before their stamp and
/// sendto: each has just received a datagram (the responder the request, we the previous
/// reply), so both send paths run equally warm. Spacing the requests apart breaks that
/// symmetry: after a sleep our send path is cold (caches, an idle CPU) while the
/// responder's follows its receive at once. Measured between two namespaces over veth (one
/// machine, one clock, see tests/clockcheck.rs): back to back, the fastest quarter's one-way
/// delays were about 0.67 µs out and 0.72 µs back, the estimates typically within 50 ns of
/// the truth (median error −20 ns; the worst of 1,600 was 0.48 µs off); 50 µs–5 ms apart,
/// the way out took 1.3–3 µs against 0.9–1.1 µs back, the estimates 0.2–0.9 µs off, and
/// on an otherwise idle machine with 1–5 ms gaps 10 µs against 2.4 µs, 3–5 µs off.
/// 64 exchanges take about 0.4 ms there; on a LAN, 64 round trips.
///
/// `timeout` bounds the whole measurement: each reply is awaited for at most a quarter of
/// it, a request whose reply does not come is skipped (a late reply still counts), and when
/// `timeout` has passed the measurement ends with what it has. No reply at all is an error
/// naming `target`, and so is a socket that cannot send there.
pub fn measure(
    target: SocketAddr,
    samples: usize,
    timeout: Duration,
) -> Result<OffsetEstimate, String> {
    measure_spaced(target, samples, timeout, SAMPLE_GAP)
}

/// [`measure`] with the pause between exchanges given: for experiments with the spacing.
#[doc(hidden)]
pub fn measure_spaced(
    target: SocketAddr,
    samples: usize,
    timeout: Duration,
    gap: Duration,
) -> Result<OffsetEstimate, String> {
    let (exchanges, sent) = measure_exchanges(target, samples, timeout, gap)?;
    estimate(&exchanges, sent).ok_or_else(|| inconsistent(target, exchanges.len()))
}

/// The exchanges of one measurement, unfiltered, and how many requests went: for studying
/// the path (the one-way delays, when both ends share one clock).
#[doc(hidden)]
pub fn measure_exchanges(
    target: SocketAddr,
    samples: usize,
    timeout: Duration,
    gap: Duration,
) -> Result<(Vec<Sample>, usize), String> {
    if samples == 0 {
        return Err(format!("clock check of {target}: no samples asked for"));
    }
    let unspecified = match target {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let sock = UdpSocket::bind(unspecified)
        .map_err(|e| format!("clock check of {target}: cannot open a UDP socket: {e}"))?;
    sys::enable_rx_timestamps(&sock).map_err(|e| {
        format!("clock check of {target}: cannot enable kernel receive timestamps: {e}")
    })?;
    let first_id = RandomState::new().build_hasher().finish();
    let mut link = SocketLink { sock, target };
    exchange_all(&mut link, target, samples, timeout, gap, first_id)
}

fn inconsistent(target: SocketAddr, replies: usize) -> String {
    format!(
        "clock check of {target}: none of {replies} replies is consistent (a clock stepped \
         during the check?)"
    )
}

/// [`exchange_all`], then [`estimate`].
#[cfg(test)]
fn run(
    link: &mut impl Link,
    target: SocketAddr,
    samples: usize,
    timeout: Duration,
    gap: Duration,
    first_id: u64,
) -> Result<OffsetEstimate, String> {
    let (exchanges, sent) = exchange_all(link, target, samples, timeout, gap, first_id)?;
    estimate(&exchanges, sent).ok_or_else(|| inconsistent(target, exchanges.len()))
}

/// The exchanges over any [`Link`], one at a time, and how many requests went; an error
/// when none was answered.
fn exchange_all(
    link: &mut impl Link,
    target: SocketAddr,
    samples: usize,
    timeout: Duration,
    gap: Duration,
    first_id: u64,
) -> Result<(Vec<Sample>, usize), String> {
    let start = Instant::now();
    let deadline = start + timeout;
    let reply_wait = timeout / 4;
    // (id, t1) of every request sent; None once answered.
    let mut outstanding: Vec<Option<(u64, u64)>> = Vec::with_capacity(samples);
    let mut exchanges = Vec::with_capacity(samples);
    let mut buf = [0u8; WIRE_LEN + 16];
    for n in 0..samples {
        if n > 0 && !gap.is_zero() {
            let left = deadline.saturating_duration_since(Instant::now());
            std::thread::sleep(gap.min(left));
        }
        let sent_at = Instant::now();
        if sent_at >= deadline {
            break;
        }
        let id = first_id.wrapping_add(n as u64);
        let mut request = ClockMessage {
            kind: MessageKind::Request,
            id,
            t1: 0,
            t2: 0,
            t3: 0,
        }
        .encode();
        let t1 = link
            .send_request(&mut request)
            .map_err(|e| format!("clock check of {target}: cannot send: {e}"))?;
        outstanding.push(Some((id, t1)));
        let wait_until = (sent_at + reply_wait).min(deadline);
        loop {
            let now = Instant::now();
            if now >= wait_until {
                break;
            }
            let Some((len, truncated, stamp)) = link
                .receive(&mut buf, wait_until - now)
                .map_err(|e| format!("clock check of {target}: cannot receive: {e}"))?
            else {
                continue;
            };
            let Some(reply) = ClockMessage::decode(&buf[..len]).filter(|m| {
                !truncated
                    && m.kind == MessageKind::Reply
                    && m.id.wrapping_sub(first_id) <= n as u64
            }) else {
                continue;
            };
            let slot = &mut outstanding[reply.id.wrapping_sub(first_id) as usize];
            let (Some((_, t1)), Some(t4)) = (*slot, stamp) else {
                continue;
            };
            if reply.t1 != t1 {
                continue;
            }
            *slot = None;
            exchanges.push(Sample {
                t1,
                t2: reply.t2,
                t3: reply.t3,
                t4,
            });
            if reply.id == id {
                break;
            }
        }
    }
    let sent = outstanding.len();
    if exchanges.is_empty() {
        return Err(format!(
            "clock check of {target}: no reply to {sent} requests within {timeout:?} \
             (is a strobe agent answering there?)"
        ));
    }
    Ok((exchanges, sent))
}

/// The responder of the clock check: one thread answering every request on a UDP socket,
/// stopped and joined on drop.
pub struct ClockEcho {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ClockEcho {
    /// Binds a UDP socket to `addr` (in the calling thread's network namespace; port 0
    /// picks one) and starts answering on it.
    pub fn start(addr: SocketAddr) -> io::Result<ClockEcho> {
        let sock = UdpSocket::bind(addr)?;
        sys::enable_rx_timestamps(&sock)?;
        let local = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("clock-echo".into())
            .spawn({
                let stop = Arc::clone(&stop);
                move || serve(&sock, &stop)
            })?;
        Ok(ClockEcho {
            local,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it answers on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for ClockEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The responder's loop: until `stop`, answer each request with t2 = its kernel receive
/// stamp and t3 = the clock right before sendto; anything else is ignored.
fn serve(sock: &UdpSocket, stop: &AtomicBool) {
    let mut buf = [0u8; WIRE_LEN + 16];
    while !stop.load(Ordering::Relaxed) {
        let datagram = match sys::recv_stamped(sock, &mut buf, RESPONDER_POLL) {
            Ok(Some(datagram)) => datagram,
            Ok(None) => continue,
            Err(_) => {
                // Nothing a responder can do about a failing socket but not spin on it.
                std::thread::sleep(RESPONDER_POLL);
                continue;
            }
        };
        let (Some(from), Some(t2), false) = (datagram.from, datagram.kernel_ns, datagram.truncated)
        else {
            continue;
        };
        if let Some(mut reply) = reply_to(&buf[..datagram.len], t2) {
            let _ = sys::send_stamped(sock, &mut reply, T3_AT, from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn exchange(t1: u64, forward: u64, dwell: u64, back: u64, offset: i64) -> Sample {
        let t2 = (t1 + forward).checked_add_signed(offset).unwrap();
        Sample {
            t1,
            t2,
            t3: t2 + dwell,
            t4: t1 + forward + dwell + back,
        }
    }

    #[test]
    fn one_exchange_gives_theta_and_delta() {
        // Forward 10 µs, back 6 µs, the responder 37 µs ahead: θ is off by (10 − 6)/2.
        let s = exchange(1_000_000_000, 10_000, 3_000, 6_000, 37_000);
        assert_eq!(s.offset_ns(), 37_000 + 2_000);
        assert_eq!(s.delay_ns(), Some(16_000));
        let e = estimate(&[s], 1).unwrap();
        assert_eq!(e.offset_ns, 39_000);
        assert_eq!(e.bound_ns, 8_000);
        assert_eq!(e.min_delay_ns, 16_000);
        assert!((e.offset_ns - 37_000).unsigned_abs() <= e.bound_ns);
        // A responder behind us, odd sums round down.
        let s = exchange(5_000_000, 7_001, 100, 7_000, -25_000);
        assert_eq!(s.offset_ns(), -25_000);
        assert_eq!(s.delay_ns(), Some(14_001));
    }

    #[test]
    fn impossible_exchanges_are_not_used() {
        let good = exchange(1_000_000, 5_000, 1_000, 5_000, 0);
        let stepped = Sample {
            t4: good.t1 + 500,
            ..good
        };
        let reversed = Sample {
            t3: good.t2 - 1,
            ..good
        };
        let early = Sample {
            t4: good.t1 - 1,
            ..good
        };
        for bad in [stepped, reversed, early] {
            assert_eq!(bad.delay_ns(), None, "{bad:?}");
            assert_eq!(estimate(&[bad], 1), None);
        }
        let e = estimate(&[stepped, good, reversed], 5).unwrap();
        assert_eq!((e.offset_ns, e.samples, e.answered), (0, 5, 3));
    }

    /// A deterministic generator for synthetic delays (xorshift).
    struct Noise(u64);
    impl Noise {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[test]
    fn the_filter_finds_the_offset_through_asymmetric_noise_and_outliers() {
        for &offset in &[37_000i64, -25_000, 0, 1_234_567_890] {
            let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
            let mut exchanges = Vec::new();
            for n in 0..64u64 {
                // A base of 8 µs each way with 0-300 ns of jitter; queueing of up to
                // 200 µs on the way back for a third of the exchanges (asymmetric: never
                // forward), and every seventh exchange preempted for a ms on the way out.
                let mut forward = 8_000 + noise.below(300);
                let mut back = 8_000 + noise.below(300);
                if noise.below(3) == 0 {
                    back += noise.below(200_000);
                }
                if n % 7 == 0 {
                    forward += 1_000_000;
                }
                exchanges.push(exchange(
                    10_000_000_000 + n * 1_000_000,
                    forward,
                    2_000 + noise.below(50_000),
                    back,
                    offset,
                ));
            }
            let e = estimate(&exchanges, 70).unwrap();
            assert!(
                (e.offset_ns - offset).abs() <= 150,
                "{offset}: {e:?} (θ of the fastest quarter is within the jitter)"
            );
            assert!((e.offset_ns - offset).unsigned_abs() <= e.bound_ns, "{e:?}");
            assert!(e.min_delay_ns >= 16_000 && e.min_delay_ns < 16_600, "{e:?}");
            assert!(e.bound_ns < 8_600, "{e:?}");
            assert_eq!((e.samples, e.answered), (70, 64));
            // The plain mean of θ is pulled far off by the outliers.
            let mean = exchanges
                .iter()
                .map(|s| s.offset_ns() as i128)
                .sum::<i128>()
                / 64;
            assert!((mean - offset as i128).abs() > 5_000, "{mean}");
        }
    }

    #[test]
    fn a_systematic_asymmetry_shows_as_half_of_it_and_stays_within_the_bound() {
        // Forward always 2 µs slower than back: nothing in the stamps can tell, θ is off by
        // 1 µs; the bound still covers the truth.
        let exchanges: Vec<Sample> = (0..16)
            .map(|n| exchange(1_000_000 + n * 100_000, 12_000, 500, 10_000, 500))
            .collect();
        let e = estimate(&exchanges, 16).unwrap();
        assert_eq!(e.offset_ns, 1_500);
        assert_eq!(e.bound_ns, 11_000);
        assert!((e.offset_ns - 500).unsigned_abs() <= e.bound_ns);
    }

    #[test]
    fn the_bound_holds_for_any_exchanges_of_nonnegative_delays() {
        let mut noise = Noise(42);
        for _ in 0..500 {
            let offset = noise.below(2_000_000) as i64 - 1_000_000;
            let count = 1 + noise.below(40) as usize;
            let exchanges: Vec<Sample> = (0..count)
                .map(|n| {
                    exchange(
                        1_000_000_000 + n as u64 * 10_000_000,
                        noise.below(1_000_000),
                        noise.below(10_000),
                        noise.below(1_000_000),
                        offset,
                    )
                })
                .collect();
            let e = estimate(&exchanges, count).unwrap();
            assert!(
                (e.offset_ns - offset).unsigned_abs() <= e.bound_ns,
                "{offset} {e:?}"
            );
            assert!(e.bound_ns <= e.min_delay_ns / 2 + e.min_delay_ns % 2 + 1_000_000);
        }
    }

    #[test]
    fn messages_round_trip_and_only_requests_are_answered() {
        let request = ClockMessage {
            kind: MessageKind::Request,
            id: 0x0102_0304_0506_0708,
            t1: u64::MAX,
            t2: 0,
            t3: 0,
        };
        let bytes = request.encode();
        assert_eq!(&bytes[..8], b"STRBCLK1");
        assert_eq!(bytes[8], 1);
        assert_eq!(bytes[16..24], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(ClockMessage::decode(&bytes), Some(request));

        let reply = reply_to(&bytes, 77).unwrap();
        let decoded = ClockMessage::decode(&reply).unwrap();
        assert_eq!(
            decoded,
            ClockMessage {
                kind: MessageKind::Reply,
                t2: 77,
                ..request
            }
        );
        assert_eq!(reply_to(&reply, 78), None, "replies are not answered");

        let mut bad = bytes;
        bad[7] = b'2';
        assert_eq!(ClockMessage::decode(&bad), None, "another version");
        let mut bad = bytes;
        bad[8] = 3;
        assert_eq!(ClockMessage::decode(&bad), None, "another kind");
        let mut bad = bytes;
        bad[12] = 1;
        assert_eq!(ClockMessage::decode(&bad), None, "reserved bytes set");
        let mut bad = bytes;
        bad[0] = b's';
        assert_eq!(ClockMessage::decode(&bad), None, "another magic");
        assert_eq!(ClockMessage::decode(&bytes[..47]), None);
        assert_eq!(
            ClockMessage::decode(&[bytes.as_slice(), &[0]].concat()),
            None
        );
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_not_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let _ = ClockMessage::decode(&bytes);
            let _ = reply_to(&bytes, 1);
        }

        #[test]
        fn mutated_messages_never_panic_and_decode_to_what_they_say(
            id in any::<u64>(), t1 in any::<u64>(), t2 in any::<u64>(), t3 in any::<u64>(),
            at in 0usize..WIRE_LEN, byte in any::<u8>(),
        ) {
            let message = ClockMessage { kind: MessageKind::Reply, id, t1, t2, t3 };
            let mut bytes = message.encode();
            prop_assert_eq!(ClockMessage::decode(&bytes), Some(message));
            bytes[at] = byte;
            if let Some(decoded) = ClockMessage::decode(&bytes) {
                prop_assert_eq!(decoded.encode(), bytes);
            }
        }

        #[test]
        fn any_stamps_estimate_without_panicking(
            stamps in proptest::collection::vec(any::<(u64, u64, u64, u64)>(), 0..20),
        ) {
            let exchanges: Vec<Sample> = stamps
                .iter()
                .map(|&(t1, t2, t3, t4)| Sample { t1, t2, t3, t4 })
                .collect();
            let _ = estimate(&exchanges, exchanges.len());
        }
    }

    /// A simulated responder behind the [`Link`] seam: `offset` ahead of us, replies after
    /// `one_way` each way, some requests lost, and junk in between.
    struct FakeLink {
        offset: i64,
        one_way: u64,
        clock: u64,
        sent: u64,
        lose: fn(u64) -> bool,
        junk: bool,
        inbox: VecDeque<(Vec<u8>, Option<u64>)>,
    }

    impl FakeLink {
        fn new(offset: i64, lose: fn(u64) -> bool) -> FakeLink {
            FakeLink {
                offset,
                one_way: 9_000,
                clock: 1_700_000_000_000_000_000,
                sent: 0,
                lose,
                junk: false,
                inbox: VecDeque::new(),
            }
        }
    }

    impl Link for FakeLink {
        fn send_request(&mut self, request: &mut [u8; WIRE_LEN]) -> io::Result<u64> {
            self.clock += 1_000_000;
            let t1 = self.clock;
            request[T1_AT..T1_AT + 8].copy_from_slice(&t1.to_le_bytes());
            self.sent += 1;
            if self.junk {
                self.inbox.push_back((b"junk".to_vec(), Some(t1)));
                let mut not_ours = *request;
                not_ours[T1_AT] ^= 1; // a reply to nobody's request
                let forged = reply_to(&not_ours, 1).unwrap();
                self.inbox.push_back((forged.to_vec(), Some(t1 + 1)));
                self.inbox.push_back((request.to_vec(), Some(t1 + 2)));
            }
            if !(self.lose)(self.sent) {
                let t2 = (t1 + self.one_way).saturating_add_signed(self.offset);
                let mut reply = reply_to(request, t2).unwrap();
                let t3 = t2 + 500;
                reply[T3_AT..T3_AT + 8].copy_from_slice(&t3.to_le_bytes());
                self.inbox
                    .push_back((reply.to_vec(), Some(t1 + 2 * self.one_way + 500)));
            }
            Ok(t1)
        }

        fn receive(
            &mut self,
            buf: &mut [u8],
            wait: Duration,
        ) -> io::Result<Option<(usize, bool, Option<u64>)>> {
            match self.inbox.pop_front() {
                Some((bytes, stamp)) => {
                    let len = bytes.len().min(buf.len());
                    buf[..len].copy_from_slice(&bytes[..len]);
                    Ok(Some((len, bytes.len() > buf.len(), stamp)))
                }
                None => {
                    std::thread::sleep(wait);
                    Ok(None)
                }
            }
        }
    }

    fn target() -> SocketAddr {
        "198.18.251.2:4000".parse().unwrap()
    }

    #[test]
    fn the_measurement_finds_the_offset_skips_lost_replies_and_ignores_junk() {
        let mut link = FakeLink::new(-25_000, |n| n % 5 == 0);
        link.junk = true;
        let e = run(
            &mut link,
            target(),
            20,
            Duration::from_millis(400),
            Duration::ZERO,
            u64::MAX - 3, // ids wrap
        )
        .unwrap();
        assert_eq!(e.offset_ns, -25_000);
        assert_eq!((e.samples, e.answered), (20, 16));
        assert_eq!((e.min_delay_ns, e.bound_ns), (18_000, 9_000));
    }

    #[test]
    fn no_reply_at_all_is_an_error_naming_the_target_within_the_timeout() {
        let mut link = FakeLink::new(0, |_| true);
        let started = Instant::now();
        let err = run(
            &mut link,
            target(),
            64,
            Duration::from_millis(80),
            Duration::ZERO,
            7,
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(err.contains("198.18.251.2:4000"), "{err}");
        assert!(err.contains("no reply"), "{err}");
        assert!(
            link.sent <= 5,
            "each reply awaited a quarter of the timeout: {}",
            link.sent
        );
    }

    #[test]
    fn measuring_against_nothing_on_loopback_fails_in_time() {
        // A bound port where nobody answers.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let started = Instant::now();
        let err = measure(silent.local_addr().unwrap(), 8, Duration::from_millis(100)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            err.contains(&silent.local_addr().unwrap().to_string()),
            "{err}"
        );
        assert!(measure(silent.local_addr().unwrap(), 0, Duration::from_millis(1)).is_err());
    }

    #[test]
    fn the_responder_answers_requests_only_and_stops_on_drop() {
        let echo = ClockEcho::start("127.0.0.1:0".parse().unwrap()).unwrap();
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let request = ClockMessage {
            kind: MessageKind::Request,
            id: 99,
            t1: 1234,
            t2: 0,
            t3: 0,
        };
        // Junk first: ignored, the request after it answered.
        sock.send_to(b"hello", echo.local_addr()).unwrap();
        let mut reply = request;
        reply.kind = MessageKind::Reply;
        sock.send_to(&reply.encode(), echo.local_addr()).unwrap();
        sock.send_to(&request.encode(), echo.local_addr()).unwrap();
        let mut buf = [0u8; 100];
        let (len, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(from, echo.local_addr());
        let got = ClockMessage::decode(&buf[..len]).unwrap();
        assert_eq!((got.kind, got.id, got.t1), (MessageKind::Reply, 99, 1234));
        assert!(got.t2 > 0 && got.t2 <= got.t3, "{got:?}");
        let started = Instant::now();
        drop(echo);
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}
