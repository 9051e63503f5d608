//! Tests against real namespaces (they need root). Each test owns a prefix `sl{pid}{tag}`
//! and a guard that takes its lab down however the test ends. Frames are built and decoded
//! with etherparse, independently of the lab's own code.

use std::fs;
use std::io;
use std::mem;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use etherparse::{
    Icmpv4Type, Icmpv6Type, LinkHeader, NetHeaders, PacketBuilder, PacketHeaders, TransportHeader,
};

use crate::netns::{Netns, NETNS_DIR};
use crate::topology::{Role, MAC_DUT1, MAC_TX};
use crate::{
    down, ovs, status, test_hooks, testpmd, up, Dut, Endpoint, Lab, LabConfig, LabError,
    TestpmdDriver,
};

/// Owns a test's prefix; removes its lab on drop, also when the test fails.
struct LabGuard {
    prefix: String,
}

impl LabGuard {
    fn new(tag: &str) -> LabGuard {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "the lab tests need root (network namespaces)");
        let prefix = format!("sl{}{tag}", std::process::id());
        down(&prefix).expect("clear a lab left over from an earlier run");
        LabGuard { prefix }
    }

    fn config(&self, dut: Dut) -> LabConfig {
        LabConfig {
            prefix: self.prefix.clone(),
            receive_steering: dut.steers_receive_by_default(),
            dut,
        }
    }

    /// Writes an OpenFlow table `text` as `name` in a directory of this test's own, which
    /// goes with the guard.
    fn flows_file(&self, name: &str, text: &str) -> std::path::PathBuf {
        let dir = self.flows_dir();
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        path
    }

    fn flows_dir(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("{}-flows", self.prefix))
    }

    /// Namespace files whose name starts with the prefix.
    fn leftovers(&self) -> Vec<String> {
        let mine = format!("{}-", self.prefix);
        fs::read_dir(NETNS_DIR)
            .map(|dir| {
                dir.filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                    .filter(|name| name.starts_with(&mine))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = down(&self.prefix);
        let _ = fs::remove_dir_all(self.flows_dir());
    }
}

/// Identity of a namespace: the inode of the nsfs file bound on its name.
fn ns_inode(name: &str) -> u64 {
    fs::metadata(format!("{NETNS_DIR}/{name}")).unwrap().ino()
}

/// Runs `f` on this thread inside namespace `name`; sockets made there stay there.
fn in_ns<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let ns = Netns::open(name)
        .unwrap()
        .unwrap_or_else(|| panic!("namespace {name} exists"));
    ns.run(|| Ok(f())).unwrap()
}

/// An AF_PACKET socket on one interface: sends whole frames, receives everything on the link.
struct PacketSocket {
    fd: OwnedFd,
}

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

