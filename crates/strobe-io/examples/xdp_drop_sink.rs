//! Holds the barest XDP program (`return XDP_DROP;`, strobe-io's `XdpDropSink`) on an
//! interface until its standard input closes, then prints how many frames it dropped (the
//! driver's count): the fastest receiver there is, so that `bench/run rxcount` can show what
//! the sender reaches into an XDP program that does nothing, beside the counting program.
//! Needs root.
//!
//! Usage: `xdp_drop_sink IFACE [NETNS]`; prints `attached` once the program is on.

use std::io::{Read, Write};

use strobe_io::xdplive::XdpDropSink;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(iface) = args.first() else {
        eprintln!("usage: xdp_drop_sink IFACE [NETNS]");
        std::process::exit(2);
    };
    let sink = match XdpDropSink::attach(iface, args.get(1).map(String::as_str)) {
        Ok(sink) => sink,
        Err(e) => {
            eprintln!("xdp_drop_sink: {e}");
            std::process::exit(1);
        }
    };
    println!("attached");
    let _ = std::io::stdout().flush();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    match sink.dropped() {
        Ok(n) => println!("dropped {n}"),
        Err(e) => {
            eprintln!("xdp_drop_sink: {e}");
            std::process::exit(1);
        }
    }
}
