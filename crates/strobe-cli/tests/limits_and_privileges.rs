//! Limits (flows, cores, frame sizes) are checked before anything is allocated or started,
//! a worker that cannot be started is an error rather than a panic, and strobe runs
//! unprivileged with exactly the capabilities docs/privileges.md names.

mod common;
use common::lab::sh_in;
use common::*;

use std::fmt::Write as _;
use std::process::{Command, Output};

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn bad_input(out: Output, must_contain: &[&str]) {
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    for s in must_contain {
        assert!(stderr.contains(s), "`{s}` missing from: {stderr}");
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A scenario of `flows` one-frame flows spread over `ports` null ports.
fn many_flows(flows: usize, ports: usize) -> String {
    let mut s = String::new();
    for p in 0..ports {
        writeln!(s, "[[ports]]\nname = \"p{p}\"\nlocation = \"null\"").unwrap();
    }
    for i in 0..flows {
        writeln!(
            s,
            "[[flows]]\nname = \"f{i}\"\ntx = \"p{}\"\nduration = {{ fixed_packets = {{ packets = 1 }} }}\n[[flows.packet]]\nethernet = {{ src = \"02:00:00:00:00:01\" }}",
            i % ports
        )
        .unwrap();
    }
    s
}

#[test]
fn exactly_65536_flows_run() {
    let dir = Scratch::new("flows-65536");
    let path = dir.path("s.toml");
    // Over 64 ports, so that no worker merges 65 536 flows by linear scan (slow unoptimised).
    std::fs::write(&path, many_flows(65_536, 64)).unwrap();
    let out = strobe()
        .args(["gen", "-q", "--unpaced", &path])
        .output()
        .unwrap();
    let stdout = ok(out);
    let last = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("f65535"))
        .unwrap_or_else(|| panic!("no row for the last flow in:\n{stdout}"));
    assert_eq!(last.split_whitespace().nth(1), Some("1"), "{last}");
}

#[test]
fn too_many_flows_are_refused_before_the_file_is_parsed() {
    let dir = Scratch::new("flows-70000");
    let path = dir.path("s.toml");
    std::fs::write(&path, many_flows(70_000, 1)).unwrap();
    // Parsing 70 000 flows takes about half a gigabyte: with 300 MB of address space the
    // refusal must come before the parse.
    let out = Command::new("prlimit")
        .arg("--as=300000000")
        .arg(env!("CARGO_BIN_EXE_strobe"))
        .args(["gen", &path])
        .output()
        .unwrap();
    bad_input(out, &["at most 65536 flows", "s.toml:"]);
}

#[test]
fn cores_are_bounded_the_same_everywhere() {
    for cores in ["0", "257", "4294967296"] {
        let out = gen_udp_command("null")
            .args(["--count", "10", "--cores", cores])
            .output()
            .unwrap();
        bad_input(out, &["--cores", "1..=256"]);
    }
    let dir = Scratch::new("cores-file");
    let path = dir.path("s.toml");
    let mut text = many_flows(1, 1);
    text = text.replace("location = \"null\"", "location = \"null\"\ncores = 257");
    std::fs::write(&path, text).unwrap();
    bad_input(
        strobe().args(["gen", &path]).output().unwrap(),
        &["cores", "from 1 to 256"],
    );
}

#[test]
fn more_workers_than_cores_are_warned_about() {
    // One usable core, two Poisson sub-flows: two transmit workers share it.
    let out = Command::new("taskset")
        .args(["-c", "0"])
        .arg(env!("CARGO_BIN_EXE_strobe"))
        .args([
            "gen",
            "-q",
            "--port",
            "null",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
        ])
        .args(["--count", "100", "--rate", "10kpps", "--pattern", "poisson"])
        .args(["--cores", "2"])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("2 transmit and 0 receive workers on 1 usable cores"),
        "{stderr}"
    );
}

/// The built binary copied where an unprivileged user can run it.
fn binary_copy(dir: &Scratch) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.path("strobe");
    std::fs::copy(env!("CARGO_BIN_EXE_strobe"), &bin).unwrap();
    for (p, mode) in [
        (dir.0.to_string_lossy().into_owned(), 0o755),
        (bin.clone(), 0o755),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    bin
}

