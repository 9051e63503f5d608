//! The lab's newer DUT kinds carry a million frames each, and the forwarder study (needs
//! root). A test binary of its own, its tests one at a time: cargo runs test binaries one
//! after another, so these runs never share the machine with another test's (each DUT
//! forwards on the sending CPU of a veth, and a run beside them loses frames in a busy
//! backlog).

mod common;
use common::lab::{assert_accounted, drops_in, sh_in, TestLab};
use common::*;

/// One test at a time: the tests of a binary run side by side, and each of these loads
/// the machine (testpmd busy-polls a core).
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What the Open vSwitch DUT is sent: about half its rate here (a debug build of strobe
/// sending 300 000 frames at 100 kpps lost 0.013 % of them at the switch's packet socket).
const OVS_RATE: &str = "50kpps";

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The firewall DUT (`nft:100`, the router with 100 forward rules that match none of the
/// lab's frames) and the XDP forwarder (`xdp`): a million frames through each at 100 kpps,
/// well below either's rate here (a debug build sends about 220 kpps through `nft:100` and
/// 500 kpps through `xdp` unpaced), every one received once and in order or counted as
/// dropped by the DUT's or the sink's interfaces.
#[test]
fn a_million_frames_through_the_nft_and_xdp_duts_are_counted_exactly() {
    let _alone = alone();
    const FRAMES: u64 = 1_000_000;
    let dir = Scratch::new("duts");
    for (tag, dut, says) in [("f", "nft:100", "100 rules"), ("x", "xdp", "XDP forwarder")] {
        let lab = TestLab::up(tag, dut);
        let status = ok(strobe()
            .args(["lab", "status", "--prefix", &lab.prefix])
            .output()
            .unwrap());
        assert!(status.contains(dut) && status.contains(says), "{status}");
        let dut_drops_before = drops_in(&lab.ns("dut"));
        let r = lab.gen(&dir, &["--rate", "100kpps", "--count", &FRAMES.to_string()]);
        let dut_drops = drops_in(&lab.ns("dut")) - dut_drops_before;
        assert_accounted(&r, FRAMES, dut_drops, dut);
        // Well below the DUT's rate almost nothing is lost, but a busy CI host has taken
        // 0.75 % from the sink's backlog (all accounted above): the bound only tells a
        // working DUT from a broken one; what is lost is the benchmarks' business.
        assert_mostly_received(&r, FRAMES, dut);
    }
}

/// At least 95 % of the frames came through: a DUT that forwards, whatever the host's load.
fn assert_mostly_received(r: &serde_json::Value, frames: u64, dut: &str) {
    let received = r["flows"][0]["frames_rx"].as_u64().unwrap();
    assert!(received * 100 >= frames * 95, "{dut}: {}", r["flows"][0]);
}

/// DPDK's testpmd as the DUT (io forwarding busy-polling core 0 while strobe sends from
/// the highest core), over packet sockets (`testpmd@0`) and over AF_XDP (`testpmd:afxdp@0`): a
/// million frames at 100 kpps through each, every one received once and in order or counted
/// as lost inside testpmd by its own counters (read over DPDK telemetry) or at the
/// interfaces; testpmd's own count of what it forwarded agrees with strobe's, and the result
/// names the DUT, its DPDK version and its core.
#[test]
fn a_million_frames_through_testpmd_are_counted_exactly_by_both_ends() {
    let _alone = alone();
    use strobe_control::lab::testpmd;
    const FRAMES: u64 = 1_000_000;
    let dir = Scratch::new("testpmd");
    for (tag, dut) in [("p", "testpmd@0"), ("px", "testpmd:afxdp@0")] {
        let lab = TestLab::up(tag, dut);
        let status = ok(strobe()
            .args(["lab", "status", "--prefix", &lab.prefix])
            .output()
            .unwrap());
        assert!(
            status.contains("DPDK") && status.contains("core 0"),
            "{status}"
        );
        let tx0_sent = || {
            let text = sh_in(
                &lab.ns("tx"),
                "cat /sys/class/net/tx0/statistics/tx_packets",
            );
            text.trim().parse::<u64>().unwrap()
        };
        let before = testpmd::counters(&lab.prefix).unwrap();
        let (drops_before, tx0_before) = (drops_in(&lab.ns("dut")), tx0_sent());
        let r = lab.gen(&dir, &["--rate", "100kpps", "--count", &FRAMES.to_string()]);
        let after = testpmd::counters(&lab.prefix).unwrap();
        // The generator's kernel may send a frame of its own now and then (an MLD report
        // after the lab came up): testpmd forwards those too.
        let kernel_frames = (tx0_sent() - tx0_before)
            .checked_sub(FRAMES)
            .unwrap_or_else(|| panic!("{dut}: tx0 sent fewer frames than strobe did"));
        let lost_in_testpmd = after
            .lost_toward_sink()
            .checked_sub(before.lost_toward_sink())
            .unwrap_or_else(|| panic!("{dut}: testpmd's counters went back: {before:?} {after:?}"));
        let dut_drops = drops_in(&lab.ns("dut")) - drops_before + lost_in_testpmd;
        assert_accounted(&r, FRAMES, dut_drops, dut);
        assert_mostly_received(&r, FRAMES, dut);
        let received = r["flows"][0]["frames_rx"].as_u64().unwrap();
        // testpmd took in every frame tx0 sent and sent each on but those it counts lost:
        // its counters and strobe's agree.
        let took_in = after.ports[0].ipackets - before.ports[0].ipackets;
        let sent_on = after.ports[1].opackets - before.ports[1].opackets;
        let what = format!("{dut}: {kernel_frames} kernel frames, {before:?} {after:?}");
        assert!(kernel_frames < 10, "{what}");
        // testpmd now and then counts one frame more on both its ports than tx0 sent (one
        // also before the run, right after `lab up`): not a frame of the run, whose every
        // frame is accounted above, and not yet explained; allowed up to two.
        let unexplained = took_in
            .checked_sub(FRAMES + kernel_frames)
            .unwrap_or_else(|| panic!("testpmd took in fewer frames than tx0 sent: {what}"));
        assert!(unexplained <= 2, "{what}");
        assert_eq!(sent_on, received + kernel_frames + unexplained, "{what}");
        assert_eq!(took_in, sent_on + lost_in_testpmd, "{what}");
        let context = &r["device_under_test"];
        assert_eq!(context["kind"], dut, "{context}");
        assert_eq!(context["cores"], serde_json::json!([0]), "{context}");
        assert!(
            context["software"].as_str().unwrap().starts_with("DPDK 2"),
            "{context}"
        );
    }
}

/// Open vSwitch as the DUT (`ovs`, a learning bridge in the user-space datapath): a
/// million frames at OVS_RATE, every one received once and in order or counted as lost:
/// at the switch's packet socket (the kernel's count there), by the switch's own port
/// counters, or at the interfaces; the switch's own count of what it sent toward the sink
/// agrees with strobe's, and the result names the DUT and Open vSwitch's version.
#[test]
fn a_million_frames_through_open_vswitch_are_counted_exactly_by_both_ends() {
    let _alone = alone();
    use strobe_control::lab::ovs;
    const FRAMES: u64 = 1_000_000;
    let dir = Scratch::new("ovs");
    let lab = TestLab::up("o", "ovs");
    let status = ok(strobe()
        .args(["lab", "status", "--prefix", &lab.prefix])
        .output()
        .unwrap());
    assert!(status.contains("Open vSwitch 3"), "{status}");
    let before = ovs::counters(&lab.prefix).unwrap();
    let drops_before = drops_in(&lab.ns("dut"));
    let r = lab.gen(&dir, &["--rate", OVS_RATE, "--count", &FRAMES.to_string()]);
    let after = ovs::counters(&lab.prefix).unwrap();
    let what = format!("ovs: {before:?} {after:?}");
    // The interfaces' receive drops are counted once, by `drops_in` (the switch reports the
    // kernel's figure for them too); the packet socket's and the switch's own are not.
    let lost_in_switch = (after[0].socket_drops - before[0].socket_drops)
        + (after[0].rx_errors - before[0].rx_errors)
        + (after[1].tx_dropped - before[1].tx_dropped)
        + (after[1].tx_errors - before[1].tx_errors);
    let dut_drops = drops_in(&lab.ns("dut")) - drops_before + lost_in_switch;
    assert_accounted(&r, FRAMES, dut_drops, &what);
    assert_mostly_received(&r, FRAMES, "ovs");
    // The switch took in at least every frame strobe sent (and the kernel's own few) and
    // sent on toward the sink what strobe received, give or take those few.
    let received = r["flows"][0]["frames_rx"].as_u64().unwrap();
    let took_in = after[0].rx_packets - before[0].rx_packets;
    let sent_on = after[1].tx_packets - before[1].tx_packets;
    assert!((FRAMES..FRAMES + 10).contains(&took_in), "{what}");
    assert!((received..received + 10).contains(&sent_on), "{what}");
    let context = &r["device_under_test"];
    assert_eq!(context["kind"], "ovs", "{context}");
    assert!(
        context["software"]
            .as_str()
            .unwrap()
            .starts_with("Open vSwitch 3"),
        "{context}"
    );
}

/// `strobe study forwarders` on a short profile: four DUTs (the kernel's router, the XDP
/// forwarder, testpmd, Open vSwitch), both loads, one rate. Every run is recorded in the history with its
/// DUT and load in its label, each measured every frame it sent, the report sets the DUTs
/// side by side per load (a CCDF figure and a table each), and the study's lab is gone at
/// the end.
#[test]
fn the_forwarder_study_compares_four_duts_under_both_loads() {
    let _alone = alone();
    let dir = Scratch::new("study");
    let db = dir.path("study.db");
    let html = dir.path("study.html");
    let prefix = format!("st{}", std::process::id() % 100_000);
    let out = ok(strobe()
        .args(["study", "forwarders", "--duts", "router,xdp,testpmd@0,ovs"])
        .args(["--loads", "constant,poisson", "--rates", "20kpps"])
        .args(["--frames", "5000", "--lab", &prefix, "--quiet"])
        .args(["--html", &html, "--db", &db])
        .output()
        .unwrap());
    for load in ["constant load at 20.00 kpps", "poisson load at 20.00 kpps"] {
        assert!(out.contains(load), "{out}");
    }
    let table_header = out.lines().find(|l| l.starts_with("µs")).unwrap();
    for dut in ["router", "xdp", "testpmd@0", "ovs"] {
        assert!(table_header.contains(dut), "{out}");
    }
    let runs: serde_json::Value = serde_json::from_str(&ok(strobe()
        .args(["runs", "list", "--json"])
        .env("STROBE_DB", &db)
        .output()
        .unwrap()))
    .unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8, "{runs:?}");
    for dut in ["router", "xdp", "testpmd@0", "ovs"] {
        for load in ["constant", "poisson"] {
            let label = format!("study forwarders: dut={dut} load={load} rate=20.00 kpps");
            let run = runs
                .iter()
                .find(|r| r["label"] == label.as_str())
                .unwrap_or_else(|| panic!("no run labelled {label}: {runs:?}"));
            assert_eq!(run["summary"]["frames_tx"], 5000, "{run}");
            // Open vSwitch's main thread, which polls its packet sockets, stalls for 15-20 ms
            // now and then here (once 60 ms in a CI run, losing 958 of 5000), and a socket
            // holds about 270 small frames: even at 20 kpps a stall loses what arrives
            // meanwhile (its report says so). Asked: it forwards most frames. The others
            // lose none.
            let lost = run["summary"]["frames_lost"].as_u64().unwrap();
            let allowed = if dut == "ovs" { 2500 } else { 0 };
            assert!(lost <= allowed, "{run}");
        }
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 2, "one CCDF figure per load");
    for software in ["DPDK 2", "Linux ", "Open vSwitch 3"] {
        assert!(page.contains(software), "{software}: {page}");
    }
    // The study's lab is removed, and the study left no testpmd behind.
    let namespaces = std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_else(|_| Vec::<String>::new());
    assert!(
        !namespaces
            .iter()
            .any(|n| n.starts_with(&format!("{prefix}-"))),
        "{namespaces:?}"
    );
    assert!(!std::path::Path::new(&format!("/run/strobe-lab/{prefix}")).exists());

    // A lab already up under the study's prefix is someone's: refused, and left up.
    let theirs = TestLab::up("sx", "cable");
    let refused = strobe()
        .args([
            "study",
            "forwarders",
            "--duts",
            "router",
            "--lab",
            &theirs.prefix,
        ])
        .args(["--frames", "100", "--db", "none"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("exists") && said.contains("--lab"), "{said}");
    let status = ok(strobe()
        .args(["lab", "status", "--prefix", &theirs.prefix])
        .output()
        .unwrap());
    assert!(status.contains("device under test: cable"), "{status}");
}

/// A thread pinned to `core` that wakes every `every` and computes for `busy`, until
/// dropped: another application scheduled on a forwarder's core now and then.
struct Intruder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Intruder {
    fn on_core(core: usize, every: std::time::Duration, busy: std::time::Duration) -> Intruder {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            // SAFETY: a zeroed cpu_set_t is empty; pid 0 is this thread.
            let pinned = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(core, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            };
            assert!(pinned, "cannot pin the intruder to core {core}");
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                let began = std::time::Instant::now();
                while began.elapsed() < busy {
                    std::hint::spin_loop();
                }
            }
        });
        Intruder {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Intruder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The one-sided exact Mann–Whitney test: the probability that, were both groups of runs
/// alike, `high` would be above `low` in as many of their pairs as it is or more (ties
/// count against `high`). Small: `high` is higher, with confidence 1 - p.
fn mann_whitney_p(low: &[f64], high: &[f64]) -> f64 {
    let (n, m) = (low.len(), high.len());
    // U: the pairs where `high` is not above `low`.
    let u = low
        .iter()
        .map(|l| high.iter().filter(|&&h| h <= *l).count())
        .sum::<usize>();
    // ways[n][m][k]: the orderings of n and m values with k such pairs (the recurrence on
    // which group holds the largest value).
    let mut ways = vec![vec![vec![0f64; n * m + 1]; m + 1]; n + 1];
    for i in 0..=n {
        for j in 0..=m {
            for k in 0..=i * j {
                ways[i][j][k] = if i == 0 || j == 0 {
                    f64::from(k == 0)
                } else {
                    // The largest is high's: it is above all of low's; else low's, above
                    // all j of high's, which adds j pairs.
                    ways[i][j - 1][k] + if k >= j { ways[i - 1][j][k - j] } else { 0.0 }
                };
            }
        }
    }
    let all: f64 = ways[n][m].iter().sum();
    ways[n][m][..=u].iter().sum::<f64>() / all
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

#[test]
fn the_exact_mann_whitney_test_gives_the_tables_values() {
    let low = [1.0, 2.0, 3.0, 4.0, 5.0];
    // Every one of five above every other of five: 1 ordering in C(10, 5) = 252.
    let p = mann_whitney_p(&low, &[6.0, 7.0, 8.0, 9.0, 10.0]);
    assert!((p - 1.0 / 252.0).abs() < 1e-12, "{p}");
    // U = 4 (the table's 5 % critical value for 5 and 5): 12 orderings of 252.
    let p = mann_whitney_p(&low, &[4.5, 4.6, 4.7, 4.8, 6.0]);
    assert!((p - 12.0 / 252.0).abs() < 1e-12, "{p}");
    // Alike groups are not told apart (ties count against `high`), a lower one even less.
    assert!(mann_whitney_p(&low, &[1.5, 2.5, 3.5, 4.5, 5.5]) > 0.3);
    assert!(mann_whitney_p(&low, &low) > 0.5);
    assert_eq!(mann_whitney_p(&[6.0, 7.0, 8.0, 9.0, 10.0], &low), 1.0);
}

/// The study's point (its §4.2: a forwarder isolated on its core, `isolcpus` and
/// `taskset`, against one that other applications share): testpmd forwarding on core 1
/// alone, and sharing core 1 with a thread that sleeps 50 ms and computes for 3 ms in turn
/// (about 6 % of the core), strobe sending and receiving on core 0. Five runs of each,
/// alternated, so that the host's own moods fall on both: the shared core's p99.9 is higher
/// with at least 95 % confidence (an exact one-sided Mann–Whitney test on the runs'
/// p99.9), by a factor of two or more in the runs' median, while the median latency moves
/// by less than a quarter. Here (2026-11-29) all five shared runs were above all five
/// alone (p = 1/252): p99.9 of 2.95-2.99 ms against 46-430 µs, p50 4.2-5.7 µs against
/// 5.0-5.8. (A thread computing 0.5 ms every 10 ms shows in p99, 25 µs to 450, but not in
/// p99.9 here: on two cores the baseline's p99.9 is already 0.4-0.8 ms, from the cores
/// strobe and testpmd share with the kernel's softirq work.)
#[test]
fn a_forwarding_core_shared_with_another_thread_shows_in_p99_9_not_in_the_median() {
    let _alone = alone();
    let lab = TestLab::up("i", "testpmd@1");
    let dir = Scratch::new("isolation");
    let run = |name: &str| -> (f64, f64) {
        let json = dir.path(&format!("{name}.json"));
        let gen = lab.gen_command("lab:tx", "lab:rx");
        let mut on_core_0 = std::process::Command::new("taskset");
        on_core_0
            .args(["-c", "0"])
            .arg(gen.get_program())
            .args(gen.get_args())
            .args(["--rate", "20kpps", "--count", "50000", "--json", &json]);
        for (key, value) in gen.get_envs() {
            if let Some(value) = value {
                on_core_0.env(key, value);
            }
        }
        ok(on_core_0.output().unwrap());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let stats = &r["flows"][0]["latency"]["raw"];
        assert_eq!(
            r["device_under_test"]["cores"],
            serde_json::json!([1]),
            "{r}"
        );
        (
            stats["p50_ns"].as_f64().unwrap(),
            stats["p99_9_ns"].as_f64().unwrap(),
        )
    };
    let (mut alone_runs, mut shared_runs) = (Vec::new(), Vec::new());
    for round in 0..5 {
        alone_runs.push(run(&format!("alone{round}")));
        let _intruder = Intruder::on_core(
            1,
            std::time::Duration::from_millis(50),
            std::time::Duration::from_millis(3),
        );
        shared_runs.push(run(&format!("shared{round}")));
    }
    let p50 = |runs: &[(f64, f64)]| runs.iter().map(|r| r.0).collect::<Vec<_>>();
    let p999 = |runs: &[(f64, f64)]| runs.iter().map(|r| r.1).collect::<Vec<_>>();
    let p = mann_whitney_p(&p999(&alone_runs), &p999(&shared_runs));
    let tail_ratio = median(&p999(&shared_runs)) / median(&p999(&alone_runs));
    let median_ratio = median(&p50(&shared_runs)) / median(&p50(&alone_runs));
    let figures = format!(
        "(p50, p99.9) in ns, alone on its core: {alone_runs:?}; sharing it: {shared_runs:?}; \
         p = {p:.4}, p99.9 x{tail_ratio:.2}, p50 x{median_ratio:.2}"
    );
    eprintln!("{figures}");
    assert!(p <= 0.05, "{figures}");
    assert!(tail_ratio >= 2.0, "{figures}");
    assert!((0.75..=1.33).contains(&median_ratio), "{figures}");
}

/// The escape hatch: a third signal ends the study at once, without its report, and says
/// how to remove the lab it may leave up.
#[test]
fn a_third_signal_ends_the_study_at_once_naming_the_lab_left_up() {
    use std::io::{BufRead as _, Read as _};
    let _alone = alone();
    // Removed at the end whatever the study left.
    let lab = TestLab {
        prefix: format!("sq{}", std::process::id() % 100_000),
    };
    let mut study = strobe()
        .args([
            "study",
            "forwarders",
            "--duts",
            "router",
            "--loads",
            "constant",
        ])
        .args([
            "--rates",
            "1kpps",
            "--frames",
            "1000000",
            "--lab",
            &lab.prefix,
        ])
        .args(["--db", "none"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut progress = std::io::BufReader::new(study.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("run 1/1") {
        line.clear();
        let read = progress.read_line(&mut line).unwrap();
        assert!(read > 0, "the study ended before its run");
    }
    for _ in 0..3 {
        // SAFETY: a signal to the child this test started, by its PID.
        unsafe { libc::kill(study.id() as i32, libc::SIGTERM) };
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = study.wait().unwrap();
    let mut said = String::new();
    study
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{said}");
    assert!(said.contains("exiting now"), "{said}");
    assert!(
        said.contains(&format!("strobe lab down --prefix {}", lab.prefix)),
        "{said}"
    );
}
