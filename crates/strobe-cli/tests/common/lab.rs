//! The virtual lab in tests: a lab per test under a unique prefix, removed when the test
//! ends (also when it fails), and tcpdump captures inside its namespaces.

use std::process::{Child, Command, Stdio};

use super::{ok, strobe, Scratch};

/// A lab that is removed when the test ends.
pub struct TestLab {
    pub prefix: String,
}

impl TestLab {
    pub fn up(tag: &str, dut: &str) -> TestLab {
        Self::up_with(tag, dut, &[])
    }

    /// [`TestLab::up`] with more `strobe lab up` options (e.g. `--rps off`).
    pub fn up_with(tag: &str, dut: &str, options: &[&str]) -> TestLab {
        // Short: interface and namespace names derive from it.
        let prefix = format!("t{}{tag}", std::process::id() % 100_000);
        let lab = TestLab { prefix };
        ok(strobe()
            .args(["lab", "up", "--prefix", &lab.prefix, "--dut", dut])
            .args(options)
            .output()
            .unwrap());
        lab
    }

    pub fn ns(&self, side: &str) -> String {
        format!("{}-{side}", self.prefix)
    }

    /// `strobe gen` on this lab sending on `tx` (`lab:tx` or `lab:tx@afxdp`), receiving on
    /// `rx` (`lab:rx`, or `lab:tx` for round trips), one UDP flow, quiet; add options and
    /// run it.
    pub fn gen_command(&self, tx: &str, rx: &str) -> Command {
        let mut cmd = strobe();
        cmd.args(["gen", "--lab", &self.prefix, "--port", tx, "--rx", rx])
            .args(["--quiet", "--udp", "198.18.0.1:1000-198.18.1.1:2000"]);
        cmd
    }

    /// `strobe gen` on this lab, tx -> rx, plus `extra`; returns stdout (the run must
    /// succeed).
    pub fn gen_text(&self, extra: &[&str]) -> String {
        ok(self
            .gen_command("lab:tx", "lab:rx")
            .args(extra)
            .output()
            .unwrap())
    }

    /// `strobe gen SCENARIO` on this lab (the scenario text written as `NAME.toml` in `dir`,
    /// its ports at `lab:tx` / `lab:rx`), quiet, with its JSON report.
    pub fn gen_scenario(&self, dir: &Scratch, name: &str, scenario: &str) -> serde_json::Value {
        let path = dir.path(&format!("{name}.toml"));
        std::fs::write(&path, scenario).unwrap();
        let json = dir.path(&format!("{name}.json"));
        ok(strobe()
            .arg("gen")
            .arg(&path)
            .args(["--lab", &self.prefix, "-q", "--json", &json])
            .current_dir(&dir.0)
            .output()
            .unwrap());
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    }

    /// `strobe gen` on this lab, tx -> rx, with a JSON report.
    pub fn gen(&self, dir: &Scratch, extra: &[&str]) -> serde_json::Value {
        let json = dir.path(&format!("{}.json", self.prefix));
        self.gen_text(&[&["--json", json.as_str()][..], extra].concat());
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    }
}

impl TestLab {
    /// Runs `nft ARGS` (split at spaces) in the DUT's namespace; panics with nft's message
    /// when it fails.
    pub fn nft(&self, args: &str) {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.ns("dut"), "nft"])
            .args(args.split(' '))
            .output()
            .expect("nft (apt-get install nftables)");
        assert!(
            out.status.success(),
            "nft {args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits until rx0 has taken in `frames` more frames than when called, polling its
    /// counter: a run started in the background is then sending (its receiver opens before
    /// its first frame), however long the machine took to start it. Panics after 30 s.
    pub fn wait_for_rx_frames(&self, frames: u64) {
        let rx_ns = self.ns("rx");
        let count = || {
            sh_in(&rx_ns, "cat /sys/class/net/rx0/statistics/rx_packets")
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        let start = count();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while count() < start + frames {
            assert!(
                std::time::Instant::now() < deadline,
                "rx0 took in fewer than {frames} frames in 30 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// A shell command inside a namespace; its stdout (it must succeed).
pub fn sh_in(netns: &str, command: &str) -> String {
    ok(Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c", command])
        .output()
        .expect("ip (apt-get install iproute2)"))
}

/// Frames the interfaces of a namespace dropped on receive so far (the receive "drop" column
/// of its /proc/net/dev): where a DUT counts what it could not take. Only receive: a veth
/// counts a frame its peer's backlog refused as a transmit drop too.
pub fn drops_in(netns: &str) -> u64 {
    sh_in(netns, "cat /proc/net/dev")
        .lines()
        .filter_map(|line| line.split_once(':'))
        .filter_map(|(_, fields)| fields.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum()
}

/// All of `frames` sent, and each received once and in order or counted dropped: at the
/// receiving interface, in the receiver's ring, or (`dut_drops`) inside the DUT.
pub fn assert_accounted(r: &serde_json::Value, frames: u64, dut_drops: u64, what: &str) {
    let (f, rx) = (&r["flows"][0], &r["rx_ports"][0]);
    assert_eq!(f["frames_tx"], frames, "{what}: {f}");
    let received = f["frames_rx"].as_u64().unwrap();
    let dropped = rx["interface_drops"].as_u64().unwrap_or(0)
        + rx["kernel_drops"].as_u64().unwrap()
        + dut_drops;
    assert_eq!(
        received + dropped,
        frames,
        "{what}: received {received} + dropped {dropped} ({dut_drops} in the DUT): {rx} {f}"
    );
    assert!(received > frames / 2, "{what}: {f}");
    assert_eq!(f["frames_rx_unique"], received, "{what}: {f}");
    assert_eq!(f["duplicates"], 0, "{what}: {f}");
    assert_eq!(f["reordered"], 0, "{what}: {f}");
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = strobe()
            .args(["lab", "down", "--prefix", &self.prefix])
            .output();
    }
}

/// tcpdump in a namespace, writing a pcap until stopped by PID.
pub struct Capture {
    child: Child,
}

impl Capture {
    pub fn start(netns: &str, iface: &str, file: &str) -> Capture {
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                netns,
                "tcpdump",
                "-i",
                iface,
                "-nn",
                "-U",
                // 64 MiB of kernel buffer: jumbo frames at 5 kpps are 45 MB/s, and the
                // default 2 MiB holds 40 ms of them, less than a busy test machine may keep
                // tcpdump from running.
                "-B",
                "65536",
                "--time-stamp-precision=nano",
                "-w",
                file,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump (apt-get install tcpdump)");
        // Wait until it listens (its stderr says so), then keep draining stderr.
        use std::io::BufRead;
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        while !seen.contains("listening") {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("tcpdump did not start: {seen}");
            }
            seen.push_str(&line);
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Capture { child }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // libpcap hands a partly filled ring block to tcpdump only when the block's 1 s
        // timeout expires; frames still in it when tcpdump stops are never written. Wait
        // that long first (a short run can fit in one block and be lost whole).
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // SAFETY: kill(2) on the PID of the child this test started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
    }
}

/// Starts `strobe reflect` as `cmd` describes (its arguments already set) and returns once it
/// says it is reflecting; its stderr is drained in the background from then on.
pub fn spawn_reflector(cmd: &mut Command) -> Child {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting strobe reflect");
    let mut err = BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    err.read_line(&mut line)
        .expect("reading the reflector's stderr");
    assert!(
        line.contains("reflecting on"),
        "reflector did not start: {line}"
    );
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}