/// Runs `args` as user nobody with no capabilities beyond what the file grants.
fn as_nobody(prefix: &[&str], bin: &str, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(prefix)
        .arg(bin)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_worker_that_cannot_start_is_an_error_not_a_panic() {
    assert!(is_root(), "needs root to run strobe as another user");
    let dir = Scratch::new("spawn");
    let bin = binary_copy(&dir);
    // RLIMIT_NPROC counts every task of the user: room for what nobody already runs, plus
    // strobe's main and signal threads and one worker; the second of eight workers fails.
    let running = Command::new("sh")
        .args(["-c", "ps -L -u 65534 --no-headers | wc -l"])
        .output()
        .expect("ps (procps) counts nobody's tasks");
    let running: u64 = String::from_utf8_lossy(&running.stdout)
        .trim()
        .parse()
        .unwrap();
    let nproc = format!("--nproc={}", running + 3);
    let out = as_nobody(
        &["prlimit", &nproc],
        &bin,
        &[
            "gen",
            "-q",
            "--port",
            "null",
            "--udp",
            "198.18.0.1:1-198.18.1.1:2",
        ]
        .into_iter()
        .chain(["--count", "100", "--rate", "10kpps", "--pattern", "poisson"])
        .chain(["--cores", "8"])
        .collect::<Vec<_>>(),
    );
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("cannot start the transmit worker for port"),
        "{stderr}"
    );
}

/// Frames of `size` bytes (FCS included) from `tx` to the lab's receiver, counted there by
/// strobe and by tcpdump + tshark, which also checks every UDP checksum (it covers the
/// whole payload, so a multi-buffer frame put together wrongly fails it).
fn jumbo_run(lab: &common::lab::TestLab, dir: &Scratch, tx: &str, size: u32) {
    let json = dir.path(&format!("jumbo-{size}.json"));
    let pcap = dir.path(&format!("jumbo-{size}.pcap"));
    let capture = common::lab::Capture::start(&lab.ns("rx"), "rx0", &pcap);
    ok(lab
        .gen_command(tx, "lab:rx")
        .args([
            "--rate",
            "5kpps",
            "--count",
            "2000",
            "--size",
            &size.to_string(),
        ])
        .args(["--json", &json])
        .output()
        .unwrap());
    drop(capture);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = &r["flows"][0];
    assert_eq!(f["frames_tx"], 2000, "{tx} {size}: {f}");
    assert_eq!(f["frames_rx"], 2000, "{tx} {size}: {f}");
    assert_eq!(f["loss"], 0, "{tx} {size}: {f}");
    assert_eq!(r["rx_ports"][0]["truncated"], 0, "{r}");
    let rows: Vec<Vec<String>> =
        tshark(&pcap, &["udp.dstport", "frame.len", "udp.checksum.status"])
            .into_iter()
            .filter(|row| row[0] == "2000")
            .collect();
    assert_eq!(rows.len(), 2000, "tcpdump saw {} frames", rows.len());
    let want = (size - 4).to_string();
    for (j, row) in rows.iter().enumerate() {
        assert_eq!(
            (row[1].as_str(), row[2].as_str()),
            (want.as_str(), "1"),
            "{tx} {size}: length and UDP checksum status (1 = good) of frame {j}"
        );
    }
}

/// `strobe reflect lab:rx` (AF_PACKET, one ring frame per packet) in the background.
struct ReflectorAt1500 {
    child: std::process::Child,
}

impl ReflectorAt1500 {
    fn start(lab: &common::lab::TestLab, json: &str) -> ReflectorAt1500 {
        let mut cmd = strobe();
        cmd.args(["reflect", "lab:rx", "--lab", &lab.prefix]).args([
            "--duration",
            "60s",
            "--json",
            json,
        ]);
        let child = common::lab::spawn_reflector(&mut cmd);
        ReflectorAt1500 { child }
    }

    /// Stops it with SIGINT (as Ctrl-C) and returns its JSON report.
    fn stop(mut self, json: &str) -> serde_json::Value {
        // SAFETY: kill(2) on the PID of the child this test started.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        // 130: stopped by SIGINT, its report written (docs/results.md: exit codes).
        assert_eq!(status.code(), Some(130), "reflector: {status}");
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
    }
}

