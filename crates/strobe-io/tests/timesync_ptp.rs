//! `timesync::probe` end to end against real ptp4l: a grandmaster and a slave in two network
//! namespaces joined by a veth pair, software timestamping, PTP over Ethernet (no
//! addresses). Skipped with a message when not root or when linuxptp, iproute2 or setpriv
//! is missing.
//!
//! The namespaces share the machine's one system clock, which must never be adjusted. Both
//! ptp4l run with CAP_SYS_TIME dropped from their bounding set (setpriv), so the kernel
//! refuses every adjustment they try, and the test checks that before going on. The
//! grandmaster also runs with `free_running 1`; the slave cannot: linuxptp 3.1's
//! free-running mode reports its servo as never locked, so the port would stay UNCALIBRATED
//! forever. With `free_running 0` its servo locks, the port becomes SLAVE, and every clock
//! adjustment it attempts fails with EPERM (its log says "failed to adjust the clock:
//! Operation not permitted").
//!
//! Everything is removed on drop, also when an assertion fails: the ptp4l processes are
//! killed by their PIDs, then the namespaces (and the veth pair with them) are deleted.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strobe_io::test_support::{run, Netns};
use strobe_io::timesync::{
    find_program, probe, read_adjtimex, ClockSync, ProbeOptions, SyncSource, STA_UNSYNC,
};

/// CAP_SYS_TIME's bit in /proc/PID/status capability masks.
const CAP_SYS_TIME: u32 = 25;

/// Two namespaces, their ptp4l and a scratch directory; torn down on drop.
struct PtpLab {
    dir: PathBuf,
    ptp4l: Vec<(String, Child)>,
    // Dropped after `drop` below has stopped the processes.
    _namespaces: Vec<Netns>,
}

impl Drop for PtpLab {
    fn drop(&mut self) {
        for (_, child) in &mut self.ptp4l {
            // Child::kill signals this child's PID only.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl PtpLab {
    fn log(&self, side: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{side}.log"))).unwrap_or_default()
    }

    fn socket(&self, side: &str) -> PathBuf {
        self.dir.join(format!("ptp4l-{side}"))
    }

    /// Starts ptp4l for `side` in `netns` on `iface`, without CAP_SYS_TIME.
    fn start(&mut self, side: &str, netns: &str, iface: &str, priority1: u8, free_running: bool) {
        let conf = self.dir.join(format!("{side}.conf"));
        // Short intervals so the test takes seconds: announce every 0.25 s, Sync and
        // Delay_Req every 0.125 s. The PI servo locks only after estimating the frequency
        // over 0.016/ki s, which with software timestamping's default ki (0.001 scaled by
        // the sync interval) is 16 s at one Sync per second and 37 s at eight; constant
        // gains (both must be set) make it 0.25 s. Its adjustments are refused anyway.
        std::fs::write(
            &conf,
            format!(
                "[global]\npriority1 {priority1}\nfree_running {}\nuds_address {}\n\
                 summary_interval 0\nlogAnnounceInterval -2\nannounceReceiptTimeout 3\n\
                 logSyncInterval -3\nlogMinDelayReqInterval -3\n\
                 pi_proportional_const 0.1\npi_integral_const 0.064\n",
                u8::from(free_running),
                self.socket(side).display()
            ),
        )
        .unwrap();
        let log = File::create(self.dir.join(format!("{side}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", netns])
            .args([
                "setpriv",
                "--bounding-set",
                "-sys_time",
                "--inh-caps=-sys_time",
                "--",
            ])
            .args(["ptp4l", "-2", "-S", "-m", "-i", iface, "-f"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("cannot start ptp4l");
        let pid = child.id();
        self.ptp4l.push((side.to_string(), child));
        // `ip netns exec` and setpriv exec in turn, so the PID becomes ptp4l's.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim_end() == "ptp4l" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "ptp4l ({side}) did not start: {}",
                self.log(side)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        for mask in ["CapEff:", "CapPrm:", "CapBnd:"] {
            let hex = status
                .lines()
                .find_map(|l| l.strip_prefix(mask))
                .unwrap_or_else(|| panic!("no {mask} for ptp4l {pid}"))
                .trim();
            let bits = u64::from_str_radix(hex, 16).unwrap();
            assert_eq!(
                bits >> CAP_SYS_TIME & 1,
                0,
                "ptp4l {pid} ({side}) holds CAP_SYS_TIME ({mask} {hex}): it could adjust the clock"
            );
        }
    }

    fn assert_running(&mut self) {
        let mut dead = Vec::new();
        for (side, child) in &mut self.ptp4l {
            if let Ok(Some(status)) = child.try_wait() {
                dead.push(format!("{side} exited with {status}"));
            }
        }
        assert!(
            dead.is_empty(),
            "{dead:?}\n--- a\n{}\n--- b\n{}",
            self.log("a"),
            self.log("b")
        );
    }
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, raw PTP sockets)".into());
    }
    let missing: Vec<&str> = ["ptp4l", "pmc", "ip", "setpriv"]
        .into_iter()
        .filter(|p| find_program(p).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} not installed (apt-get install linuxptp iproute2 util-linux)",
            missing.join(", ")
        )
    })
}

