//! Counters that cannot be fooled and a reflector that cannot loop (needs root; every test
//! builds and removes its own lab):
//!
//! - frames of another run (another tag, the tag of versions before run tags), frames with
//!   stamps from outside the run, injected while a run goes, are counted apart and leave the
//!   run's counts exact;
//! - a second sender using the run's own tag makes the run suspect (and fail);
//! - a run started just below the 2^32 sequence wrap keeps exact counts;
//! - two reflectors facing each other reflect a frame once; a reflector leaves frames to
//!   other addresses, broadcast and multicast alone; round trips stay exact, with checksums
//!   valid per tshark.

mod common;
use common::lab::{spawn_reflector, Capture, TestLab};
use common::*;

use std::process::{Child, Output, Stdio};
use std::time::Duration;

use strobe_io::Backend;

const FLOW: &str = "198.18.0.1:1000-198.18.1.1:2000";

fn json_file(path: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A `strobe` child process, interrupted and reaped if the test ends before it does.
struct Running(Option<Child>);

impl Running {
    fn output(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            // SAFETY: kill(2) on the PID of the child this test started.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            let _ = child.wait();
        }
    }
}

fn spawn(cmd: &mut std::process::Command) -> Running {
    Running(Some(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ))
}

/// Sends `frames` out of `location` as they are, 32 at a time with a pause between, so no
/// receive ring overflows.
fn send_raw(location: &str, frames: &[Vec<u8>]) {
    let mut tx = strobe_io::AnyBackend::open(location, 64).unwrap();
    let mut done = 0;
    while done < frames.len() {
        let want = (frames.len() - done).min(32);
        let sent = tx
            .transmit(want, |slots| {
                for (k, slot) in slots.iter_mut().enumerate() {
                    let f = &frames[done + k];
                    slot.buf[..f.len()].copy_from_slice(f);
                    slot.len = f.len();
                }
            })
            .unwrap();
        done += sent;
        std::thread::sleep(Duration::from_millis(2));
    }
    tx.finish().unwrap();
}

/// The frames of a pcap trace strobe writes for the lab's flow with `extra` options.
fn trace_frames(dir: &Scratch, name: &str, extra: &[&str]) -> Vec<Vec<u8>> {
    let pcap = dir.path(name);
    gen_udp(&format!("pcap:{pcap}"), extra);
    let mut frames = Vec::new();
    strobe_io::read_capture(&pcap, true, |f| frames.push(f.data)).unwrap();
    frames
}

/// Offset of the UDP checksum in the untagged IPv4/UDP frames of these tests.
const UDP_CHECKSUM: usize = 14 + 20 + 6;

