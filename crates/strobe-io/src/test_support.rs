//! Fixtures shared by strobe-io's tests and the tests of the crates above it: a veth pair in
//! a network namespace of its own, commands that must succeed, and frames to send and take
//! back. Built for tests only (`cfg(test)` or the `test-support` feature); not strobe's API.
//!
//! Everything that creates kernel state panics with the failing command's stderr, since a
//! test cannot go on without it, and removes that state again on drop, also when the test
//! panics.

use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etherparse::PacketBuilder;

use crate::{Backend, BackendStats, Receiver, RxTimestamp};

/// Runs `args[0]` with the rest as its arguments and returns its stdout; panics with its
/// stderr when it cannot start or fails.
pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A named network namespace, deleted on drop together with every interface in it.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Adds namespace `name`; it must not exist yet.
    pub fn add(name: impl Into<String>) -> Netns {
        let name = name.into();
        run(&["ip", "netns", "add", &name]);
        Netns { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NS ARGS…`; returns its stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        run(&[&["ip", "-n", &self.name], args].concat())
    }

    /// `ip netns exec NS ARGS…`: runs a command inside the namespace; returns its stdout.
    pub fn exec(&self, args: &[&str]) -> String {
        run(&[&["ip", "netns", "exec", &self.name], args].concat())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stderr(Stdio::null())
            .status();
    }
}

/// A veth pair `a` <-> `b`, both up, inside a namespace of its own with IPv6 off (router
/// solicitations and MLD reports would be stray frames on the link). Dropping it deletes the
/// namespace and the pair with it.
pub struct VethPair {
    netns: Netns,
    pub a: String,
    pub b: String,
}

impl VethPair {
    /// Namespace `stest-PID-TAG`: the pid keeps test processes apart, `tag` the tests running
    /// in parallel in one process. The interfaces are `stestPIDa` and `stestPIDb`, in the
    /// namespace only; at most 13 bytes, which leaves room for a suffix within IFNAMSIZ.
    pub fn new(tag: &str) -> VethPair {
        Self::create(tag, None)
    }

    /// Like [`VethPair::new`], with the MAC addresses of `a` and `b` given.
    pub fn with_macs(tag: &str, mac_a: [u8; 6], mac_b: [u8; 6]) -> VethPair {
        Self::create(tag, Some((mac_a, mac_b)))
    }

    fn create(tag: &str, macs: Option<([u8; 6], [u8; 6])>) -> VethPair {
        let pid = std::process::id();
        // From here on the guard deletes the namespace (and the veths in it) on any failure.
        let pair = VethPair {
            netns: Netns::add(format!("stest-{pid}-{tag}")),
            a: format!("stest{pid}a"),
            b: format!("stest{pid}b"),
        };
        for key in ["all", "default"] {
            let sysctl = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            pair.exec(&["sysctl", "-qw", &sysctl]);
        }
        pair.ip(&[
            "link", "add", &pair.a, "type", "veth", "peer", "name", &pair.b,
        ]);
        let addresses = match macs {
            Some((mac_a, mac_b)) => [Some(mac_text(mac_a)), Some(mac_text(mac_b))],
            None => [None, None],
        };
        for (iface, mac) in [&pair.a, &pair.b].into_iter().zip(&addresses) {
            let mut args = vec!["link", "set", iface.as_str()];
            if let Some(mac) = mac {
                args.extend(["address", mac.as_str()]);
            }
            args.push("up");
            pair.ip(&args);
        }
        pair
    }

    /// The namespace's name.
    pub fn ns(&self) -> &str {
        self.netns.name()
    }

    /// The namespace as the backends' `netns` parameter takes it.
    pub fn netns(&self) -> Option<&str> {
        Some(self.netns.name())
    }

    /// `ip -n NS ARGS…`; returns its stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        self.netns.ip(args)
    }

    /// Runs a command inside the namespace; returns its stdout.
    pub fn exec(&self, args: &[&str]) -> String {
        self.netns.exec(args)
    }

    /// Asserts that no XDP program stays on `iface` once what attached it was dropped.
    /// Closing the link's descriptor detaches at once, unless another test thread is
    /// spawning a process at that moment: the child holds a copy of every descriptor until
    /// its exec closes them (close-on-exec), so the last reference, and the detach, can lag
    /// by a few milliseconds. A program still there after seconds is left behind for real.
    pub fn assert_no_xdp(&self, iface: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let shown = self.ip(&["link", "show", "dev", iface]);
            if !shown.contains("xdp") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "XDP program left behind: {shown}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The promiscuity count of `iface`, as `ip -d link show` reports it.
    pub fn promiscuity(&self, iface: &str) -> u32 {
        let shown = self.ip(&["-d", "link", "show", iface]);
        shown
            .split_once("promiscuity ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|count| count.parse().ok())
            .unwrap_or_else(|| panic!("no promiscuity count in `ip -d link show`: {shown}"))
    }
}

/// `02:53:54:00:00:01`, as `ip` and tcpdump take a MAC address.
pub fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// Source and destination MAC of the frames [`udp_frame`] builds.
pub const SRC_MAC: [u8; 6] = [0x02, 0x53, 0x54, 0x00, 0x00, 0x01];
pub const DST_MAC: [u8; 6] = [0x02, 0x53, 0x54, 0x00, 0x00, 0x02];

/// An Ethernet/IPv4/UDP frame of `len` bytes (no FCS), 198.18.0.1 to 198.19.0.1, whose
/// payload starts with `seq` and goes on with bytes derived from it; built by etherparse, an
/// independent encoder, with its checksums.
pub fn udp_frame(seq: u32, len: usize) -> Vec<u8> {
    let payload: Vec<u8> = seq
        .to_be_bytes()
        .into_iter()
        .chain((4..len - 14 - 20 - 8).map(|i| (seq as usize * 31 + i * 7) as u8))
        .collect();
    let builder = PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
        .udp(1000 + (seq % 1000) as u16, 2000);
    let mut out = Vec::with_capacity(len);
    builder
        .write(&mut out, &payload)
        .expect("writing into a Vec cannot fail");
    assert_eq!(out.len(), len);
    out
}

/// Frame sizes 60..=1514 (no FCS) in a scrambled but repeatable order.
pub fn mixed_size(seq: u32) -> usize {
    60 + (seq as usize * 7919) % (1514 - 60 + 1)
}

/// Whether `data` is one of the frames [`udp_frame`] builds (not, say, the kernel's own).
pub fn is_ours(data: &[u8]) -> bool {
    data.len() >= 14 && data[6..12] == SRC_MAC
}

/// Pins the calling thread to one CPU: veth then delivers a sender's frames from one per-CPU
/// backlog, so the kernel cannot reorder them, and a busy-polling receiver on the other CPU
/// does not share a core with the sender.
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity only touch it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CLOCK_REALTIME in ns, the clock kernel and user receive timestamps are in.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos() as u64
}

/// Transmits `frames` in batches of up to `batch`, then finishes (waits for the ring to
/// drain) and returns the backend's counters.
pub fn send_all<B: Backend>(tx: &mut B, frames: &[Vec<u8>], batch: usize) -> BackendStats {
    let mut next = 0;
    while next < frames.len() {
        let want = (frames.len() - next).min(batch);
        let sent = tx
            .transmit(want, |slots| {
                assert!(slots.len() <= want);
                for (slot, f) in slots.iter_mut().zip(&frames[next..]) {
                    slot.buf[..f.len()].copy_from_slice(f);
                    slot.len = f.len();
                }
            })
            .unwrap();
        assert!(sent >= 1, "transmit handed over no frame");
        next += sent;
    }
    tx.finish().unwrap()
}

/// One frame a receiver handed over, copied out of its ring.
pub struct Received {
    pub data: Vec<u8>,
    pub wire_len: u32,
    pub timestamp: Option<RxTimestamp>,
}

/// Checks what a receiver took against what was sent: every frame, intact, in order, with
/// its length on the wire and a kernel timestamp that never goes back and lies within the
/// test's wall-clock window (from `started_ns` to now, with a second's slack either side).
/// `ring_drops` is only reported, to explain missing frames.
pub fn assert_all_arrived_in_order(
    got: &[Received],
    sent: &[Vec<u8>],
    ring_drops: u64,
    started_ns: u64,
) {
    assert_eq!(
        got.len(),
        sent.len(),
        "received {} of {} frames (ring drops {ring_drops})",
        got.len(),
        sent.len(),
    );
    let (mut first_ts, mut last_ts) = (None, 0);
    for (i, (r, sent)) in got.iter().zip(sent).enumerate() {
        assert!(r.data == *sent, "frame {i} differs from what was sent");
        assert_eq!(r.wire_len as usize, sent.len());
        let Some(RxTimestamp::Kernel(ts)) = r.timestamp else {
            panic!("frame {i} has no kernel timestamp: {:?}", r.timestamp);
        };
        assert!(
            ts >= last_ts,
            "timestamp of frame {i} goes back: {ts} < {last_ts}"
        );
        first_ts.get_or_insert(ts);
        last_ts = ts;
    }
    // CLOCK_REALTIME: within the test's own wall-clock window (generous).
    if let Some(first) = first_ts {
        assert!(first + 1_000_000_000 >= started_ns && last_ts <= now_ns() + 1_000_000_000);
    }
}

/// Takes every waiting frame of ours (see [`is_ours`]) from `rx`; returns how many frames
/// it handed over, ours or not.
pub fn take<R: Receiver>(rx: &mut R, into: &mut Vec<Received>) -> usize {
    rx.poll(64, |f| {
        if is_ours(f.data) {
            into.push(Received {
                data: f.data.to_vec(),
                wire_len: f.wire_len,
                timestamp: f.timestamp,
            });
        }
    })
    .unwrap()
}

/// Busy-polls `rx` on its own thread until `want` of our frames arrived or `limit` passed;
/// the thread returns them with the receiver.
pub fn collect<R: Receiver + 'static>(
    mut rx: R,
    want: usize,
    limit: Duration,
) -> JoinHandle<(Vec<Received>, R)> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut got = Vec::with_capacity(want);
        while got.len() < want && start.elapsed() < limit {
            take(&mut rx, &mut got);
        }
        (got, rx)
    })
}

/// Overwrites words of kernel-written ring headers with hostile values, for the parsers'
/// tests that any header must parse to bounds inside the buffer or be rejected. Repeatable:
/// the same seed corrupts the same way. Unit tests only (rand_xoshiro is a dev-dependency).
#[cfg(test)]
pub struct HeaderFuzz(rand_xoshiro::Xoshiro256PlusPlus);

#[cfg(test)]
impl HeaderFuzz {
    pub fn new(seed: u64) -> HeaderFuzz {
        use rand_xoshiro::rand_core::SeedableRng;
        HeaderFuzz(rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// A pseudo-random index below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        use rand_xoshiro::rand_core::RngCore;
        (self.0.next_u64() % n as u64) as usize
    }

    /// Writes `count` u32 words at offsets below `span` (and inside `buf`): each all ones,
    /// zero, or a value below `small_below`, the values that break unchecked arithmetic.
    pub fn corrupt(&mut self, buf: &mut [u8], span: usize, count: usize, small_below: u32) {
        for _ in 0..count {
            let at = self.below(span).min(buf.len() - 4);
            let value = match self.below(4) {
                0 => u32::MAX,
                1 => 0,
                _ => self.below(small_below as usize) as u32,
            };
            buf[at..at + 4].copy_from_slice(&value.to_ne_bytes());
        }
    }
}

/// Captures on `iface` with tcpdump, runs `send`, waits until `want` frames of ours (from
/// [`SRC_MAC`]) are in, and returns them with the capture file (the caller removes it).
pub fn tcpdump_around(
    lab: &VethPair,
    iface: &str,
    want: usize,
    send: impl FnOnce(),
) -> (Vec<Vec<u8>>, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("{}-{iface}.pcap", lab.ns()));
    let mut child: std::process::Child = Command::new("ip")
        .args(["netns", "exec", lab.ns(), "tcpdump", "-i", iface, "-w"])
        .arg(&path)
        // A snap length that fits our frames keeps tcpdump's ring slots small and many.
        .args(["-U", "-s", "2048", "-B", "8192", "-n", "--immediate-mode"])
        .args(["ether", "src", &mac_text(SRC_MAC)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump is needed for this test (apt-get install -y tcpdump)");
    // `ip netns exec` execs tcpdump in place, so this PID is tcpdump's.
    struct StopOnDrop(u32);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            // SAFETY: signals only the child this test started, by its PID.
            unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGINT) };
        }
    }
    let stopper = StopOnDrop(child.id());
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0
        && !line.contains("listening on")
    {
        line.clear();
    }
    assert!(
        line.contains("listening on"),
        "tcpdump did not start: {line}"
    );

    send();

    // tcpdump writes each frame as it comes (-U); wait until all are in, then stop it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let read = || -> Vec<Vec<u8>> {
        let Ok(file) = std::fs::File::open(&path) else {
            return Vec::new();
        };
        let Ok(mut reader) = pcap_file::pcap::PcapReader::new(file) else {
            return Vec::new();
        };
        let mut frames = Vec::new();
        while let Some(Ok(p)) = reader.next_packet() {
            frames.push(p.data.into_owned());
        }
        frames
    };
    while read().len() < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stopper);
    child.wait().unwrap();
    let mut summary = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut summary);
    let frames = read();
    assert_eq!(frames.len(), want, "tcpdump on {iface}: {summary}");
    (frames, path)
}

/// What a [`TestPort`] does beyond taking frames into its slots and counting them: how many
/// of the frames asked a call takes, and what it does with them once the engine filled them
/// (keep them, stamp them, spend time). Both do nothing special by default.
pub trait TestPath: Send {
    /// How many of `asked` frames (at most the port's slots) this call takes; 0 refuses the
    /// call as a full ring would.
    fn take(&mut self, asked: usize) -> usize {
        asked
    }
    /// The call's frames, as the engine filled them.
    fn sent(&mut self, _frames: &[crate::TxSlot<'_>]) {}
}

impl TestPath for () {}

/// A transmit port for the engine's tests, without a kernel: 2 KiB slots of its own, the
/// time base and preferred batch a test asks for, every call's frame count kept, and the
/// rest of its behaviour in its [`TestPath`].
pub struct TestPort<P> {
    pub path: P,
    slots: Vec<Box<[u8]>>,
    time_base: crate::TimeBase,
    throughput_batch: usize,
    /// Frames taken over the run.
    pub frames: u64,
    /// Frames taken by each call, in order (refused calls not counted).
    pub calls: Vec<usize>,
    /// The most frames a call asked for.
    pub largest_request: usize,
}

impl<P: TestPath> TestPort<P> {
    pub fn new(path: P, slots: usize, time_base: crate::TimeBase) -> TestPort<P> {
        TestPort {
            path,
            slots: (0..slots)
                .map(|_| vec![0u8; 2048].into_boxed_slice())
                .collect(),
            time_base,
            throughput_batch: crate::UNPACED_BATCH,
            frames: 0,
            calls: Vec::new(),
            largest_request: 0,
        }
    }

    /// The batch the port says sends fastest ([`Backend::throughput_batch`]).
    pub fn with_throughput_batch(mut self, frames: usize) -> TestPort<P> {
        self.throughput_batch = frames;
        self
    }
}

impl<P: TestPath> Backend for TestPort<P> {
    fn describe(&self) -> String {
        "test port".into()
    }
    fn slot_count(&self) -> usize {
        self.slots.len()
    }
    fn max_frame_len(&self) -> usize {
        2048
    }
    fn time_base(&self) -> crate::TimeBase {
        self.time_base
    }
    fn throughput_batch(&self) -> usize {
        self.throughput_batch
    }
    fn transmit<F>(&mut self, count: usize, fill: F) -> Result<usize, crate::IoError>
    where
        F: FnOnce(&mut [crate::TxSlot<'_>]),
    {
        self.largest_request = self.largest_request.max(count);
        let take = self.path.take(count.min(self.slots.len()));
        if take == 0 {
            return Ok(0);
        }
        let mut batch = crate::TxBatch::new();
        crate::slots_of(&mut self.slots, take, &mut batch);
        fill(&mut batch);
        self.path.sent(&batch);
        self.calls.push(batch.len());
        self.frames += batch.len() as u64;
        Ok(batch.len())
    }
    fn finish(&mut self) -> Result<BackendStats, crate::IoError> {
        Ok(BackendStats {
            frames: self.frames,
            ..BackendStats::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panic the test below plans, told apart from a failing assertion's.
    struct PlannedPanic(String);

    #[test]
    fn a_pair_is_up_without_ipv6_and_removed_also_when_its_test_panics() {
        let (mac_a, mac_b) = ([0x02, 0, 0, 0, 0, 0x0a], [0x02, 0, 0, 0, 0, 0x0b]);
        let panicked = std::panic::catch_unwind(|| {
            let pair = VethPair::with_macs("fixture", mac_a, mac_b);
            let up = pair.ip(&["-o", "link", "show", "up"]);
            assert!(up.contains(&pair.a) && up.contains(&pair.b), "{up}");
            let shown = pair.ip(&["link", "show", &pair.b]);
            assert!(shown.contains("02:00:00:00:00:0b"), "{shown}");
            for key in ["all", "default"] {
                let sysctl = format!("net.ipv6.conf.{key}.disable_ipv6");
                assert_eq!(pair.exec(&["sysctl", "-n", &sysctl]).trim(), "1");
            }
            assert_eq!(pair.promiscuity(&pair.a), 0);
            std::panic::panic_any(PlannedPanic(pair.ns().to_owned()));
        })
        .unwrap_err();
        let ns = match panicked.downcast::<PlannedPanic>() {
            Ok(planned) => planned.0,
            Err(failed_assertion) => std::panic::resume_unwind(failed_assertion),
        };
        let left = run(&["ip", "netns", "list"]);
        assert!(
            !left
                .lines()
                .any(|l| l.split_whitespace().next() == Some(ns.as_str())),
            "{ns} is left behind: {left}"
        );
    }
}
