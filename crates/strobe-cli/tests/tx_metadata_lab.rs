//! Transmit stamps from AF_XDP TX metadata (`--tx-timestamps metadata`) on the virtual lab
//! (needs root). veth has no zero-copy and no NIC clock, so for users every lab port is
//! refused, with the reason. The stamps' way through strobe (the sender publishes each
//! frame's stamp, the receiver takes it in place of the trailer's) is tested with copy
//! mode's completion time, which debug builds accept behind a test-only switch. On the
//! lab that time is taken when the DUT's IP stack takes the frame in (it orphans the socket
//! buffer there), so a latency from it spans the DUT's forwarding alone: never negative,
//! about a microsecond. A frame joined to its neighbour's stamp would not be: the next
//! frame enters the DUT only after this one has arrived (copy mode sends frame by frame,
//! each all the way through the softirq), so its stamp lies after this frame's arrival.

mod common;
use common::lab::TestLab;
use common::*;

const FRAMES: u64 = 20_000;

/// The flow's raw latency statistics and the rx port's stamp counts.
fn latency(report: &serde_json::Value) -> &serde_json::Value {
    &report["flows"][0]["latency"]
}

#[test]
fn latency_runs_from_each_frames_own_transmit_stamp() {
    let dir = Scratch::new("txmd");
    let lab = TestLab::up("txmd", "router");
    let count = FRAMES.to_string();
    let run = |extra: &[&str]| {
        let json = dir.path(&format!("{}.json", extra.len()));
        let out = lab
            .gen_command("lab:tx@afxdp", "lab:rx")
            .args(["--rate", "100kpps", "--count", &count, "--json", &json])
            .args(extra)
            .env(strobe_io::tx_stamps::COMPLETION_STAMPS_VAR, "1")
            .output()
            .unwrap();
        ok(out);
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let stamped = run(&["--tx-timestamps", "metadata"]);
    let trailers = run(&[]);

    let tx = &stamped["ports"][0]["tx_metadata_stamps"];
    assert_eq!(tx["stamped"], FRAMES, "{tx}");
    assert_eq!(tx["unstamped"], 0, "{tx}");
    assert!(tx["handover_min_ns"].as_i64().unwrap() >= 0, "{tx}");
    let rx = &stamped["rx_ports"][0]["transmit_stamps"];
    assert_eq!(rx["stamped"], FRAMES, "{rx}");
    assert_eq!(rx["missing"], 0, "{rx}");
    assert_eq!(stamped["flows"][0]["frames_rx"], FRAMES);
    let l = latency(&stamped);
    assert!(
        l["timestamps"]["tx"]
            .as_str()
            .unwrap()
            .starts_with("AF_XDP TX metadata"),
        "{l}"
    );
    assert_eq!(l["raw"]["count"], FRAMES, "{l}");
    // Every frame's own stamp: none before the frame's departure from the DUT's entry...
    assert_eq!(l["negative"], 0, "{l}");
    let (p50, p50_trailers) = (
        l["raw"]["p50_ns"].as_f64().unwrap(),
        latency(&trailers)["raw"]["p50_ns"].as_f64().unwrap(),
    );
    // ... and only the DUT's forwarding in it: well under the 10 µs between frames, and
    // under the latency from the trailers, which includes the hand-over.
    assert!(p50 < 5_000.0, "median {p50} ns");
    assert!(
        p50 < p50_trailers,
        "median {p50} ns, from the trailers {p50_trailers} ns"
    );
    // The trailers' run takes no metadata.
    assert!(trailers["ports"][0].get("tx_metadata_stamps").is_none());
    assert!(trailers["rx_ports"][0].get("transmit_stamps").is_none());
}

#[test]
fn ports_that_cannot_give_transmit_stamps_are_refused_with_the_reason() {
    let lab = TestLab::up("txmr", "cable");
    let refused = |tx: &str, rx: &str, switch: bool, expect: &str| {
        let mut cmd = lab.gen_command(tx, rx);
        cmd.args([
            "--rate",
            "10kpps",
            "--count",
            "100",
            "--tx-timestamps",
            "metadata",
        ]);
        if switch {
            cmd.env(strobe_io::tx_stamps::COMPLETION_STAMPS_VAR, "1");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tx} -> {rx}: {err}");
        assert!(err.contains(expect), "{tx} -> {rx}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refused(
        "lab:tx",
        "lab:rx",
        false,
        "cannot give transmit stamps from AF_XDP TX metadata: only an afxdp: port can (afxdp:tx0)",
    );
    // Copy mode (every veth) gives a completion time, not a departure time.
    refused(
        "lab:tx@afxdp",
        "lab:rx",
        false,
        "runs in copy mode, where the kernel's TX metadata stamp is its completion time",
    );
    refused(
        "lab:tx@afxdp",
        "lab:rx@xdp-count",
        true,
        "keeps latency in the kernel, where transmit stamps from AF_XDP TX metadata cannot reach it",
    );
    let link = common::lab::sh_in(&lab.ns("rx"), "ip -details link show rx0");
    assert!(!link.contains("prog/xdp"), "{link}");
}
