//! The ceiling of `xdp-live`'s path: the first frame of a pcap file (strobe writes it with
//! `--port pcap:FILE --count 1`), sent unchanged over and over by a program that only
//! redirects each page, until SIGINT or SIGTERM — the measure of the C probe the issue's
//! targets are relative to. `bench/run xdplive` runs it beside strobe's generator, on the
//! same CPU, and counts at the receiver.
//!
//! Usage: `xdp_ceiling [NETNS/]IFACE FRAME.pcap`

use std::sync::atomic::{AtomicBool, Ordering};

use strobe_io::xdplive::XdpLiveTx;
use strobe_io::Backend;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// The first packet of a classic pcap file (either byte order).
fn first_frame(pcap: &[u8]) -> Result<Vec<u8>, String> {
    let magic = pcap
        .get(..4)
        .ok_or("not a pcap file: shorter than its header")?;
    let read = |at: usize| -> Result<u32, String> {
        let b: [u8; 4] = pcap
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or("a pcap file cut short")?;
        Ok(match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => u32::from_le_bytes(b),
            _ => u32::from_be_bytes(b),
        })
    };
    if !matches!(read(0)?, 0xa1b2_c3d4 | 0xa1b2_3c4d) {
        return Err("not a classic pcap file (pcapng is not read here)".into());
    }
    let len = read(24 + 8)? as usize;
    pcap.get(40..40 + len)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| "a pcap file without a whole first packet".into())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, port, pcap] = &args[..] else {
        eprintln!("usage: xdp_ceiling [NETNS/]IFACE FRAME.pcap");
        std::process::exit(2);
    };
    let (netns, iface) = match port.split_once('/') {
        Some((ns, iface)) => (Some(ns), iface),
        None => (None, port.as_str()),
    };
    let run = || -> Result<(), String> {
        let frame = first_frame(&std::fs::read(pcap).map_err(|e| format!("{pcap}: {e}"))?)?;
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
        }
        let mut tx = XdpLiveTx::open(iface, netns).map_err(|e| e.to_string())?;
        tx.set_paced(false).map_err(|e| e.to_string())?;
        tx.send_unchanged(&frame, &STOP).map_err(|e| e.to_string())
    };
    if let Err(e) = run() {
        eprintln!("xdp_ceiling: {e}");
        std::process::exit(1);
    }
}