impl Drop for ReflectorAt1500 {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: as above; the child has not been waited for, so its pid is its own.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// Jumbo frames go through where the MTU allows (AF_PACKET and AF_XDP, whose frames beyond
/// one 4096-byte UMEM frame are sent and received as multi-buffer packets), checked by
/// strobe's receivers and by tshark, and are refused before the run, with the MTU and the
/// fix named, where the MTU does not allow them.
#[test]
fn jumbo_frames_where_the_mtu_allows_and_a_clear_refusal_where_not() {
    let dir = Scratch::new("jumbo");
    let lab = common::lab::TestLab::up("j", "cable");
    for (tx, size) in [("lab:tx", 9000), ("lab:tx", 2100), ("lab:tx@afxdp", 2100)] {
        let out = lab
            .gen_command(tx, "lab:rx")
            .args([
                "--rate",
                "5kpps",
                "--count",
                "10",
                "--size",
                &size.to_string(),
            ])
            .output()
            .unwrap();
        bad_input(
            out,
            &[
                "the MTU of",
                "tx0`, 1500",
                &format!("ip link set tx0 mtu {}", size - 18),
            ],
        );
    }
    // A reflector opened at MTU 1500 has ring frames for 1500: frames that grow beyond them
    // once the MTU is raised are counted as unfit, never reflected cut short, never a panic.
    let reflect_json = dir.path("reflect.json");
    let reflector = ReflectorAt1500::start(&lab, &reflect_json);
    sh_in(&lab.ns("tx"), "ip link set tx0 mtu 9198");
    sh_in(&lab.ns("rx"), "ip link set rx0 mtu 9198");
    for size in [9000, 128] {
        ok(lab
            .gen_command("lab:tx", "lab:tx")
            .args([
                "--rate",
                "5kpps",
                "--count",
                "500",
                "--size",
                &size.to_string(),
            ])
            .output()
            .unwrap());
    }
    let r = reflector.stop(&reflect_json);
    assert_eq!(r["unfit"], 500, "{r}");
    assert_eq!(r["reflected"], 500, "{r}");

    jumbo_run(&lab, &dir, "lab:tx", 9216);
    jumbo_run(&lab, &dir, "lab:tx", 9000);
    // AF_XDP: one 4096-byte UMEM frame, then multi-buffer packets of three.
    jumbo_run(&lab, &dir, "lab:tx@afxdp", 4100);
    jumbo_run(&lab, &dir, "lab:tx@afxdp", 9216);
    // AF_XDP receivers gather multi-buffer frames (tcpdump sees none of them: XDP takes
    // them before the stack, so strobe's counts and trailers are the check here).
    for (tx, size) in [
        ("lab:tx", 9216),
        ("lab:tx@afxdp", 9000),
        ("lab:tx@afxdp", 64),
    ] {
        let json = dir.path("xdp-rx.json");
        ok(lab
            .gen_command(tx, "lab:rx@afxdp")
            .args([
                "--rate",
                "5kpps",
                "--count",
                "2000",
                "--size",
                &size.to_string(),
            ])
            .args(["--json", &json])
            .output()
            .unwrap());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let f = &r["flows"][0];
        assert_eq!(
            (&f["frames_tx"], &f["frames_rx"], &f["loss"]),
            (&2000.into(), &2000.into(), &0.into()),
            "{tx} -> AF_XDP, {size}: {f}"
        );
        let port = &r["rx_ports"][0];
        assert_eq!(port["truncated"], 0, "{port}");
        assert_eq!(port["not_instrumented"], 0, "{port}");
    }
}

/// A veth pair in the root namespace (an unprivileged process cannot enter another one),
/// under a name unique to this process, removed when dropped.
struct RootVeth {
    a: String,
    b: String,
}

impl RootVeth {
    fn up() -> RootVeth {
        let tag = std::process::id() % 100_000;
        let (a, b) = (format!("scap{tag}a"), format!("scap{tag}b"));
        let ip = |args: &[&str]| ok(Command::new("ip").args(args).output().unwrap());
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        let veth = RootVeth { a, b };
        ip(&["link", "set", &veth.a, "up"]);
        ip(&["link", "set", &veth.b, "up"]);
        veth
    }
}

impl Drop for RootVeth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

/// `strobe gen` of 1000 frames from `tx` to `rx` as user nobody, with locked memory
/// limited to `memlock` (prlimit's SOFT:HARD form, set as root before dropping it).
fn gen_as_nobody(bin: &str, memlock: &str, tx: &str, rx: &str) -> Output {
    Command::new("prlimit")
        .arg(format!("--memlock={memlock}"))
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(bin)
        .args(["gen", "-q", "--port", tx, "--rx", rx])
        .args(["--udp", "198.18.0.1:1000-198.18.1.1:2000"])
        .args(["--count", "1000", "--rate", "10kpps"])
        .output()
        .unwrap()
}

/// Every one of the 1000 frames arrived (the flow's row of the results table).
fn all_arrived(out: Output, what: &str) {
    let stdout = ok(out);
    let row: Vec<&str> = stdout
        .lines()
        .map(str::split_whitespace)
        .map(Iterator::collect::<Vec<_>>)
        .find(|w| w.first() == Some(&"udp"))
        .unwrap_or_else(|| panic!("{what}: no results in:\n{stdout}"));
    assert_eq!(&row[1..4], ["1000", "1000", "0"], "{what}: {stdout}");
}

/// strobe as user nobody with exactly the capabilities of docs/privileges.md: AF_PACKET and AF_XDP runs
/// work with 64 KiB of locked memory (CAP_IPC_LOCK); without CAP_IPC_LOCK, strobe raises
/// its soft memlock limit to what the UMEM needs; without capabilities, the errors name
/// the missing ones.
#[test]
fn runs_unprivileged_with_the_documented_capabilities() {
    let have = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert!(
        is_root() && ["setcap", "setpriv", "prlimit"].iter().all(|t| have(t)),
        "needs root, setcap (libcap2-bin), setpriv and prlimit (util-linux): scripts/test.sh \
         installs them"
    );
    let veth = RootVeth::up();
    let (tx, rx) = (
        |kind: &str| format!("{kind}:{}", veth.a),
        |kind: &str| format!("{kind}:{}", veth.b),
    );
    let dir = Scratch::new("caps");
    let setcap = |caps: &str| {
        let bin = binary_copy(&dir);
        let named = format!("{bin}-{}", caps.len());
        std::fs::rename(&bin, &named).unwrap();
        if !caps.is_empty() {
            ok(Command::new("setcap")
                .args([caps, &named])
                .output()
                .unwrap());
        }
        named
    };
    let all = setcap("cap_net_raw,cap_net_admin,cap_bpf,cap_ipc_lock+ep");
    let no_ipc_lock = setcap("cap_net_raw,cap_net_admin,cap_bpf+ep");
    let none = setcap("");

    all_arrived(
        gen_as_nobody(&all, "65536:65536", &tx("afpacket"), &rx("afpacket")),
        "AF_PACKET with capabilities",
    );
    all_arrived(
        gen_as_nobody(&all, "65536:65536", &tx("afxdp"), &rx("afxdp")),
        "AF_XDP with capabilities",
    );
    // 2 MiB of TX and 4 MiB of RX UMEM against a soft limit of 64 KiB: raised up to the
    // usual hard limit of 8 MiB, which holds both.
    all_arrived(
        gen_as_nobody(&no_ipc_lock, "65536:8388608", &tx("afxdp"), &rx("afxdp")),
        "AF_XDP without CAP_IPC_LOCK, memlock raised",
    );
    let out = gen_as_nobody(&no_ipc_lock, "65536:65536", &tx("afxdp"), &rx("afpacket"));
    let stderr = stderr_of(&out);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("CAP_IPC_LOCK") && stderr.contains("RLIMIT_MEMLOCK"),
        "{stderr}"
    );

    let out = gen_as_nobody(&none, "65536:65536", &tx("afpacket"), &rx("afpacket"));
    let stderr = stderr_of(&out);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("CAP_NET_RAW"), "{stderr}");
    let out = gen_as_nobody(&none, "65536:65536", &tx("afxdp"), &rx("afxdp"));
    let stderr = stderr_of(&out);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    for cap in ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF", "CAP_IPC_LOCK"] {
        assert!(stderr.contains(cap), "{cap}: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}