#[test]
fn forged_and_stale_frames_are_counted_apart() {
    let dir = Scratch::new("trust-forged");
    let lab = TestLab::up("f", "cable");
    let json = dir.path("run.json");
    // 5 s at 20 kpps: room for the injections below on a loaded machine.
    let (count, tag) = (100_000u64, 77u8);
    // Frames of this run's flow and tag, but stamped on a pcap trace's timeline (1970):
    // what a replay of an old capture or a forger would send.
    let stale = trace_frames(
        &dir,
        "stale.pcap",
        &["--run-tag", "77", "--count", "3000", "--rate", "1mpps"],
    );
    let first_stamp = u64::from_be_bytes(stale[0][stale[0].len() - 8..].try_into().unwrap());
    assert!(
        first_stamp < 1_000_000_000_000,
        "trace stamps: {first_stamp}"
    );
    assert_eq!(stale[0][stale[0].len() - 16..][..2], [b'S', tag]);
    // The same frames with a stamp far in the future, and with the tag of strobe versions
    // before run tags ("ST"); their UDP checksum is set to none (valid for IPv4).
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let future: Vec<Vec<u8>> = stale[..2000]
        .iter()
        .map(|f| {
            let mut f = f.clone();
            let at = f.len() - 8;
            f[at..].copy_from_slice(&(now_ns + 1_000_000_000_000).to_be_bytes());
            f[UDP_CHECKSUM..UDP_CHECKSUM + 2].fill(0);
            f
        })
        .collect();
    let legacy: Vec<Vec<u8>> = stale[..1000]
        .iter()
        .map(|f| {
            let mut f = f.clone();
            let at = f.len() - 16;
            f[at + 1] = b'T';
            f[UDP_CHECKSUM..UDP_CHECKSUM + 2].fill(0);
            f
        })
        .collect();

    let run = spawn(lab.gen_command("lab:tx", "lab:rx").args([
        "--json",
        &json,
        "--run-tag",
        "77",
        "--rate",
        "20kpps",
        "--count",
        &count.to_string(),
    ]));
    // Injected once the run sends (100 ms of its frames arrived).
    lab.wait_for_rx_frames(2_000);
    // Another generator on the same wire, same flow, another tag.
    ok(strobe()
        .args(["gen", "--lab", &lab.prefix, "--port", "lab:tx", "--quiet"])
        .args(["--udp", FLOW, "--run-tag", "78", "--rate", "20kpps"])
        .args(["--count", "10000"])
        .output()
        .unwrap());
    let tx_port = format!("afpacket:{}/tx0", lab.ns("tx"));
    send_raw(&tx_port, &stale);
    send_raw(&tx_port, &future);
    send_raw(&tx_port, &legacy);
    let out = run.output();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_file(&json);
    assert_eq!(r["run_tag"], 77);
    let f = &r["flows"][0];
    assert_eq!(f["frames_tx"], count, "{f}");
    assert_eq!(f["frames_rx"], count, "{f}");
    assert_eq!(f["frames_rx_unique"], count, "{f}");
    assert_eq!(
        (
            f["loss"].as_u64(),
            f["duplicates"].as_u64(),
            f["late"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "{f}"
    );
    assert_eq!(
        (f["excess_rx"].as_u64(), f["suspect"].as_bool()),
        (Some(0), Some(false))
    );
    // No forged stamp reached the distribution: a cable's latency is far below a second.
    let max_ns = f["latency"]["raw"]["max_ns"].as_f64().unwrap();
    assert!(max_ns < 1e9, "latency max {max_ns} ns");
    let p = &r["rx_ports"][0];
    assert_eq!(p["foreign"], 10_000 + 1_000, "{p}");
    assert_eq!(p["out_of_window"], 3_000 + 2_000, "{p}");
    assert_eq!(p["kernel_drops"], 0, "{p}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("another run's tag (stale or foreign): 11000"),
        "{text}"
    );
    assert!(text.contains("stamped outside the run: 5000"), "{text}");
}

#[test]
fn a_second_sender_with_the_runs_tag_makes_it_suspect() {
    let dir = Scratch::new("trust-suspect");
    let lab = TestLab::up("s", "cable");
    let json = dir.path("run.json");
    let run = spawn(lab.gen_command("lab:tx", "lab:rx").args([
        "--json",
        &json,
        "--run-tag",
        "90",
        "--rate",
        "20kpps",
        "--count",
        "40000",
    ]));
    lab.wait_for_rx_frames(2_000);
    // Same tag, sequence numbers the run never reaches: unique frames it did not send.
    ok(strobe()
        .args(["gen", "--lab", &lab.prefix, "--port", "lab:tx", "--quiet"])
        .args(["--udp", FLOW, "--run-tag", "90", "--rate", "20kpps"])
        .args(["--count", "5000", "--seq-start", "1000000"])
        .output()
        .unwrap());
    let out = run.output();
    assert_eq!(
        out.status.code(),
        Some(3),
        "a suspect run fails its verdict"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("received more unique frames than it sent"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("SUSPECT: flow"), "{stdout}");
    // The results are still written, and say so.
    let f = &json_file(&json)["flows"][0];
    assert_eq!(
        (f["excess_rx"].as_u64(), f["suspect"].as_bool()),
        (Some(5000), Some(true)),
        "{f}"
    );
    assert_eq!(f["loss"], 0, "{f}");
}

#[test]
fn counts_stay_exact_across_the_sequence_wrap() {
    let dir = Scratch::new("trust-wrap");
    let lab = TestLab::up("w", "cable");
    let count = 30_000u64;
    let start = (1u64 << 32) - count / 2;
    let pcap = dir.path("rx.pcap");
    let capture = Capture::start(&lab.ns("rx"), "rx0", &pcap);
    let r = lab.gen(
        &dir,
        &[
            "--rate",
            "30kpps",
            "--count",
            &count.to_string(),
            "--seq-start",
            &start.to_string(),
        ],
    );
    drop(capture);
    let f = &r["flows"][0];
    assert_eq!(
        (f["frames_tx"].as_u64(), f["frames_rx"].as_u64()),
        (Some(count), Some(count)),
        "{f}"
    );
    assert_eq!(f["frames_rx_unique"], count, "{f}");
    for field in ["loss", "reordered", "duplicates", "late", "excess_rx"] {
        assert_eq!(f[field], 0, "{field}: {f}");
    }
    // The sequence numbers did cross the wrap, per an independent decoder.
    let seqs: Vec<u64> = tshark(&pcap, &["udp.dstport", "data.data"])
        .iter()
        .filter(|r| r[0] == "2000")
        .map(|r| {
            let hex: String = r[1].chars().filter(|c| *c != ':').collect();
            u64::from_str_radix(&hex[hex.len() - 24..hex.len() - 16], 16).unwrap()
        })
        .collect();
    assert!(
        seqs.len() as u64 >= count * 9 / 10,
        "tcpdump saw {}",
        seqs.len()
    );
    assert!(
        seqs.contains(&u64::from(u32::MAX)) && seqs.contains(&0),
        "no wrap captured"
    );
    assert_eq!(seqs.iter().min(), Some(&0));
    assert_eq!(seqs.iter().max(), Some(&u64::from(u32::MAX)));
}

/// `strobe reflect` on `port` of `lab` for `duration`, writing its counters to `json`.
fn reflector(lab: &TestLab, port: &str, duration: &str, json: &str) -> Running {
    let mut cmd = strobe();
    cmd.args(["reflect", port, "--lab", &lab.prefix]).args([
        "--duration",
        duration,
        "--json",
        json,
    ]);
    let child = spawn_reflector(&mut cmd);
    Running(Some(child))
}

#[test]
fn two_reflectors_facing_each_other_reflect_a_frame_once() {
    let dir = Scratch::new("trust-loop");
    let lab = TestLab::up("l", "cable");
    let (near, far) = (dir.path("near.json"), dir.path("far.json"));
    let near_reflector = reflector(&lab, "lab:tx", "4s", &near);
    let far_reflector = reflector(&lab, "lab:rx", "4s", &far);
    // One instrumented frame from tx0 to rx0's address.
    ok(strobe()
        .args(["gen", "--lab", &lab.prefix, "--port", "lab:tx", "--quiet"])
        .args(["--udp", FLOW, "--count", "1"])
        .output()
        .unwrap());
    assert!(near_reflector.output().status.success());
    assert!(far_reflector.output().status.success());
    let (near, far) = (json_file(&near), json_file(&far));
    assert_eq!(far["reflected"], 1, "far: {far}");
    assert_eq!(far["already_reflected"], 0, "far: {far}");
    assert_eq!(near["reflected"], 0, "near: {near}");
    assert_eq!(near["already_reflected"], 1, "near: {near}");
}

#[test]
fn a_reflector_answers_only_its_own_address_and_round_trips_stay_exact() {
    let dir = Scratch::new("trust-reflect");
    let lab = TestLab::up("m", "cable");
    let refl_json = dir.path("reflect.json");
    let refl = reflector(&lab, "lab:rx", "60s", &refl_json);
    let pcap = dir.path("back.pcap");
    let capture = Capture::start(&lab.ns("tx"), "tx0", &pcap);
    // Frames to another unicast address, to broadcast and to two multicast groups: none
    // may come back.
    for dst in [
        "02:00:00:00:99:99",
        "ff:ff:ff:ff:ff:ff",
        "01:00:5e:00:00:01",
        "33:33:00:00:00:01",
    ] {
        let out = dir.path("stray.json");
        ok(lab
            .gen_command("lab:tx", "lab:tx")
            .args(["--dst-mac", dst, "--rate", "10kpps", "--count", "500"])
            .args(["--json", &out])
            .output()
            .unwrap());
        let f = &json_file(&out)["flows"][0];
        assert_eq!(f["frames_rx"], 0, "to {dst}: {f}");
    }
    // Frames to the reflector's address from a broadcast source: the reflection would go
    // to everyone, so none goes.
    let rx0 = strobe_io::ifaddr::interface_mac(Some(&lab.ns("rx")), "rx0").unwrap();
    let rx0 = rx0.map(|b| format!("{b:02x}")).join(":");
    let from_group: Vec<Vec<u8>> = trace_frames(
        &dir,
        "group-source.pcap",
        &["--count", "300", "--rate", "1mpps", "--dst-mac", &rx0],
    )
    .into_iter()
    .map(|mut f| {
        f[6..12].fill(0xff);
        // A live stamp (the trace's are on its own timeline, which the reflector does not
        // take for strobe's), the UDP checksum left out.
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let at = f.len() - 8;
        f[at..].copy_from_slice(&now_ns.to_be_bytes());
        f[UDP_CHECKSUM..UDP_CHECKSUM + 2].fill(0);
        f
    })
    .collect();
    send_raw(&format!("afpacket:{}/tx0", lab.ns("tx")), &from_group);
    // Frames to the reflector: every one comes back, counted exactly.
    let count = 20_000u64;
    let out = dir.path("rt.json");
    ok(lab
        .gen_command("lab:tx", "lab:tx")
        .args(["--rate", "20kpps", "--count", &count.to_string()])
        .args(["--json", &out])
        .output()
        .unwrap());
    drop(capture);
    drop(refl);
    let f = &json_file(&out)["flows"][0];
    assert_eq!(f["frames_rx"], count, "{f}");
    for field in ["loss", "duplicates", "excess_rx"] {
        assert_eq!(f[field], 0, "{field}: {f}");
    }
    let r = json_file(&refl_json);
    assert_eq!(r["reflected"], count, "{r}");
    assert_eq!(r["not_for_us"], 500, "{r}");
    assert_eq!(r["group_destination"], 1500, "{r}");
    assert_eq!(r["group_source"], 300, "{r}");
    assert_eq!(r["already_reflected"], 0, "{r}");
    // The reflections, decoded by tshark: valid IP and UDP checksums, trailer marked 'R'.
    let back: Vec<Vec<String>> = tshark(
        &pcap,
        &[
            "udp.srcport",
            "ip.checksum.status",
            "udp.checksum.status",
            "data.data",
        ],
    )
    .into_iter()
    .filter(|r| r[0] == "2000")
    .collect();
    assert!(
        back.len() as u64 >= count * 9 / 10,
        "tcpdump saw {}",
        back.len()
    );
    for row in &back {
        // tshark's checksum status: 0 bad, 1 good, 2 unverified.
        assert_eq!(
            (row[1].as_str(), row[2].as_str()),
            ("1", "1"),
            "checksums: {row:?}"
        );
        let hex: String = row[3].chars().filter(|c| *c != ':').collect();
        assert_eq!(
            &hex[hex.len() - 32..hex.len() - 30],
            "52",
            "marker 'R': {row:?}"
        );
    }
}

#[test]
fn traces_carry_a_tag_derived_from_the_seed() {
    let dir = Scratch::new("trust-trace-tag");
    let trace = |name: &str, seed: &str| {
        let pcap = dir.path(name);
        let json = dir.path("trace.json");
        gen_udp(
            &format!("pcap:{pcap}"),
            &["--count", "100", "--seed", seed, "--json", &json],
        );
        let tag = json_file(&json)["run_tag"].as_u64().unwrap();
        (std::fs::read(&pcap).unwrap(), tag)
    };
    let (a, tag_a) = trace("a.pcap", "7");
    let (b, tag_b) = trace("b.pcap", "7");
    assert_eq!(a, b, "the same seed writes the same trace");
    assert_eq!(tag_a, tag_b);
    assert_ne!(
        tag_a,
        u64::from(b'T'),
        "never the tag of versions before run tags"
    );
    let tags: std::collections::HashSet<u64> = (1..=8)
        .map(|seed| trace("c.pcap", &seed.to_string()).1)
        .collect();
    assert!(tags.len() > 1, "seeds give different tags: {tags:?}");
}

#[test]
fn a_reflector_refuses_a_group_address_to_answer_to() {
    for mac in [
        "ff:ff:ff:ff:ff:ff",
        "01:00:5e:00:00:01",
        "02:00:00:00:01",
        "nonsense",
    ] {
        let out = strobe()
            .args(["reflect", "null", "--mac", mac])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--mac {mac}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not a unicast MAC address"), "{err}");
    }
}
