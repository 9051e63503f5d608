//! The clock check end to end: on loopback in one process, and between two network
//! namespaces joined by a veth pair, with a responder process whose clock is shifted by
//! `STROBE_TEST_ONLY_CLOCK_OFFSET_NS` (the namespaces share the machine's one clock, so the
//! injected offset is the true one). The check must find it within 1 µs.
//!
//! The responder (and, in one test, the measuring side) is this test binary run again
//! inside `ip netns exec`, with [`ROLE_VAR`] telling its one test
//! [`helper_process_role_when_spawned_by_another_test`] what to do. The namespace tests need
//! root and iproute2 and are skipped with a message otherwise. Everything is removed on
//! drop, also when an assertion fails: children are killed by their PIDs (and see their
//! stdin close if this process dies first), then the namespaces are deleted with the veth
//! pair in them.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use strobe_io::clockcheck::{self, ClockEcho, OffsetEstimate, Sample, DEFAULT_SAMPLES};
use strobe_io::test_clock::{self, OFFSET_VAR};
use strobe_io::test_support::Netns;
use strobe_io::IoError;

/// Tells a copy of this binary which role to play: `respond ADDR` or `measure ADDR COUNT`.
const ROLE_VAR: &str = "STROBE_CLOCKCHECK_TEST_ROLE";
/// What a responder child prints once it answers: the line's prefix, then its address.
const READY: &str = "CLOCKCHECK-READY ";
/// What a measuring child prints per measurement: the prefix, then the estimate's fields.
const RESULT: &str = "CLOCKCHECK-RESULT ";

const TIMEOUT: Duration = Duration::from_secs(2);
/// How far the estimate may be from the injected offset.
const TOLERANCE_NS: i64 = 1_000;
/// Measurements per offset across the namespaces.
const REPEATS: usize = 20;

/// Not a test of its own: the role a copy of this binary plays for another test. Without
/// [`ROLE_VAR`] it does nothing.
#[test]
fn helper_process_role_when_spawned_by_another_test() {
    let Ok(role) = std::env::var(ROLE_VAR) else {
        return;
    };
    let words: Vec<&str> = role.split_whitespace().collect();
    let mut out = std::io::stdout();
    match words.as_slice() {
        ["respond", addr] => {
            let echo = ClockEcho::start(addr.parse().unwrap()).unwrap();
            writeln!(out, "{READY}{}", echo.local_addr()).unwrap();
            out.flush().unwrap();
            // Until the parent closes stdin (or dies): then the echo stops on drop.
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {}
        }
        ["measure", addr, count] => {
            let target: SocketAddr = addr.parse().unwrap();
            for _ in 0..count.parse::<usize>().unwrap() {
                let e = clockcheck::measure(target, DEFAULT_SAMPLES, TIMEOUT).unwrap();
                writeln!(
                    out,
                    "{RESULT}{} {} {} {} {}",
                    e.offset_ns, e.bound_ns, e.min_delay_ns, e.samples, e.answered
                )
                .unwrap();
            }
            out.flush().unwrap();
        }
        _ => panic!("{ROLE_VAR}={role:?}: unknown role"),
    }
}

/// A copy of this binary playing a role in a namespace; killed by its PID on drop.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Helper {
    fn spawn(netns: &str, role: &str, offset_ns: i64) -> Helper {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(exe)
            .args([
                "--exact",
                "helper_process_role_when_spawned_by_another_test",
                "--nocapture",
                "--test-threads=1",
                "--quiet",
            ])
            .env(ROLE_VAR, role)
            .env(OFFSET_VAR, offset_ns.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Helper {
            child,
            stdin,
            lines,
        }
    }

    /// The next line starting with `prefix`, without it.
    fn line(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no `{prefix}` line from the helper: {e}"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_string();
            }
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.stdin.take());
        // Child::kill signals this child's PID only (`ip netns exec` execs, so that is the
        // helper itself).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two namespaces `ccheck-PID-TAG-a` and `-b`, a veth pair between them, 198.18.251.1/30 in
/// a and .2 in b. Dropping it deletes both namespaces and the pair.
struct Lab {
    a: Netns,
    b: Netns,
}

const ADDR_A: &str = "198.18.251.1";
const ADDR_B: &str = "198.18.251.2";

