//! The lab's newer DUT kinds carry a million frames each (needs root). A test binary of its
//! own: cargo runs test binaries one after another, so these runs never share the machine
//! with another test's (each DUT forwards on the sending CPU of a veth, and a run beside
//! them loses frames in a busy backlog).

mod common;
use common::lab::{assert_accounted, drops_in, TestLab};
use common::*;

/// The firewall DUT (`nft:100`, the router with 100 forward rules that match none of the
/// lab's frames) and the XDP forwarder (`xdp`): a million frames through each at 100 kpps,
/// well below either's rate here (a debug build sends about 220 kpps through `nft:100` and
/// 500 kpps through `xdp` unpaced), every one received once and in order or counted as
/// dropped by the DUT's or the sink's interfaces.
#[test]
fn a_million_frames_through_the_nft_and_xdp_duts_are_counted_exactly() {
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
        // Alone on the machine and well below the DUT's rate, nothing is lost as a rule: at
        // most a handful of frames to a busy host.
        let received = r["flows"][0]["frames_rx"].as_u64().unwrap();
        assert!(received * 1000 >= FRAMES * 999, "{dut}: {}", r["flows"][0]);
    }
}
