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
            // Open vSwitch's main thread, which polls its packet sockets, stalls for up to
            // 20 ms now and then here, and a socket holds about 270 small frames: a few
            // percent may go even at 20 kpps (its report says so). The others lose none.
            let lost = run["summary"]["frames_lost"].as_u64().unwrap();
            let allowed = if dut == "ovs" { 500 } else { 0 };
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