fn ptp(sync: &ClockSync) -> (&str, i64, i64, &str, bool, u32, &str) {
    match &sync.source {
        SyncSource::Ptp {
            port_state,
            offset_from_master_ns,
            mean_path_delay_ns,
            gm_identity,
            gm_present,
            steps_removed,
            stamping_clock,
        } => (
            port_state,
            *offset_from_master_ns,
            *mean_path_delay_ns,
            gm_identity,
            *gm_present,
            *steps_removed,
            stamping_clock,
        ),
        other => panic!("expected a PTP source, got {other:?} ({})", sync.detail),
    }
}

fn options(socket: &Path, netns: &str) -> ProbeOptions {
    ProbeOptions {
        pmc_socket: Some(socket.to_path_buf()),
        netns: Some(netns.to_string()),
        timeout: Duration::from_secs(3),
    }
}

#[test]
fn probe_reads_a_ptp4l_slave_and_its_grandmaster() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let kernel_before = read_adjtimex().expect("adjtimex read");
    let tag = format!("tsync{}", std::process::id());
    let (ns_a, ns_b) = (format!("{tag}a"), format!("{tag}b"));
    let (if_a, if_b) = (format!("{tag}a0"), format!("{tag}b0"));
    let dir = std::env::temp_dir().join(format!("{tag}-ptp"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut lab = PtpLab {
        dir,
        ptp4l: Vec::new(),
        _namespaces: vec![Netns::add(&ns_a), Netns::add(&ns_b)],
    };
    run(&[
        "ip", "link", "add", &if_a, "netns", &ns_a, "type", "veth", "peer", "name", &if_b, "netns",
        &ns_b,
    ]);
    for (ns, iface) in [(&ns_a, &if_a), (&ns_b, &if_b)] {
        run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        run(&["ip", "-n", ns, "link", "set", iface, "up"]);
    }

    let started = Instant::now();
    lab.start("a", &ns_a, &if_a, 100, true);
    lab.start("b", &ns_b, &if_b, 128, false);

    let slave_options = options(&lab.socket("b"), &ns_b);
    let mut seen: Vec<(String, Duration)> = Vec::new();
    let slave = loop {
        lab.assert_running();
        let sync = probe(&slave_options);
        let state = match &sync.source {
            SyncSource::Ptp { port_state, .. } => port_state.clone(),
            _ => format!("no answer ({})", sync.detail),
        };
        if seen.last().map(|(s, _)| s) != Some(&state) {
            eprintln!("{:>6} ms  slave: {state}", started.elapsed().as_millis());
            seen.push((state.clone(), started.elapsed()));
        }
        if state == "SLAVE" {
            break sync;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no SLAVE after 60 s: {seen:?}\n--- b\n{}",
            lab.log("b")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("slave: {}", serde_json::to_string(&slave).unwrap());
    let (state, offset, delay, gm, gm_present, steps, stamping) = ptp(&slave);
    assert_eq!(state, "SLAVE");
    assert!(gm_present);
    assert_eq!(steps, 1);
    assert_eq!(stamping, "CLOCK_REALTIME (ptp4l software timestamping)");
    let bound = slave
        .error_bound_ns
        .unwrap_or_else(|| panic!("a SLAVE port gives a bound: {}", slave.detail));
    assert_eq!(bound, offset.unsigned_abs() + delay.unsigned_abs());
    // One system clock on both sides of a veth: software timestamps are microseconds
    // apart, far from a second.
    assert!(bound < 1_000_000_000, "{bound} ns: {}", slave.detail);

    let master = probe(&options(&lab.socket("a"), &ns_a));
    eprintln!("grandmaster: {}", serde_json::to_string(&master).unwrap());
    let (state, _, _, master_gm, gm_present, steps, _) = ptp(&master);
    assert_eq!(state, "MASTER");
    assert!(!gm_present);
    assert_eq!(steps, 0);
    assert_eq!(master_gm, gm, "the slave follows this grandmaster");
    assert_eq!(master.error_bound_ns, Some(0));

    lab.assert_running();
    let log = lab.log("b");
    drop(lab);

    // The slave tried to steer the clock and the kernel refused: the kernel still says
    // unsynchronised if it did before (ptp4l clears STA_UNSYNC when it may).
    let kernel_after = read_adjtimex().expect("adjtimex read");
    if kernel_before.status & STA_UNSYNC != 0 {
        assert_ne!(
            kernel_after.status & STA_UNSYNC,
            0,
            "STA_UNSYNC was cleared while the test ran\n{log}"
        );
    }
    assert!(
        !log.contains("failed to adjust the clock") || log.contains("Operation not permitted"),
        "{log}"
    );
}
