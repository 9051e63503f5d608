//! Shared helpers for the CLI integration tests: run the strobe binary, decode with tshark.
#![allow(dead_code)]

pub mod lab;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The strobe under test. Its runs are recorded in a history under the build's scratch
/// folder (shared by every test, as a user's is by their runs), never the user's own.
pub fn strobe() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_strobe"));
    command.env(
        "STROBE_DB",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/runs.db"),
    );
    // Remembered floors too stay with the tests, not the user's state directory.
    command.env(
        "STROBE_STATE_DIR",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/state"),
    );
    command
}

pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A scratch directory removed when dropped, also when the test fails.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("strobe-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch dir");
        Scratch(dir)
    }
    pub fn path(&self, file: &str) -> String {
        self.0.join(file).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn ok(out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "command failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `strobe gen SCENARIO` with the scratch dir as working directory (pcap ports are
/// relative paths).
pub fn gen_example(example: &str, dir: &Scratch) -> String {
    let scenario = examples_dir().join(example);
    ok(strobe()
        .arg("gen")
        .arg(&scenario)
        .current_dir(&dir.0)
        .output()
        .expect("running strobe"))
}

/// Decodes a capture with tshark and returns the requested fields, one row per frame.
/// Repeated fields (e.g. two ip.src in a VXLAN frame) come comma-separated.
pub fn tshark(pcap: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args([
        "-n",
        "-r",
        pcap,
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "separator=|",
    ]);
    for pref in [
        "ip.check_checksum:TRUE",
        "udp.check_checksum:TRUE",
        "tcp.check_checksum:TRUE",
    ] {
        cmd.args(["-o", pref]);
    }
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect(
        "tshark is the independent decoder of these tests: install it (apt-get install tshark) \
         or run scripts/test.sh, which does",
    );
    let text = ok(out);
    text.lines()
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

/// Capture timestamps in ns, read by tshark (not by strobe's own reader).
pub fn tshark_times_ns(pcap: &str) -> Vec<u64> {
    tshark(pcap, &["frame.time_epoch"])
        .iter()
        .map(|row| {
            let (s, frac) = row[0].split_once('.').unwrap_or((&row[0], "0"));
            let frac = format!("{frac:0<9}");
            s.parse::<u64>().unwrap() * 1_000_000_000 + frac[..9].parse::<u64>().unwrap()
        })
        .collect()
}

/// `strobe gen` with one UDP flow 198.18.0.1:1 -> 198.18.1.1:2 on `port`; add options and
/// run it.
pub fn gen_udp_command(port: &str) -> Command {
    let mut cmd = strobe();
    cmd.args(["gen", "--port", port, "--udp", "198.18.0.1:1-198.18.1.1:2"]);
    cmd
}

/// `strobe gen` with one UDP flow 198.18.0.1:1000 -> 198.18.1.1:2000 on `port`, plus
/// `extra` options; returns stdout (the run must succeed).
pub fn gen_udp(port: &str, extra: &[&str]) -> String {
    ok(strobe()
        .args([
            "gen",
            "--port",
            port,
            "--udp",
            "198.18.0.1:1000-198.18.1.1:2000",
        ])
        .args(extra)
        .output()
        .expect("running strobe"))
}
