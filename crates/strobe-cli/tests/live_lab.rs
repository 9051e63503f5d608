//! Live runs through the virtual lab (needs root: every test builds its own lab of network
//! namespaces under a unique prefix and removes it, also when it fails).
//!
//! - exact per-flow counts through cable, bridge and router DUTs;
//! - AF_XDP workers of `--cores 2` on the lab's multi-queue veths, one queue each, counted
//!   per queue by the kernel (ethtool);
//! - `xdp-live` (XDP live frames) paced and unpaced through a cable and a router;
//! - loss detected exactly when the DUT drops every 1000th frame (nftables numgen);
//! - frames checked at the sink by an independent capture (tcpdump) and decoder (tshark).

mod common;
use common::lab::{assert_accounted, drops_in, sh_in, Capture, TestLab};
use common::*;

/// The xdp-live tests one at a time, and the segmentation test beside none of them: an
/// unpaced one fills both cores, and a paced or bursty one beside it loses frames in its
/// receiving CPU's backlog (a CI run lost 983 of 50 000 segmented frames so).
fn one_xdp_live_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TESTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn flow(report: &serde_json::Value) -> &serde_json::Value {
    &report["flows"][0]
}

/// Every one of `frames` sent frames arrived once and in order; `what` names the run.
fn assert_exact(f: &serde_json::Value, frames: u64, what: &str) {
    assert_eq!(f["frames_tx"], frames, "{what}: {f}");
    assert_eq!(f["frames_rx"], frames, "{what}: {f}");
    assert_eq!(f["loss"], 0, "{what}: {f}");
    assert_eq!(f["duplicates"], 0, "{what}: {f}");
    assert_eq!(f["reordered"], 0, "{what}: {f}");
}

#[test]
fn exact_counts_through_cable_bridge_and_router() {
    let dir = Scratch::new("live-counts");
    for (tag, dut) in [("c", "cable"), ("b", "bridge"), ("r", "router")] {
        let lab = TestLab::up(tag, dut);
        let r = lab.gen(
            &dir,
            &[
                "--rate",
                "50kpps",
                "--count",
                "20000",
                "--vary",
                "ip.src=inc:198.18.0.1/0.0.0.1/100",
            ],
        );
        let f = flow(&r);
        assert_exact(f, 20_000, dut);
        assert_eq!(r["rx_ports"][0]["unknown_flow"], 0, "{dut}");
    }
}

#[test]
fn poisson_flow_split_over_two_cores_adds_up_exactly() {
    let dir = Scratch::new("live-cores");
    let lab = TestLab::up("m", "bridge");
    let r = lab.gen(
        &dir,
        &[
            "--rate",
            "20kpps",
            "--pattern",
            "poisson",
            "--count",
            "20001",
            "--cores",
            "2",
        ],
    );
    assert_eq!(
        r["ports"].as_array().unwrap().len(),
        2,
        "one report per transmit worker"
    );
    let f = flow(&r);
    assert_eq!(f["frames_rx"], 20_001, "{f}");
    assert_eq!(f["loss"], 0, "{f}");
    // Sub-flows keep their own sequence numbers, so interleaving is not reordering.
    assert_eq!(f["reordered"], 0, "{f}");
    assert_eq!(f["duplicates"], 0, "{f}");
}