impl PacketSocket {
    fn open(e: &Endpoint) -> PacketSocket {
        in_ns(&e.netns, || {
            // SAFETY: plain socket(2) call; the result is checked before use.
            let raw =
                unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(ETH_P_ALL_BE)) };
            assert!(raw >= 0, "packet socket: {}", io::Error::last_os_error());
            // SAFETY: `raw` is a fresh descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let name = std::ffi::CString::new(e.iface.as_str()).unwrap();
            // SAFETY: `name` is a valid NUL-terminated string.
            let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
            assert_ne!(index, 0, "interface {} in {}", e.iface, e.netns);
            // SAFETY: all-zero is a valid sockaddr_ll; the fields are set below.
            let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = ETH_P_ALL_BE;
            addr.sll_ifindex = index as i32;
            // SAFETY: `addr` is a properly sized sockaddr_ll that outlives the call.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&addr as *const libc::sockaddr_ll).cast(),
                    mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            assert_eq!(rc, 0, "bind packet socket: {}", io::Error::last_os_error());
            let timeout = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            // SAFETY: SO_RCVTIMEO takes a timeval, passed with its exact size.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&timeout as *const libc::timeval).cast(),
                    mem::size_of::<libc::timeval>() as u32,
                )
            };
            assert_eq!(rc, 0, "SO_RCVTIMEO: {}", io::Error::last_os_error());
            PacketSocket { fd }
        })
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is valid for its length for the duration of the call.
        let sent =
            unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            sent,
            frame.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
    }

    /// The next frame that arrived on the link (not one this host sent), if any within 100 ms.
    fn recv_incoming<'b>(&self, buf: &'b mut [u8]) -> Option<&'b [u8]> {
        loop {
            // SAFETY: all-zero is a valid sockaddr_ll to be filled by the kernel.
            let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
            let mut from_len = mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` and `from` are writable for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut from_len,
                )
            };
            if n < 0 {
                return None;
            }
            if from.sll_pkttype != libc::PACKET_OUTGOING {
                return Some(&buf[..n as usize]);
            }
        }
    }

    /// Waits up to 2 s for an incoming frame that `matches`, decoded.
    fn expect<'b>(
        &self,
        buf: &'b mut [u8],
        what: &str,
        matches: impl Fn(&PacketHeaders) -> bool,
    ) -> PacketHeaders<'b> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut found = None;
        while found.is_none() && Instant::now() < deadline {
            if let Some(frame) = self.recv_incoming(buf) {
                let len = frame.len();
                if PacketHeaders::from_ethernet_slice(frame).is_ok_and(|h| matches(&h)) {
                    found = Some(len);
                }
            }
        }
        let len = found.unwrap_or_else(|| panic!("no {what} arrived within 2 s"));
        PacketHeaders::from_ethernet_slice(&buf[..len]).unwrap()
    }
}

fn macs(headers: &PacketHeaders) -> ([u8; 6], [u8; 6]) {
    match &headers.link {
        Some(LinkHeader::Ethernet2(eth)) => (eth.source, eth.destination),
        other => panic!("not Ethernet II: {other:?}"),
    }
}

fn hop_limit(headers: &PacketHeaders) -> u8 {
    match &headers.net {
        Some(NetHeaders::Ipv4(ip, _)) => ip.time_to_live,
        Some(NetHeaders::Ipv6(ip, _)) => ip.hop_limit,
        None => panic!("no IP header"),
    }
}

fn is_udp_to(headers: &PacketHeaders, port: u16) -> bool {
    matches!(&headers.transport, Some(TransportHeader::Udp(udp)) if udp.destination_port == port)
}

/// Builds a UDP frame the way strobe's engine will: addressed to `from.next_hop_mac`.
fn udp_frame(from: &Endpoint, to: &Endpoint, v6: bool, port: u16, payload: &[u8]) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(from.mac, from.next_hop_mac);
    let ip = if v6 {
        eth.ipv6(from.ipv6.octets(), to.ipv6.octets(), 64)
    } else {
        eth.ipv4(from.ipv4.octets(), to.ipv4.octets(), 64)
    };
    let builder = ip.udp(40_000, port);
    let mut frame = Vec::with_capacity(builder.size(payload.len()));
    builder.write(&mut frame, payload).unwrap();
    frame
}

/// Sends a hand-built frame from `from` to `to` and checks what arrives on `to`'s link.
fn frame_crosses(lab: &Lab, from: &Endpoint, to: &Endpoint, v6: bool) {
    let port = if v6 { 40_006 } else { 40_004 };
    let payload = format!("strobe-lab {} -> {}", from.iface, to.iface);
    let sink = PacketSocket::open(to);
    PacketSocket::open(from).send(&udp_frame(from, to, v6, port, payload.as_bytes()));
    let mut buf = vec![0u8; 2048];
    let what = format!(
        "UDP frame {} -> {} (IPv{})",
        from.iface,
        to.iface,
        if v6 { 6 } else { 4 }
    );
    let got = sink.expect(&mut buf, &what, |h| is_udp_to(h, port));
    assert_eq!(got.payload.slice(), payload.as_bytes(), "{what}");
    let (src, dst) = macs(&got);
    assert_eq!(dst, to.mac, "{what}: destination MAC");
    if lab.dut.routes() {
        // Routed: the router's far port is the new source and the hop limit drops by one.
        assert_eq!(src, to.next_hop_mac, "{what}: source MAC");
        assert_eq!(hop_limit(&got), 63, "{what}");
    } else {
        assert_eq!(src, from.mac, "{what}: source MAC");
        assert_eq!(hop_limit(&got), 64, "{what}");
    }
}

/// An ICMP echo request from tx to rx, answered by rx's own kernel (a ping, without `ping`).
fn ping(lab: &Lab, v6: bool) {
    let (tx, rx) = (&lab.tx, &lab.rx);
    let eth = PacketBuilder::ethernet2(tx.mac, tx.next_hop_mac);
    let id = std::process::id() as u16;
    let payload = b"strobe-lab ping";
    let mut frame = Vec::new();
    if v6 {
        let b = eth
            .ipv6(tx.ipv6.octets(), rx.ipv6.octets(), 64)
            .icmpv6_echo_request(id, 1);
        b.write(&mut frame, payload).unwrap();
    } else {
        let b = eth
            .ipv4(tx.ipv4.octets(), rx.ipv4.octets(), 64)
            .icmpv4_echo_request(id, 1);
        b.write(&mut frame, payload).unwrap();
    }
    let socket = PacketSocket::open(tx);
    socket.send(&frame);
    let mut buf = vec![0u8; 2048];
    let is_reply = |h: &PacketHeaders| match &h.transport {
        Some(TransportHeader::Icmpv4(icmp)) => {
            matches!(icmp.icmp_type, Icmpv4Type::EchoReply(echo) if echo.id == id)
        }
        Some(TransportHeader::Icmpv6(icmp)) => {
            matches!(icmp.icmp_type, Icmpv6Type::EchoReply(echo) if echo.id == id)
        }
        _ => false,
    };
    let reply = socket.expect(&mut buf, "echo reply", is_reply);
    assert_eq!(reply.payload.slice(), payload);
    assert_eq!(macs(&reply).1, tx.mac);
}

/// A datagram through the kernels' own stacks (routes, static neighbours) and the answer back.
fn udp_round_trip(lab: &Lab, v6: bool) {
    let ip = |e: &Endpoint| -> IpAddr {
        if v6 {
            e.ipv6.into()
        } else {
            e.ipv4.into()
        }
    };
    let bind = |e: &Endpoint| {
        let socket = in_ns(&e.netns, || {
            UdpSocket::bind(SocketAddr::new(ip(e), 0)).unwrap()
        });
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        socket
    };
    let (client, server) = (bind(&lab.tx), bind(&lab.rx));
    client
        .send_to(b"ping", server.local_addr().unwrap())
        .unwrap();
    let mut buf = [0u8; 16];
    let (n, from) = server
        .recv_from(&mut buf)
        .expect("datagram from tx reaches rx");
    assert_eq!(
        (&buf[..n], from),
        (&b"ping"[..], client.local_addr().unwrap())
    );
    server.send_to(b"pong", from).unwrap();
    let (n, from) = client
        .recv_from(&mut buf)
        .expect("answer from rx reaches tx");
    assert_eq!(
        (&buf[..n], from),
        (&b"pong"[..], server.local_addr().unwrap())
    );
}

/// Up, read back, traffic both ways on both IP versions, down, and nothing left.
fn lifecycle(tag: &str, dut: Dut) {
    let guard = LabGuard::new(tag);
    let lab = up(&guard.config(dut.clone())).unwrap();
    assert_eq!(lab.dut, dut);
    assert_eq!(status(&guard.prefix).unwrap().as_ref(), Some(&lab));
    let mut expected = lab.namespaces();
    let mut present = guard.leftovers();
    expected.sort();
    present.sort();
    assert_eq!(present, expected);
    assert_eq!(
        lab.port(&lab.tx, "afpacket"),
        format!("afpacket:{}-tx/tx0", guard.prefix)
    );

    for v6 in [false, true] {
        frame_crosses(&lab, &lab.tx, &lab.rx, v6);
        frame_crosses(&lab, &lab.rx, &lab.tx, v6);
        ping(&lab, v6);
        udp_round_trip(&lab, v6);
    }

    assert!(down(&guard.prefix).unwrap(), "down removes the lab");
    assert_eq!(status(&guard.prefix).unwrap(), None);
    assert!(!down(&guard.prefix).unwrap(), "a second down finds nothing");
    assert_eq!(guard.leftovers(), Vec::<String>::new());
}

#[test]
fn cable_lifecycle() {
    lifecycle("c", Dut::Cable);
}

#[test]
fn bridge_lifecycle() {
    lifecycle("b", Dut::Bridge);
}

#[test]
fn router_lifecycle() {
    lifecycle("r", Dut::Router);
}

#[test]
fn tbf_lifecycle() {
    lifecycle(
        "t",
        Dut::Tbf {
            rate_bps: 1_000_000_000,
        },
    );
}

#[test]
fn nft_lifecycle() {
    lifecycle("n", Dut::Nft { rules: 500 });
}

/// The nft DUT's rules are in its own namespace, all of them, and nowhere else; an `up`
/// with another number of rules rebuilds the lab with those.
#[test]
fn the_nft_dut_loads_its_rules_in_its_own_namespace() {
    let guard = LabGuard::new("nr");
    let lab = up(&guard.config(Dut::Nft { rules: 2000 })).unwrap();
    let dut_ns = format!("{}-dut", guard.prefix);
    let rules = |ns: &str| {
        sh_in(ns, "nft list chain inet strobe_dut forward")
            .matches(" drop")
            .count()
    };
    assert_eq!(rules(&dut_ns), 2000);
    let host = std::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .expect("nft (apt-get install nftables)");
    assert!(!String::from_utf8_lossy(&host.stdout).contains("strobe_dut"));
    frame_crosses(&lab, &lab.tx, &lab.rx, false);
    let fewer = up(&guard.config(Dut::Nft { rules: 10 })).unwrap();
    assert_eq!(status(&guard.prefix).unwrap(), Some(fewer));
    assert_eq!(rules(&dut_ns), 10);
}

#[test]
fn xdp_lifecycle() {
    lifecycle("x", Dut::Xdp);
}

/// The xdp DUT forwards through its programs (in the driver, on both ports), and a lab
/// whose program was taken off reads as damaged and is rebuilt.
#[test]
fn the_xdp_dut_forwards_in_the_driver_and_is_checked() {
    let guard = LabGuard::new("xd");
    let lab = up(&guard.config(Dut::Xdp)).unwrap();
    let dut_ns = format!("{}-dut", guard.prefix);
    for iface in ["dut0", "dut1"] {
        let link = sh_in(&dut_ns, &format!("ip -details link show {iface}"));
        assert!(link.contains("prog/xdp id"), "{link}");
    }
    frame_crosses(&lab, &lab.tx, &lab.rx, false);
    sh_in(&dut_ns, "ip link set dev dut0 xdp off");
    let err = status(&guard.prefix).unwrap_err();
    assert!(
        matches!(err, LabError::Broken { .. }) && err.to_string().contains("XDP forwarder"),
        "{err}"
    );
    let again = up(&guard.config(Dut::Xdp)).unwrap();
    assert_eq!(status(&guard.prefix).unwrap(), Some(again));
}

/// One testpmd at a time in this binary: each busy-polls a core, and the lab tests beside
/// them need the machine's other one.
static ONE_TESTPMD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_testpmd() -> std::sync::MutexGuard<'static, ()> {
    ONE_TESTPMD.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn testpmd_lifecycle() {
    let _one = one_testpmd();
    lifecycle(
        "p",
        Dut::Testpmd {
            driver: TestpmdDriver::AfPacket,
            core: 0,
        },
    );
}

#[test]
fn testpmd_afxdp_lifecycle() {
    let _one = one_testpmd();
    lifecycle(
        "px",
        Dut::Testpmd {
            driver: TestpmdDriver::AfXdp,
            core: 0,
        },
    );
}

/// The testpmd DUT is a process of the lab's own: running in the DUT's namespace with its
/// forwarding thread on the core asked, counting what it forwards in its own counters; a
/// lab whose testpmd died reads as damaged and is rebuilt, and `down` stops it by PID.
#[test]
fn the_testpmd_dut_is_a_pinned_process_the_lab_starts_checks_and_stops() {
    let _one = one_testpmd();
    let guard = LabGuard::new("pd");
    let dut = Dut::Testpmd {
        driver: TestpmdDriver::AfPacket,
        core: 1.min(std::thread::available_parallelism().unwrap().get() as u32 - 1),
    };
    let Dut::Testpmd { core, .. } = dut else {
        unreachable!()
    };
    let lab = up(&guard.config(dut.clone())).unwrap();
    let pid = testpmd::running(&guard.prefix).expect("testpmd runs");
    let process_ns = fs::metadata(format!("/proc/{pid}/ns/net")).unwrap().ino();
    assert_eq!(process_ns, ns_inode(&format!("{}-dut", guard.prefix)));
    // Every thread of testpmd may run only on `core` (the main lcore sleeps there too).
    for task in fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("status");
        let text = fs::read_to_string(&path).unwrap();
        let name = text.lines().next().unwrap_or_default().to_string();
        // DPDK's control threads (interrupts, telemetry) may run anywhere but the lcores.
        if name.contains("testpmd") || name.contains("rte-worker") {
            assert!(
                text.contains(&format!("Cpus_allowed_list:\t{core}\n")),
                "{}: {text}",
                path.display()
            );
        }
    }
    let before = testpmd::counters(&guard.prefix).unwrap();
    assert!(before.version.starts_with("DPDK "), "{before:?}");
    for _ in 0..5 {
        frame_crosses(&lab, &lab.tx, &lab.rx, false);
    }
    let after = testpmd::counters(&guard.prefix).unwrap();
    let forwarded = after.ports[1].opackets - before.ports[1].opackets;
    assert!(forwarded >= 5, "{before:?} {after:?}");
    assert_eq!(after.lost_toward_sink(), 0, "{after:?}");

    a_killed_process_damages_the_lab_and_down_stops_its_successor(
        &guard,
        dut,
        pid,
        "testpmd",
        testpmd::running,
    );
}

/// Kills the DUT's process `pid` (named `says` in the lab's words): the lab reads as
/// damaged, `up` rebuilds it with a new process, and `down` stops that one and removes the
/// lab's run directory.
fn a_killed_process_damages_the_lab_and_down_stops_its_successor(
    guard: &LabGuard,
    dut: Dut,
    pid: u32,
    says: &str,
    running: fn(&str) -> Option<u32>,
) {
    let target = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = nix::sys::wait::waitpid(target, None);
    let err = status(&guard.prefix).unwrap_err();
    assert!(
        matches!(err, LabError::Broken { .. }) && err.to_string().contains(says),
        "{err}"
    );
    let again = up(&guard.config(dut)).unwrap();
    assert_eq!(status(&guard.prefix).unwrap(), Some(again));
    let second = running(&guard.prefix).expect("a new process runs");
    assert_ne!(second, pid);
    assert!(down(&guard.prefix).unwrap());
    assert_eq!(running(&guard.prefix), None);
    let stat = fs::read_to_string(format!("/proc/{second}/stat")).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z"), "{stat}");
    assert!(!std::path::Path::new(&format!("/run/strobe-lab/{}", guard.prefix)).exists());
}

#[test]
fn ovs_lifecycle() {
    lifecycle("o", Dut::Ovs { flows: None });
}

/// The ovs DUT is the lab's own Open vSwitch: its database server and switch run in the
/// DUT's namespace with every file in the lab's run directory; a flow table replaces the
/// learning bridge (a table that drops everything forwards nothing, by the switch's own
/// counters) and is read again by `up` of the same DUT; a lab whose switch died reads as
/// damaged and is rebuilt; `down` stops both daemons by PID.
#[test]
fn the_ovs_dut_is_the_labs_own_switch_with_the_flow_table_asked() {
    let guard = LabGuard::new("ov");
    let flows = guard.flows_file("Flows.txt", "priority=0,actions=drop\n");
    let dut = Dut::Ovs {
        flows: Some(flows.clone()),
    };
    assert_eq!(dut.to_string().parse::<Dut>().unwrap(), dut);
    let lab = up(&guard.config(dut.clone())).unwrap();
    let pid = ovs::running(&guard.prefix).expect("ovs-vswitchd runs");
    let process_ns = fs::metadata(format!("/proc/{pid}/ns/net")).unwrap().ino();
    assert_eq!(process_ns, ns_inode(&format!("{}-dut", guard.prefix)));
    let run_dir = format!("/run/strobe-lab/{}/ovs", guard.prefix);
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains(&format!("unix:{run_dir}/db.sock")),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );

    // Dropped by the table: dut0 takes the frames in, dut1 sends none of them on.
    let before = ovs::counters(&guard.prefix).unwrap();
    let socket = PacketSocket::open(&lab.tx);
    for _ in 0..5 {
        socket.send(&udp_frame(&lab.tx, &lab.rx, false, 40_010, b"dropped"));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after = ovs::counters(&guard.prefix).unwrap();
    while after[0].rx_packets < before[0].rx_packets + 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        after = ovs::counters(&guard.prefix).unwrap();
    }
    assert!(
        after[0].rx_packets >= before[0].rx_packets + 5,
        "{before:?} {after:?}"
    );
    assert_eq!(
        after[1].tx_packets, before[1].tx_packets,
        "{before:?} {after:?}"
    );

    // The same DUT again, its file edited: forwarding both ways, the same switch process.
    fs::write(
        &flows,
        "in_port=dut0,actions=output:dut1\nin_port=dut1,actions=output:dut0\n",
    )
    .unwrap();
    let again = up(&guard.config(dut.clone())).unwrap();
    assert_eq!(again, lab);
    assert_eq!(ovs::running(&guard.prefix), Some(pid));
    for v6 in [false, true] {
        frame_crosses(&lab, &lab.tx, &lab.rx, v6);
        frame_crosses(&lab, &lab.rx, &lab.tx, v6);
    }
    let forwarded = ovs::counters(&guard.prefix).unwrap();
    assert!(
        forwarded[1].tx_packets >= after[1].tx_packets + 2,
        "{forwarded:?}"
    );

    a_killed_process_damages_the_lab_and_down_stops_its_successor(
        &guard,
        dut,
        pid,
        "Open vSwitch",
        ovs::running,
    );
    assert!(!std::path::Path::new(&run_dir).exists());
}

/// A flow table Open vSwitch refuses fails `up` with its words, and leaves nothing behind:
/// no namespaces, no switch. A file that is not there is refused before anything is built.
#[test]
fn a_bad_ovs_flow_table_is_refused_and_leaves_nothing() {
    let guard = LabGuard::new("ob");
    let flows = guard.flows_file("bad.flows", "in_port=dut0,actions=teleport\n");
    let err = up(&guard.config(Dut::Ovs {
        flows: Some(flows.clone()),
    }))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("refused its flow table") && err.contains("teleport"),
        "{err}"
    );
    assert_eq!(guard.leftovers(), Vec::<String>::new());
    assert_eq!(ovs::running(&guard.prefix), None);
    assert!(!std::path::Path::new(&format!("/run/strobe-lab/{}", guard.prefix)).exists());
    let missing = Dut::Ovs {
        flows: Some(flows.with_file_name("absent.flows")),
    };
    let err = up(&guard.config(missing)).unwrap_err().to_string();
    assert!(
        err.contains("absent.flows") && err.contains("cannot be read"),
        "{err}"
    );
    assert_eq!(guard.leftovers(), Vec::<String>::new());
}

#[test]
fn up_twice_returns_the_same_lab_untouched() {
    let guard = LabGuard::new("i");
    let first = up(&guard.config(Dut::Router)).unwrap();
    let inodes: Vec<u64> = first.namespaces().iter().map(|n| ns_inode(n)).collect();
    let second = up(&guard.config(Dut::Router)).unwrap();
    assert_eq!(first, second);
    let again: Vec<u64> = second.namespaces().iter().map(|n| ns_inode(n)).collect();
    assert_eq!(inodes, again, "the same namespaces, not rebuilt ones");
}

#[test]
fn another_dut_rebuilds_the_lab() {
    let guard = LabGuard::new("s");
    let bridge = up(&guard.config(Dut::Bridge)).unwrap();
    let tx_before = ns_inode(&bridge.tx.netns);
    let router = up(&guard.config(Dut::Router)).unwrap();
    assert_eq!(router.dut, Dut::Router);
    assert_ne!(
        ns_inode(&router.tx.netns),
        tx_before,
        "rebuilt from scratch"
    );
    assert_eq!(status(&guard.prefix).unwrap(), Some(router.clone()));
    frame_crosses(&router, &router.tx, &router.rx, false);

    let tbf = Dut::Tbf {
        rate_bps: 200_000_000,
    };
    assert_eq!(up(&guard.config(tbf.clone())).unwrap().dut, tbf);
    assert_eq!(status(&guard.prefix).unwrap().map(|l| l.dut), Some(tbf));

    // The cable has no DUT namespace: switching to it must not leave the old one behind.
    let cable = up(&guard.config(Dut::Cable)).unwrap();
    assert_eq!(guard.leftovers().len(), 2, "{:?}", guard.leftovers());
    assert_eq!(status(&guard.prefix).unwrap(), Some(cable));
}

#[test]
fn failed_up_leaves_nothing_behind() {
    let guard = LabGuard::new("f");
    test_hooks::fail_up(&guard.prefix);
    let err = up(&guard.config(Dut::Tbf {
        rate_bps: 10_000_000,
    }))
    .unwrap_err();
    assert!(err.to_string().contains("injected test failure"), "{err}");
    assert_eq!(guard.leftovers(), Vec::<String>::new());
    assert_eq!(status(&guard.prefix).unwrap(), None);

    let err = up(&guard.config(Dut::Tbf { rate_bps: 0 })).unwrap_err();
    assert!(matches!(err, LabError::InvalidDut { .. }), "{err}");
    assert_eq!(guard.leftovers(), Vec::<String>::new());
}

#[test]
fn damaged_lab_is_reported_and_rebuilt() {
    let guard = LabGuard::new("d");
    let lab = up(&guard.config(Dut::Bridge)).unwrap();
    crate::netns::delete(&lab.rx.netns).unwrap();
    let err = status(&guard.prefix).unwrap_err();
    assert!(matches!(err, LabError::Broken { .. }), "{err}");
    assert!(err.to_string().contains(&lab.rx.netns), "{err}");
    assert_eq!(up(&guard.config(Dut::Bridge)).unwrap(), lab);
    frame_crosses(&lab, &lab.tx, &lab.rx, true);

    // A link removed by hand is named, and `up` puts it back.
    let dut_ns = &lab.namespaces()[2];
    let deleted = std::process::Command::new("ip")
        .args(["-n", dut_ns, "link", "del", "br0"])
        .status()
        .expect("run ip (iproute2)");
    assert!(deleted.success());
    let err = status(&guard.prefix).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("br0@{dut_ns} is missing")),
        "{err}"
    );
    assert_eq!(up(&guard.config(Dut::Bridge)).unwrap(), lab);
    assert_eq!(status(&guard.prefix).unwrap(), Some(lab));
}

#[test]
fn links_stay_silent_after_up() {
    let (routed, bridged) = (LabGuard::new("q"), LabGuard::new("qb"));
    let labs = [
        up(&routed.config(Dut::Router)).unwrap(),
        up(&bridged.config(Dut::Tbf {
            rate_bps: 100_000_000,
        }))
        .unwrap(),
    ];
    let sockets: Vec<PacketSocket> = labs
        .iter()
        .flat_map(|lab| [PacketSocket::open(&lab.tx), PacketSocket::open(&lab.rx)])
        .collect();
    let mut buf = vec![0u8; 2048];
    // Links that just came up may still send a last multicast listener report (its timer
    // starts when the address is added, and a loaded machine can delay it past `up`): let
    // them settle, then the lab must stay silent, as during a run.
    let settle = Instant::now() + Duration::from_millis(500);
    while Instant::now() < settle {
        for socket in &sockets {
            let _ = socket.recv_incoming(&mut buf);
        }
    }
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline {
        for socket in &sockets {
            if let Some(frame) = socket.recv_incoming(&mut buf) {
                let frame = PacketHeaders::from_ethernet_slice(frame);
                panic!("unexpected frame on an idle lab: {frame:?}");
            }
        }
    }
}

/// The sink answers at most one of many datagrams to a closed port with an ICMP error.
#[test]
fn sink_rate_limits_port_unreachable() {
    let guard = LabGuard::new("u");
    let lab = up(&guard.config(Dut::Cable)).unwrap();
    let socket = PacketSocket::open(&lab.tx);
    let sender = in_ns(&lab.tx.netns, || UdpSocket::bind((lab.tx.ipv4, 0)).unwrap());
    for _ in 0..200 {
        sender.send_to(b"closed", (lab.rx.ipv4, 9)).unwrap();
    }
    let mut buf = vec![0u8; 2048];
    let mut errors = 0;
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        if let Some(frame) = socket.recv_incoming(&mut buf) {
            let h = PacketHeaders::from_ethernet_slice(frame).unwrap();
            if matches!(&h.transport, Some(TransportHeader::Icmpv4(_))) {
                errors += 1;
            }
        }
    }
    assert!(errors <= 1, "{errors} ICMP errors for 200 datagrams");
}

/// A 2-second UDP stream offered at twice the shaper's rate arrives at the shaper's rate.
#[test]
fn tbf_shapes_to_its_rate() {
    const RATE_BPS: f64 = 50e6;
    const PAYLOAD: usize = 1400;
    // Ethernet 14 + IPv4 20 + UDP 8: what tbf counts for each datagram.
    const FRAME_BYTES: usize = PAYLOAD + 42;
    let guard = LabGuard::new("m");
    let lab = up(&guard.config("tbf:50mbit".parse().unwrap())).unwrap();
    let receiver = in_ns(&lab.rx.netns, || UdpSocket::bind((lab.rx.ipv4, 0)).unwrap());
    receiver
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let target = receiver.local_addr().unwrap();
    let sender = in_ns(&lab.tx.netns, || UdpSocket::bind((lab.tx.ipv4, 0)).unwrap());

    let counting = std::thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        let started = Instant::now();
        let (mut frames, mut first, mut last) = (0u64, None, None);
        loop {
            match receiver.recv(&mut buf) {
                Ok(n) => {
                    assert_eq!(n, PAYLOAD);
                    frames += 1;
                    let now = Instant::now();
                    first.get_or_insert(now);
                    last = Some(now);
                }
                // Quiet for 300 ms: the stream is over, unless it has not begun yet.
                Err(_) if frames == 0 && started.elapsed() < Duration::from_secs(3) => {}
                Err(_) => break,
            }
        }
        (frames, first.zip(last))
    });

    // 9 datagrams every millisecond: 104 Mbit/s of frames, twice what the bucket lets through.
    let payload = vec![0x5a; PAYLOAD];
    let start = Instant::now();
    for tick in 0..2000u32 {
        let deadline = start + Duration::from_millis(u64::from(tick));
        if let Some(wait) = deadline.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        for _ in 0..9 {
            sender.send_to(&payload, target).unwrap();
        }
    }
    let (frames, span) = counting.join().unwrap();
    let (first, last) = span.expect("frames arrived through the shaper");
    let seconds = (last - first).as_secs_f64();
    assert!(seconds > 1.5, "arrivals spread over {seconds} s");
    let rate = (frames as usize * FRAME_BYTES * 8) as f64 / seconds;
    eprintln!(
        "tbf:50mbit: {frames} frames in {seconds:.3} s = {:.2} Mbit/s",
        rate / 1e6
    );
    assert!(
        (0.8 * RATE_BPS..=1.2 * RATE_BPS).contains(&rate),
        "shaped rate {:.2} Mbit/s is not within 20 % of 50 Mbit/s",
        rate / 1e6
    );
}

#[test]
fn bad_prefixes_are_refused_before_anything_happens() {
    for (prefix, hint) in [
        ("", "empty"),
        ("a/b", "`/`"),
        ("has space", "letters, digits"),
        (".hidden", "letters, digits"),
        ("twelve-bytes", "IFNAMSIZ"),
    ] {
        let err = up(&LabConfig {
            prefix: prefix.to_string(),
            ..LabConfig::default()
        })
        .unwrap_err();
        assert!(matches!(err, LabError::InvalidPrefix { .. }), "{err}");
        assert!(err.to_string().contains(hint), "{prefix:?}: {err}");
        assert!(status(prefix).is_err() && down(prefix).is_err());
    }
    assert!(crate::check_prefix("elevenbytes").is_ok());
}

#[test]
fn default_config_uses_the_strobe_prefix() {
    let cfg = LabConfig::default();
    assert_eq!(cfg.prefix, "strobe");
    assert_eq!(LabConfig::new(Dut::Router).dut, Dut::Router);
    let lab = crate::topology::Topology::new("strobe", &Dut::Router).lab;
    assert_eq!(lab.port(&lab.rx, "afxdp"), "afxdp:strobe-rx/rx0");
    assert_eq!(lab.namespaces(), ["strobe-tx", "strobe-rx", "strobe-dut"]);
    assert_eq!((lab.tx.mac, lab.rx.next_hop_mac), (MAC_TX, MAC_DUT1));
}

/// Runs `command` with `sh` inside namespace `netns` (sysfs shows a namespace's interfaces
/// only when mounted there, which `ip netns exec` does) and returns its output.
fn sh_in(netns: &str, command: &str) -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c", command])
        .output()
        .expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "`{command}` in {netns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether a sysfs cpumask (`ff,ffffffff`: 32-bit hex words, most significant first) has `cpu`.
fn mask_has(mask: &str, cpu: usize) -> bool {
    let words: Vec<u32> = mask
        .trim()
        .split(',')
        .rev()
        .map(|w| u32::from_str_radix(w, 16).unwrap())
        .collect();
    words
        .get(cpu / 32)
        .is_some_and(|w| w & (1 << (cpu % 32)) != 0)
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is the empty set; sched_getaffinity fills it with its
    // exact size and the result is checked.
    let set = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        let rc = libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set);
        assert_eq!(rc, 0, "sched_getaffinity: {}", io::Error::last_os_error());
        set
    };
    // SAFETY: CPU_ISSET only reads the set, for CPU numbers within its size.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Moves this thread onto the CPUs in `cpus`.
fn pin_to(cpus: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes within its size, and
    // sched_setaffinity reads the set with its exact size; the result is checked.
    unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        let rc = libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity: {}", io::Error::last_os_error());
    }
}

/// Per receive queue, the frames a veth took in through NAPI (`ethtool -S`), by queue.
fn rx_queue_packets(netns: &str, iface: &str) -> Vec<u64> {
    let stats = sh_in(netns, &format!("ethtool -S {iface}"));
    let mut counts = Vec::new();
    for line in stats.lines() {
        let Some((name, value)) = line.trim().split_once(": ") else {
            continue;
        };
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

/// Receive steering follows the configuration, also on a lab that is already up, and reads
/// back as set; turning it off writes empty masks on every receive queue of every veth end.
#[test]
fn receive_steering_can_be_turned_off_and_on_again() {
    let guard = LabGuard::new("rps");
    let cfg = |on: bool| LabConfig {
        receive_steering: on,
        ..guard.config(Dut::Bridge)
    };
    let lab = up(&cfg(false)).unwrap();
    let queues = crate::queues::per_veth();
    let off = crate::steering(&lab).unwrap();
    assert_eq!(off.queues, queues);
    assert!(!off.receive_steering);
    let masks = sh_in(&lab.tx.netns, "cat /sys/class/net/tx0/queues/rx-*/rps_cpus");
    assert!(
        masks
            .lines()
            .all(|m| m.trim_start_matches(['0', ',']).is_empty()),
        "tx0: {masks}"
    );

    let again = up(&cfg(true)).unwrap();
    assert_eq!(again, lab, "the same lab, only steered");
    let on = crate::steering(&again).unwrap();
    assert_eq!(on.queues, queues);
    assert_eq!(on.receive_steering, allowed_cpus().len() >= 2);
}

/// Every veth end has a transmit and a receive queue per CPU (at least two), RPS on every
/// receive queue, and XPS that maps every CPU to transmit queue 0: frames that do not name
/// their queue stay on queue 0 across the lab, router hop included, whichever CPU sends
/// them, so an AF_XDP receiver on queue 0 still sees them all.
#[test]
fn veths_are_multi_queue_and_unqueued_frames_stay_on_queue_zero() {
    let guard = LabGuard::new("mq");
    let lab = up(&guard.config(Dut::Router)).unwrap();
    let queues = crate::queues::per_veth() as usize;
    assert!(queues >= 2);
    let dut_ns = Role::Dut.netns(&guard.prefix);
    let ends = [
        (lab.tx.netns.as_str(), "tx0"),
        (dut_ns.as_str(), "dut0"),
        (dut_ns.as_str(), "dut1"),
        (lab.rx.netns.as_str(), "rx0"),
    ];
    let cpus = allowed_cpus();
    for (netns, iface) in ends {
        let dir = format!("/sys/class/net/{iface}/queues");
        let mut listed: Vec<String> = sh_in(netns, &format!("ls {dir}"))
            .lines()
            .map(str::to_string)
            .collect();
        let mut planned: Vec<String> = (0..queues)
            .flat_map(|q| [format!("rx-{q}"), format!("tx-{q}")])
            .collect();
        listed.sort();
        planned.sort();
        assert_eq!(listed, planned, "queues of {iface}");
        let xps = |q: usize| sh_in(netns, &format!("cat {dir}/tx-{q}/xps_cpus"));
        let (first, second) = (xps(0), xps(1));
        for &cpu in &cpus {
            assert!(
                mask_has(&first, cpu),
                "{iface} tx-0 XPS {first} lacks CPU {cpu}"
            );
            assert!(
                !mask_has(&second, cpu),
                "{iface} tx-1 XPS {second} has CPU {cpu}"
            );
        }
        if cpus.len() >= 2 {
            for q in 0..queues {
                let rps = sh_in(netns, &format!("cat {dir}/rx-{q}/rps_cpus"));
                assert!(
                    rps.trim()
                        .split(',')
                        .any(|w| !w.trim_start_matches('0').is_empty()),
                    "{iface} rx-{q} has no RPS CPUs"
                );
            }
        }
    }

    // veths count frames per receive queue only on their NAPI path, which GRO turns on for
    // frames from a sender without TSO.
    sh_in(&lab.tx.netns, "ethtool -K tx0 tso off");
    sh_in(&dut_ns, "ethtool -K dut1 tso off && ethtool -K dut0 gro on");
    sh_in(&lab.rx.netns, "ethtool -K rx0 gro on");
    let before = [
        rx_queue_packets(&dut_ns, "dut0"),
        rx_queue_packets(&lab.rx.netns, "rx0"),
    ];
    const PER_CPU: u64 = 20;
    let socket = PacketSocket::open(&lab.tx);
    let frame = udp_frame(&lab.tx, &lab.rx, false, 40_010, b"strobe-lab queue 0");
    for &cpu in &cpus {
        pin_to(&[cpu]);
        for _ in 0..PER_CPU {
            socket.send(&frame);
        }
    }
    pin_to(&cpus);
    let sent = PER_CPU * cpus.len() as u64;
    for (i, (netns, iface)) in [(dut_ns.as_str(), "dut0"), (lab.rx.netns.as_str(), "rx0")]
        .into_iter()
        .enumerate()
    {
        let deadline = Instant::now() + Duration::from_secs(5);
        let gained = loop {
            let now = rx_queue_packets(netns, iface);
            let gained: Vec<u64> = now.iter().zip(&before[i]).map(|(n, b)| n - b).collect();
            if gained.iter().sum::<u64>() >= sent || Instant::now() >= deadline {
                break gained;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(gained.len(), queues, "{iface}: {gained:?}");
        assert!(gained[0] >= sent, "{iface}: {gained:?}, {sent} sent");
        assert!(
            gained[1..].iter().all(|&n| n == 0),
            "{iface}: frames on queues other than 0: {gained:?}"
        );
    }
}

/// A lab whose veths have one queue each, as strobe built them before, is still the lab:
/// `status` knows it and `up` returns it untouched.
#[test]
fn single_queue_veths_of_an_older_lab_still_make_the_lab() {
    let guard = LabGuard::new("o");
    let lab = up(&guard.config(Dut::Cable)).unwrap();
    for (netns, iface) in [(&lab.tx.netns, "tx0"), (&lab.rx.netns, "rx0")] {
        sh_in(netns, &format!("ethtool -L {iface} rx 1 tx 1"));
        let listed = sh_in(netns, &format!("ls /sys/class/net/{iface}/queues"));
        assert_eq!(listed, "rx-0\ntx-0\n", "{iface}");
    }
    assert_eq!(status(&guard.prefix).unwrap(), Some(lab.clone()));
    let inode = ns_inode(&lab.tx.netns);
    assert_eq!(up(&guard.config(Dut::Cable)).unwrap(), lab);
    assert_eq!(ns_inode(&lab.tx.netns), inode, "kept, not rebuilt");
    frame_crosses(&lab, &lab.tx, &lab.rx, false);
}