impl Lab {
    fn new(tag: &str) -> Lab {
        let pid = std::process::id();
        let a = Netns::add(format!("ccheck-{pid}-{tag}-a"));
        // From here on the guards delete what exists on any failure.
        let b = Netns::add(format!("ccheck-{pid}-{tag}-b"));
        a.ip(&[
            "link",
            "add",
            "cc0",
            "type",
            "veth",
            "peer",
            "name",
            "cc1",
            "netns",
            b.name(),
        ]);
        for (ns, iface, addr) in [(&a, "cc0", ADDR_A), (&b, "cc1", ADDR_B)] {
            ns.ip(&["addr", "add", &format!("{addr}/30"), "dev", iface]);
            ns.ip(&["link", "set", iface, "up"]);
            ns.ip(&["link", "set", "lo", "up"]);
        }
        Lab { a, b }
    }

    /// A responder in b with its clock shifted by `offset_ns`; its address.
    fn responder(&self, offset_ns: i64) -> (Helper, SocketAddr) {
        let helper = Helper::spawn(self.b.name(), &format!("respond {ADDR_B}:0"), offset_ns);
        let addr = helper.line(READY).parse().unwrap();
        (helper, addr)
    }

    /// Runs `f` on this thread inside namespace a.
    fn in_a<T>(&self, f: impl FnOnce() -> Result<T, String>) -> T {
        strobe_io::netns::in_netns(Some(self.a.name()), || f().map_err(IoError::Other))
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Why the namespace tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: network namespaces need root".into());
    }
    if Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        return Some("`ip` (iproute2) not found".into());
    }
    None
}

/// min / median / max of `values`, for the report.
fn spread(values: &mut [i64]) -> (i64, i64, i64) {
    values.sort_unstable();
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

/// Checks one estimate: within `tolerance` of `expected`, within its own bound, from nearly
/// every exchange.
fn assert_close(e: &OffsetEstimate, expected: i64, tolerance: i64, what: &str) {
    let error = e.offset_ns - expected;
    assert!(
        error.abs() <= tolerance,
        "{what}: measured {} ns, injected {expected} ns: {error} ns off (> {tolerance}); {e:?}",
        e.offset_ns
    );
    assert!(
        error.unsigned_abs() <= e.bound_ns,
        "{what}: the error {error} ns exceeds the bound: {e:?}"
    );
    assert_eq!(e.samples, DEFAULT_SAMPLES, "{e:?}");
    assert!(e.answered * 10 >= e.samples * 9, "replies lost: {e:?}");
    assert!(e.bound_ns > 0 && e.min_delay_ns > 0, "{e:?}");
}

/// Measures `REPEATS` times, checks each, prints the spread of the errors.
fn measure_repeatedly(
    what: &str,
    expected: i64,
    tolerance: i64,
    mut one: impl FnMut() -> OffsetEstimate,
) {
    let mut errors = Vec::new();
    let mut bounds = Vec::new();
    let mut delays = Vec::new();
    let mut took = Vec::new();
    for _ in 0..REPEATS {
        let started = Instant::now();
        let e = one();
        took.push(started.elapsed().as_micros() as i64);
        assert_close(&e, expected, tolerance, what);
        errors.push(e.offset_ns - expected);
        bounds.push(e.bound_ns as i64);
        delays.push(e.min_delay_ns as i64);
    }
    eprintln!(
        "{what}: {REPEATS} measurements of {DEFAULT_SAMPLES} exchanges: error \
         (min/median/max) {:?} ns, bound {:?} ns, least round trip {:?} ns, each took {:?} µs",
        spread(&mut errors),
        spread(&mut bounds),
        spread(&mut delays),
        spread(&mut took),
    );
}

#[test]
fn on_loopback_in_one_process_the_offset_is_near_zero_with_a_bound() {
    let echo = ClockEcho::start("127.0.0.1:0".parse().unwrap()).unwrap();
    let target = echo.local_addr();
    // Both ends in this process: the same (possibly injected) clock.
    measure_repeatedly("loopback", 0, 5_000, || {
        clockcheck::measure(target, DEFAULT_SAMPLES, TIMEOUT).unwrap()
    });
}

#[test]
fn across_namespaces_the_injected_offset_is_found_within_a_microsecond() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped: {reason}");
        return;
    }
    let lab = Lab::new("inj");
    // This process's own switch (normally unset) shifts the measuring side.
    let ours = test_clock::offset_ns();
    for injected in [37_000i64, -25_000, 0] {
        let (responder, target) = lab.responder(injected);
        measure_repeatedly(
            &format!("veth, responder at {injected:+} ns"),
            injected - ours,
            TOLERANCE_NS,
            || lab.in_a(|| clockcheck::measure(target, DEFAULT_SAMPLES, TIMEOUT)),
        );
        drop(responder);
    }
}