#[test]
fn af_xdp_sends_and_receives_with_exact_counts() {
    let dir = Scratch::new("live-xdp");
    let lab = TestLab::up("x", "cable");
    let json = dir.path("xdp.json");
    let out = strobe()
        .args([
            "gen",
            "--lab",
            &lab.prefix,
            "--port",
            "lab:tx@afxdp",
            "--rx",
            "lab:rx@afxdp",
            "--quiet",
        ])
        .args([
            "--udp",
            "198.18.0.1:1000-198.18.1.1:2000",
            "--rate",
            "50kpps",
            "--count",
            "20000",
        ])
        .args(["--json", &json])
        .output()
        .unwrap();
    let stdout = ok(out);
    assert!(
        stdout.contains("AF_XDP") || stdout.contains("afxdp"),
        "{stdout}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Every frame received once and in order, or counted dropped by the receiving side (a
    // CI run's receiver, its CPU taken for 58 ms, had its copy-mode ring overrun).
    assert_accounted(&r, 20_000, 0, "AF_XDP");
    assert_eq!(
        r["rx_ports"][0]["timestamps"], "user",
        "AF_XDP receive stamps in user space"
    );
}

/// `lab:tx@xdp-live`: paced at a constant rate (generated and paced by the kernel's
/// program) and unpaced with frames the engine wrote (`--engine-frames`), through a cable
/// and a router (whose near port the lab makes take XDP frames), every frame counted at the
/// sink, none refused by the driver.
#[test]
fn xdp_live_sends_with_exact_counts_paced_and_unpaced() {
    let _one = one_xdp_live_test_at_a_time();
    let dir = Scratch::new("live-xdp-live");
    for (tag, dut) in [("l", "cable"), ("k", "router")] {
        let lab = TestLab::up(tag, dut);
        for (mode, count) in [
            (&["--rate", "50kpps"][..], 20_000u64),
            (&["--unpaced", "--engine-frames"][..], 200_000),
        ] {
            let json = dir.path(&format!("{tag}-{count}.json"));
            let dut_drops_before = (dut == "router").then(|| drops_in(&lab.ns("dut")));
            let out = lab
                .gen_command("lab:tx@xdp-live", "lab:rx")
                .args(mode)
                .args(["--count", &count.to_string(), "--json", &json])
                .output()
                .unwrap();
            ok(out);
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let what = format!("{dut} {mode:?}");
            // Every frame is received once and in order, or counted as dropped by the
            // receiving interface, the receiver's ring or the router: unpaced, the sender can
            // outrun the receiving stack of a busy two-core machine; paced, another test's
            // run can fill the backlog of the CPU that receives. A frame lost uncounted fails
            // (as every paced frame did through the router while the kernel's program left
            // the router's changes to a page in the frames it generated next).
            // No engine floor for a flow the kernel's program paces.
            assert!(r["ports"][0]["pacing"].is_null(), "{}", r["ports"][0]);
            let dut_drops = dut_drops_before.map_or(0, |b| drops_in(&lab.ns("dut")) - b);
            assert_accounted(&r, count, dut_drops, &what);
            if count == 20_000 {
                let received = flow(&r)["frames_rx"].as_u64().unwrap();
                assert!(received * 100 >= count * 99, "{what}: {}", flow(&r));
            }
            let port = &r["ports"][0];
            assert!(
                port["backend"].as_str().unwrap().starts_with("xdp-live:"),
                "{port}"
            );
            assert_eq!(port["xmit_errors"], 0, "{port}");
            // Paced at a constant rate, the kernel's program generates and paces the flow
            // (through the router too: it rewrites the headers the router changed in the
            // pages it forwarded, which come back to the kernel's pool).
            let in_kernel = if count == 20_000 {
                serde_json::Value::Bool(true)
            } else {
                serde_json::Value::Null
            };
            assert_eq!(port["in_kernel"], in_kernel, "{port}");
        }
        // The lab turned GRO on where tx0's frames arrive, so that they are taken.
        let (ns, iface) = if dut == "cable" {
            (lab.ns("rx"), "rx0")
        } else {
            (lab.ns("dut"), "dut0")
        };
        let features = sh_in(&ns, &format!("ethtool -k {iface}"));
        assert!(
            features.contains("generic-receive-offload: on"),
            "{features}"
        );
    }
}

/// Three paced flows on one `lab:tx@xdp-live` port (IPv4 and IPv6, three sizes, a counting
/// port, constant rates and bursts) are generated and paced by one kernel program through
/// the router: each flow's count is exact at the sender, each flow's frames arrive once and
/// in order at its own rate (or are counted dropped), and the port says the program
/// interleaves them by their deadlines.
#[test]
fn xdp_live_paces_several_flows_in_one_kernel_program() {
    let _one = one_xdp_live_test_at_a_time();
    let dir = Scratch::new("live-xdp-flows");
    let lab = TestLab::up("m", "router");
    let scenario = dir.path("flows.toml");
    let flow_text = |name: &str, size: u32, rate: &str, duration: &str, l3: &str| {
        format!(
            "[[flows]]\nname = \"{name}\"\ntx = \"west\"\nrx = \"east\"\nsize = {size}\nrate = {rate}\nduration = {duration}\n[[flows.packet]]\nethernet = {{}}\n[[flows.packet]]\n{l3}\n[[flows.packet]]\nudp = {{ src_port = {{ increment = {{ start = 1000, step = 1, count = 100 }} }}, dst_port = 2000 }}\n\n"
        )
    };
    let v4 = "ipv4 = { src = \"198.18.0.1\", dst = \"198.18.1.1\" }";
    let v6 = "ipv6 = { src = \"2001:2::1\", dst = \"2001:2:0:1::1\" }";
    let text = [
        "[[ports]]\nname = \"west\"\nlocation = \"lab:tx@xdp-live\"\n\n[[ports]]\nname = \"east\"\nlocation = \"lab:rx\"\n\n".to_string(),
        flow_text("a", 64, "{ pps = 20000 }", "{ fixed_packets = { packets = 20000 } }", v4),
        flow_text("b", 700, "{ pps = 5000 }", "{ fixed_packets = { packets = 5000 } }", v6),
        // Bursts of 10 at 10 kpps, 500 µs apart: 1.4 s.
        flow_text(
            "c",
            1518,
            "{ pps = 10000 }",
            "{ burst = { bursts = 1000, packets = 10, inter_burst_gap = { microseconds = 500 } } }",
            v4,
        ),
    ]
    .concat();
    std::fs::write(&scenario, text).unwrap();
    let json = dir.path("flows.json");
    let pcap = dir.path("flows.pcap");
    let dut_drops_before = drops_in(&lab.ns("dut"));
    let capture = Capture::start(&lab.ns("rx"), "rx0", &pcap);
    let out = strobe()
        .args(["gen", &scenario, "--lab", &lab.prefix, "--json", &json])
        .output()
        .unwrap();
    let stdout = ok(out);
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(capture);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let port = &r["ports"][0];
    assert_eq!(port["in_kernel"], true, "{stdout}\n{port}");
    assert!(
        port["generation"].as_str().unwrap().contains("3 flows"),
        "{port}"
    );
    assert!(port["pacing"].is_null(), "no engine floor: {port}");
    assert_eq!(port["frames_tx"], 35_000, "{port}");
    assert_eq!(port["xmit_errors"], 0, "{port}");
    let dut_drops = drops_in(&lab.ns("dut")) - dut_drops_before;
    let rx = &r["rx_ports"][0];
    let mut received = 0;
    for (f, want) in r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .zip([20_000u64, 5_000, 10_000])
    {
        assert_eq!(f["frames_tx"], want, "{f}");
        let got = f["frames_rx"].as_u64().unwrap();
        assert!(got * 100 >= want * 95, "{f}");
        assert_eq!(f["frames_rx_unique"], got, "{f}");
        assert_eq!(
            (&f["duplicates"], &f["reordered"]),
            (&0.into(), &0.into()),
            "{f}"
        );
        received += got;
    }
    let dropped = rx["interface_drops"].as_u64().unwrap_or(0)
        + rx["kernel_drops"].as_u64().unwrap()
        + dut_drops;
    assert_eq!(received + dropped, 35_000, "{rx}");
    // Each flow ran for its second: the flows interleaved, none waited for another.
    for f in r["flows"].as_array().unwrap() {
        let span = (f["last_tx_ns"].as_f64().unwrap() - f["first_tx_ns"].as_f64().unwrap()) / 1e9;
        assert!((0.8..2.0).contains(&span), "{span} s: {f}");
    }
    // What arrived, as tshark decodes it: each flow's frames by their length, every IP and
    // UDP checksum good, the counting port in its range, the flows interleaved from the
    // start (each within the first 200 frames).
    let rows = tshark(
        &pcap,
        &[
            "frame.len",
            "udp.srcport",
            "udp.dstport",
            "udp.checksum.status",
            "ip.checksum.status",
            "ipv6.src",
        ],
    );
    let ours: Vec<_> = rows.iter().filter(|r| r[2] == "2000").collect();
    let mut lengths = std::collections::BTreeMap::new();
    let mut ports = std::collections::BTreeSet::new();
    for (k, row) in ours.iter().enumerate() {
        assert_eq!(row[3], "1", "UDP checksum of {row:?}");
        let v6 = !row[5].is_empty();
        assert_eq!(row[4], if v6 { "" } else { "1" }, "IP checksum of {row:?}");
        let len: u32 = row[0].parse().unwrap();
        let first = lengths.entry(len).or_insert((0u32, k));
        first.0 += 1;
        let port: u32 = row[1].parse().unwrap();
        assert!((1000..1100).contains(&port), "{row:?}");
        if len == 60 {
            ports.insert(port);
        }
    }
    // Captured without FCS: 60, 696 (IPv6) and 1514 bytes.
    let counts: Vec<(u32, u32, usize)> = lengths.iter().map(|(&l, &(n, k))| (l, n, k)).collect();
    assert_eq!(counts.len(), 3, "{counts:?}");
    for ((len, n, first), (want_len, want)) in
        counts
            .iter()
            .zip([(60, 20_000), (696, 5_000), (1514, 10_000)])
    {
        assert_eq!(*len, want_len, "{counts:?}");
        assert!(*n * 100 >= want * 90, "{counts:?}");
        assert!(*first < 200, "{counts:?}");
    }
    assert_eq!(ports.len(), 100, "the first flow's port counts");
}

/// `auto:` says which path it sends with and why it did not pick xdp-live.
#[test]
fn auto_says_which_path_it_picked_and_why() {
    let lab = TestLab::up("au", "cable");
    let out = strobe()
        .args(["gen", "--port", &format!("auto:{}/tx0", lab.ns("tx"))])
        .args([
            "--udp",
            "198.18.0.1:1000-198.18.1.1:2000",
            "--dst-mac",
            "02:00:00:00:00:02",
        ])
        .args(["--count", "100", "--rate", "10kpps", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("auto:tx0: sending with AF_XDP") && stderr.contains("xdp-live:tx0"),
        "{stderr}"
    );
}

/// `lab:tx@xdp-live` unpaced: the kernel's program generates the flow (a counting UDP port,
/// sequence numbers, a stamp per frame), the count is exact at the sender, and every frame
/// is accounted for at the sink: received once and in order, or counted as dropped by the
/// receiving interface's backlog or the receiver's ring (this path outruns rx0's stack on a
/// small machine). tshark decodes the ports and checksums of what arrived, also of an IMIX
/// flow with random ports. A flow the program cannot write (random sizes) falls back to the
/// engine and says why.
#[test]
fn xdp_live_generates_in_the_kernel_with_every_frame_accounted() {
    let _one = one_xdp_live_test_at_a_time();
    const N: u64 = 1_000_000;
    let dir = Scratch::new("live-xdp-gen");
    let lab = TestLab::up("q", "cable");
    let json = dir.path("gen.json");
    let out = lab
        .gen_command("lab:tx@xdp-live", "lab:rx")
        .args(["--unpaced", "--count", &N.to_string(), "--json", &json])
        .args(["--vary", "udp.src_port=inc:1000/1/500"])
        .output()
        .unwrap();
    let stdout = ok(out);
    assert!(stdout.contains("generated in the kernel"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (f, port, rx) = (flow(&r), &r["ports"][0], &r["rx_ports"][0]);
    assert_eq!(port["in_kernel"], true, "{port}");
    assert_eq!(port["frames_tx"], N, "{port}");
    assert_eq!(f["frames_tx"], N, "{f}");
    assert_eq!(port["xmit_errors"], 0, "{port}");
    let received = f["frames_rx"].as_u64().unwrap();
    let dropped = rx["interface_drops"]
        .as_u64()
        .expect("veth counts receive drops")
        + rx["kernel_drops"].as_u64().unwrap();
    assert_eq!(
        received + dropped,
        N,
        "received {received} + dropped {dropped}: {rx}"
    );
    assert!(received > N / 4, "{f}");
    assert_eq!(f["frames_rx_unique"], received, "{f}");
    assert_eq!(f["duplicates"], 0, "{f}");
    assert_eq!(f["reordered"], 0, "{f}");
    let stamps = &f["latency"]["timestamps"]["tx"];
    assert!(
        stamps.as_str().unwrap().contains("in the kernel per frame"),
        "{stamps}"
    );
    assert!(f["latency"]["raw"]["p50_ns"].as_f64().unwrap() > 0.0, "{f}");

    // strobe's AF_XDP receiver on every queue of rx0 (veth puts XDP frames on the queue of
    // the sending CPU) keeps up far better; what its rings refuse is counted.
    let json = dir.path("gen-afxdp.json");
    let out = lab
        .gen_command("lab:tx@xdp-live", "lab:rx@afxdp-all")
        .args(["--unpaced", "--rx-busy-poll", "--count", &N.to_string()])
        .args(["--json", &json])
        .output()
        .unwrap();
    let stdout = ok(out);
    // The lab gives each veth a queue per CPU (at least 2).
    let queues = sh_in(&lab.ns("rx"), "ls /sys/class/net/rx0/queues")
        .lines()
        .filter(|q| q.starts_with("rx-"))
        .count();
    assert!(
        stdout.contains(&format!("RX on all {queues} queues")),
        "{stdout}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (f, rx) = (flow(&r), &r["rx_ports"][0]);
    assert_eq!(f["frames_tx"], N, "{f}");
    let received = f["frames_rx"].as_u64().unwrap();
    let dropped =
        rx["interface_drops"].as_u64().unwrap_or(0) + rx["kernel_drops"].as_u64().unwrap();
    assert_eq!(
        received + dropped,
        N,
        "received {received} + dropped {dropped}: {rx}"
    );
    // Most, on a quiet machine (a CI run's busy host left it 45 %): what is asked here is
    // that every frame is accounted for; BENCHMARKS.md has the rates.
    assert!(received > N / 10, "{f}");
    assert_eq!(f["duplicates"], 0, "{f}");

    // Counted in the kernel (xdp-count): on a veth the counting program runs on the
    // sending CPU, right behind the peer's XDP ring, so every frame the ring took is
    // counted, each with its latency; what the ring refused the sender counts.
    let json = dir.path("gen-count.json");
    ok(lab
        .gen_command("lab:tx@xdp-live", "lab:rx@xdp-count")
        .args(["--unpaced", "--count", &N.to_string(), "--json", &json])
        .output()
        .unwrap());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (f, port) = (flow(&r), &r["ports"][0]);
    let received = f["frames_rx"].as_u64().unwrap();
    let refused = port["xmit_errors"].as_u64().unwrap();
    assert_eq!(received + refused, N, "{f} {port}");
    assert!(received > N / 10, "{f}");
    assert_eq!(f["latency"]["raw"]["count"], received, "{f}");
    assert_eq!(
        (&f["duplicates"], &f["reordered"]),
        (&0.into(), &0.into()),
        "{f}"
    );

    // What arrives is well formed: ports counting, checksums good (tshark).
    let (_, frames) = captured_kernel_run(
        &lab,
        &dir.path("gen.pcap"),
        &["--vary", "udp.src_port=inc:1000/1/500"],
        2000,
    );
    let mut ports = std::collections::BTreeSet::new();
    for (_, port) in &frames {
        assert!((1000..1500).contains(port), "port {port}");
        ports.insert(*port);
    }
    assert!(
        ports.len() >= 400,
        "the port counts: {} distinct",
        ports.len()
    );

    // IMIX with a random source port, generated in the kernel too: the sizes in IMIX's
    // proportions, ports in their range and spread, checksums good (tshark), although the
    // kernel's pages pass from one size to another.
    let (stdout, frames) = captured_kernel_run(
        &lab,
        &dir.path("imix.pcap"),
        &["--size", "imix", "--vary", "udp.src_port=rand:3000-3999"],
        2400,
    );
    assert!(stdout.contains("3 frame sizes"), "{stdout}");
    let (mut lengths, mut ports) = (
        std::collections::BTreeMap::new(),
        std::collections::BTreeSet::new(),
    );
    for (len, port) in &frames {
        *lengths.entry(*len).or_insert(0u32) += 1;
        assert!((3000..4000).contains(port), "port {port}");
        ports.insert(*port);
    }
    // IMIX: 7 × 64, 4 × 570, 1 × 1518 bytes on the wire (captured without FCS).
    let seen = |len: u32| f64::from(*lengths.get(&len).unwrap_or(&0)) / frames.len() as f64;
    assert_eq!(lengths.len(), 3, "{lengths:?}");
    for (len, share) in [(60, 7.0 / 12.0), (566, 4.0 / 12.0), (1514, 1.0 / 12.0)] {
        assert!((seen(len) - share).abs() < 0.05, "{len}: {lengths:?}");
    }
    assert!(ports.len() > 500, "random ports: {} distinct", ports.len());

    // Random sizes are the engine's: it writes them and says why.
    let out = lab
        .gen_command("lab:tx@xdp-live", "lab:rx")
        .args(["--unpaced", "--count", "20000", "--size", "random:64-1500"])
        .output()
        .unwrap();
    let stdout = ok(out);
    assert!(
        stdout.contains("written by the engine, not in the kernel")
            && stdout.contains("random frame sizes"),
        "{stdout}"
    );
}

/// `count` frames generated in the kernel (`lab:tx@xdp-live`, unpaced, plus `args`),
/// captured at rx0 and decoded by tshark: the run's stdout (it says the kernel generated
/// them) and each of the flow's frames that arrived as (length, UDP source port), more than
/// half of them, every IP and UDP checksum good.
fn captured_kernel_run(
    lab: &TestLab,
    pcap: &str,
    args: &[&str],
    count: u32,
) -> (String, Vec<(u32, u32)>) {
    let capture = Capture::start(&lab.ns("rx"), "rx0", pcap);
    let out = lab
        .gen_command("lab:tx@xdp-live", "lab:rx")
        .args(["--unpaced", "--count", &count.to_string()])
        .args(args)
        .output()
        .unwrap();
    let stdout = ok(out);
    assert!(stdout.contains("generated in the kernel"), "{stdout}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(capture);
    let rows = tshark(
        pcap,
        &[
            "frame.len",
            "udp.srcport",
            "udp.dstport",
            "icmp.type",
            "udp.checksum.status",
            "ip.checksum.status",
        ],
    );
    let frames: Vec<(u32, u32)> = rows
        .iter()
        .filter(|r| r[2] == "2000" && r[3].is_empty())
        .map(|r| {
            // checksum.status 1 = good.
            assert_eq!(
                (r[4].as_str(), r[5].as_str()),
                ("1", "1"),
                "checksums: {r:?}"
            );
            (r[0].parse().unwrap(), r[1].parse().unwrap())
        })
        .collect();
    assert!(
        frames.len() as u32 > count / 2,
        "tcpdump saw {} of {count} frames",
        frames.len()
    );
    (stdout, frames)
}

/// `lab:tx@afpacket-gso` with consecutive IP identifications: batches of 64 leave as UDP
/// segmentation superframes, and the receiver counts every frame exactly once, in order,
/// with valid trailers. Refused, with the fix named, while tx0 would pass them on uncut.
#[test]
fn udp_segmentation_batches_count_exactly() {
    let _alone = one_xdp_live_test_at_a_time();
    let dir = Scratch::new("live-gso");
    let lab = TestLab::up("g", "cable");
    let tx_ns = lab.ns("tx");
    let json = dir.path("gso.json");
    let run = || {
        lab.gen_command("lab:tx@afpacket-gso", "lab:rx")
            // Bursts of 64 every 300 µs, 0.1 µs apart within a burst: each burst coalesces
            // into one hand-over and leaves as one superframe, well within what the
            // receiving side's backlog holds (an unpaced run outruns it and drops there).
            .args([
                "--rate",
                "10mpps",
                "--pattern",
                "burst:64/300us",
                "--count",
                "50000",
                "--size",
                "64",
            ])
            .args(["--vary", "ip.identification=inc:0/1/65536"])
            .args(["--json", &json])
            .output()
            .unwrap()
    };
    let refused = run();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("tx-udp-segmentation off tx-checksumming off")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
    sh_in(
        &tx_ns,
        "ethtool -K tx0 tx-udp-segmentation off tx-checksumming off",
    );
    let stdout = ok(run());
    assert!(stdout.contains("UDP segmentation"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Every frame arrives once and in order or is counted dropped at rx0: a busy receiving
    // CPU can overflow its backlog even with bursts of 64 (a CI run dropped 407 there, all
    // counted), but never more than a few percent of a run that does not outrun it.
    assert_accounted(&r, 50_000, 0, "afpacket-gso");
    let dropped = r["rx_ports"][0]["interface_drops"].as_u64().unwrap_or(0);
    assert!(
        dropped <= 2_500,
        "{dropped} dropped at rx0: {}",
        r["rx_ports"][0]
    );
    // The bursts of 64 (and the last of 16) leave as superframes: a frame joins its
    // burst's hand-over only while that leaves it nearer its deadline than a hand-over of
    // its own, so how many of a burst's frames one call takes depends on the hand-over cost
    // the sender measures as it goes: about 10 µs here makes a 6.3 µs burst one call (one
    // superframe per burst, 782 in all; a burst's last frames leave in a call of their own
    // on a fast moment: 113 of 50 000 in one run here, 2 in one CI run); a machine whose
    // calls cost 2 µs cuts each burst into about four. Bounds for both: nearly every frame
    // in a superframe, at least 8 frames in each on average.
    let seg = &r["ports"][0]["segmentation"];
    let frames = seg["frames"].as_u64().unwrap();
    let superframes = seg["superframes"].as_u64().unwrap();
    assert!((45_000..=50_000).contains(&frames), "{seg}");
    assert!((700..=50_000 / 8).contains(&superframes), "{seg}");
    assert_eq!(r["rx_ports"][0]["unknown_flow"], 0, "{r}");
    assert_eq!(r["rx_ports"][0]["truncated"], 0, "{r}");
}

/// Frames a veth took in per receive queue, as the kernel counts them (`ethtool -S`).
fn rx_queue_packets(netns: &str, iface: &str) -> Vec<u64> {
    let stats = sh_in(netns, &format!("ethtool -S {iface}"));
    let mut counts = Vec::new();
    for (name, value) in stats.lines().filter_map(|l| l.trim().split_once(": ")) {
        if let Some(queue) = name
            .strip_prefix("rx_queue_")
            .and_then(|rest| rest.strip_suffix("_xdp_packets"))
        {
            let queue: usize = queue.parse().unwrap();
            counts.resize(counts.len().max(queue + 1), 0);
            counts[queue] = value.parse().unwrap();
        }
    }
    counts
}

#[test]
fn af_xdp_workers_each_send_on_their_own_queue_of_the_lab() {
    let dir = Scratch::new("live-xdp-cores");
    let lab = TestLab::up("w", "cable");
    let (tx_ns, rx_ns) = (lab.ns("tx"), lab.ns("rx"));
    let queues = sh_in(&tx_ns, "ls /sys/class/net/tx0/queues");
    assert!(
        queues.lines().any(|q| q == "tx-1"),
        "the lab's veths have a second queue: {queues}"
    );
    // A veth counts frames per receive queue only on its NAPI path, which GRO turns on for
    // frames from a peer without TSO.
    sh_in(&tx_ns, "ethtool -K tx0 tso off");
    sh_in(&rx_ns, "ethtool -K rx0 gro on");
    let before = rx_queue_packets(&rx_ns, "rx0");

    let json = dir.path("xdp-cores.json");
    ok(lab
        .gen_command("lab:tx@afxdp", "lab:rx")
        .args([
            "--rate",
            "20kpps",
            "--pattern",
            "poisson",
            "--count",
            "20001",
        ])
        .args(["--cores", "2", "--json", &json])
        .output()
        .unwrap());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = flow(&r);
    assert_exact(f, 20_001, "AF_XDP over two queues");

    // Worker k binds queue k; the kernel's count on rx0's queue k is what worker k sent.
    let ports = r["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2, "one report per transmit worker: {ports:?}");
    let after = rx_queue_packets(&rx_ns, "rx0");
    let gained: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let mut total = 0;
    for (k, port) in ports.iter().enumerate() {
        let name = port["name"].as_str().unwrap();
        assert!(name.ends_with(&format!("#{k}")), "worker {k} is {name}");
        let sent = port["frames_tx"].as_u64().unwrap();
        assert!(sent > 0, "worker {k} sent nothing: {port}");
        total += sent;
        // Nothing but the flow's frames went out: no probe before the run.
        assert!(port["pacing"].get("probe_frames").is_none(), "{port}");
        if k == 0 {
            // Queue 0 also takes whatever the kernel itself might send (XPS puts it there).
            assert!(
                gained[0] >= sent,
                "queue 0 took {gained:?}, worker 0 sent {sent}"
            );
        } else {
            assert_eq!(
                gained[k], sent,
                "queue {k} took {gained:?}, worker {k} sent {sent}"
            );
        }
    }
    assert_eq!(total, 20_001);
}

#[test]
fn loss_is_counted_exactly_when_the_dut_drops_every_1000th_frame() {
    let dir = Scratch::new("live-loss");
    let lab = TestLab::up("n", "router");
    let nft = |args: &str| lab.nft(args);
    nft("add table inet strobetest");
    nft("add chain inet strobetest every1000 { type filter hook forward priority 0 ; }");
    nft("add rule inet strobetest every1000 udp dport 2000 numgen inc mod 1000 == 0 drop");
    let json = dir.path("loss.json");
    let text = lab.gen_text(&["--rate", "100kpps", "--count", "100000", "--json", &json]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = flow(&r);
    assert_eq!(f["frames_tx"], 100_000);
    assert_eq!(
        f["loss"], 100,
        "every 1000th of 100 000 frames dropped: {f}"
    );
    assert_eq!(f["frames_rx"], 99_900);
    // The run ends with its verdict in one line, as the demo's parts do.
    let verdict = text
        .lines()
        .find(|l| l.starts_with("verdict: "))
        .unwrap_or_else(|| panic!("no verdict line:\n{text}"));
    assert!(
        verdict.starts_with("verdict: 100000 frames sent at ")
            && verdict.contains("% of the 100.00 kpps asked")
            && verdict.contains("; 100 lost (0.1000 %); latency p50 "),
        "{verdict}"
    );
}

#[test]
fn frames_arrive_intact_at_the_sink() {
    let dir = Scratch::new("live-tshark");
    let lab = TestLab::up("t", "cable");
    let pcap = dir.path("sink.pcap");
    let capture = Capture::start(&lab.ns("rx"), "rx0", &pcap);
    let r = lab.gen(
        &dir,
        &[
            "--rate",
            "20kpps",
            "--count",
            "1000",
            "--size",
            "128",
            "--vary",
            "udp.src_port=inc:1000/1/50",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(capture);
    assert_eq!(flow(&r)["frames_rx"], 1000);
    let rows = tshark(
        &pcap,
        &[
            "udp.srcport",
            "udp.dstport",
            "icmp.type",
            "ip.src",
            "ip.dst",
            "udp.checksum.status",
            "ip.checksum.status",
            "frame.len",
        ],
    );
    // strobe's frames: UDP to port 2000, not an ICMP error quoting one.
    let ours: Vec<_> = rows
        .iter()
        .filter(|r| r[1] == "2000" && r[2].is_empty())
        .collect();
    assert_eq!(
        ours.len(),
        1000,
        "tcpdump saw {} of strobe's frames",
        ours.len()
    );
    for (j, r) in ours.iter().enumerate() {
        assert_eq!(
            r[0],
            (1000 + j % 50).to_string(),
            "source port of frame {j}"
        );
        assert_eq!((r[3].as_str(), r[4].as_str()), ("198.18.0.1", "198.18.1.1"));
        assert_eq!(
            (r[5].as_str(), r[6].as_str()),
            ("1", "1"),
            "checksums of frame {j}"
        );
        assert_eq!(
            r[7], "124",
            "128-byte frames are 124 bytes on a veth (no FCS)"
        );
    }
}