#[test]
fn across_namespaces_two_shifted_processes_compare_correctly() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped: {reason}");
        return;
    }
    let lab = Lab::new("two");
    let (_responder, target) = lab.responder(-25_000);
    // The measuring side is a process too, 12 µs ahead: the target is 37 µs behind it.
    let measuring = Helper::spawn(lab.a.name(), &format!("measure {target} {REPEATS}"), 12_000);
    let mut errors = Vec::new();
    for _ in 0..REPEATS {
        let fields: Vec<i64> = measuring
            .line(RESULT)
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        let e = OffsetEstimate {
            offset_ns: fields[0],
            bound_ns: fields[1] as u64,
            min_delay_ns: fields[2] as u64,
            samples: fields[3] as usize,
            answered: fields[4] as usize,
        };
        assert_close(&e, -37_000, TOLERANCE_NS, "two shifted processes");
        errors.push(e.offset_ns + 37_000);
    }
    eprintln!(
        "two shifted processes (+12000 measuring, -25000 responding): error \
         (min/median/max) {:?} ns",
        spread(&mut errors)
    );
}

/// The path's asymmetry itself: with no offset injected anywhere the namespaces share one
/// clock, so t2 − t1 and t4 − t3 are the two one-way delays. Prints their distributions for
/// a few spacings of the exchanges, with what other filters would have estimated; checks
/// only that the estimates at the spacing [`clockcheck::measure`] uses are within 1 µs.
#[test]
fn across_namespaces_the_two_directions_take_nearly_the_same_time() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped: {reason}");
        return;
    }
    if test_clock::offset_ns() != 0 {
        eprintln!("skipped: {OFFSET_VAR} is set for this process");
        return;
    }
    let lab = Lab::new("sym");
    let (_responder, target) = lab.responder(0);
    for gap_us in [0u64, 50, 200, 1_000, 5_000] {
        let gap = Duration::from_micros(gap_us);
        let mut estimates = Vec::new();
        let mut fastest_only = Vec::new();
        let mut all_median = Vec::new();
        let mut took = Vec::new();
        let mut fastest_forward = Vec::new();
        let mut fastest_back = Vec::new();
        // The spacing that is used, often; the others a few times, for the comparison.
        let repeats = if gap == clockcheck::SAMPLE_GAP {
            REPEATS
        } else {
            5
        };
        for _ in 0..repeats {
            let started = Instant::now();
            let (exchanges, sent) =
                lab.in_a(|| clockcheck::measure_exchanges(target, DEFAULT_SAMPLES, TIMEOUT, gap));
            took.push(started.elapsed().as_micros() as i64);
            let e = clockcheck::estimate(&exchanges, sent).unwrap();
            let mut by_delay: Vec<&Sample> = exchanges
                .iter()
                .filter(|s| s.delay_ns().is_some())
                .collect();
            by_delay.sort_by_key(|s| s.delay_ns());
            let quarter = &by_delay[..by_delay.len().div_ceil(4)];
            let median = |mut v: Vec<i64>| spread(&mut v).1;
            fastest_forward.push(median(
                quarter
                    .iter()
                    .map(|s| s.t2.wrapping_sub(s.t1) as i64)
                    .collect(),
            ));
            fastest_back.push(median(
                quarter
                    .iter()
                    .map(|s| s.t4.wrapping_sub(s.t3) as i64)
                    .collect(),
            ));
            estimates.push(e.offset_ns);
            fastest_only.push(by_delay[0].offset_ns());
            all_median.push(median(exchanges.iter().map(|s| s.offset_ns()).collect()));
        }
        eprintln!(
            "veth, gap {gap_us} µs: one-way delays of the fastest quarter, forward {:?} ns, \
             back {:?} ns; estimate {:?} ns (min/median/max over {repeats}); θ of the least δ \
             alone {:?} ns, median θ of all {:?} ns; took {:?} µs",
            spread(&mut fastest_forward),
            spread(&mut fastest_back),
            spread(&mut estimates),
            spread(&mut fastest_only),
            spread(&mut all_median),
            spread(&mut took),
        );
        if gap == clockcheck::SAMPLE_GAP {
            assert!(
                estimates.iter().all(|e| e.abs() <= TOLERANCE_NS),
                "{estimates:?}"
            );
        }
    }
}
