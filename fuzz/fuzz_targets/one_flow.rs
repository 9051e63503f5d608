//! The one-flow command-line options (`strobe gen --udp … --size … --rate … --vary …`):
//! every value is user input and gets a message naming the flag, never a panic.
//!
//! Input: NUL-separated strings for --udp/--tcp/--icmp (picked by the first byte),
//! --src-mac, --dst-mac, --size, --rate, --pattern, --duration and any number of --vary.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strobe_model::quick::{build, QuickArgs};
use strobe_model::NoFiles;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mut parts = text.split('\0').map(str::to_string);
    let mut next = || parts.next();
    let stack = next();
    let mut args = QuickArgs {
        port: "null".to_string(),
        ..QuickArgs::default()
    };
    match selector % 3 {
        0 => args.udp = stack,
        1 => args.tcp = stack,
        _ => args.icmp = stack,
    }
    args.src_mac = next().filter(|s| !s.is_empty());
    args.dst_mac = next().filter(|s| !s.is_empty());
    if let Some(v) = next() {
        args.size = v;
    }
    if let Some(v) = next() {
        args.rate = v;
    }
    if let Some(v) = next() {
        args.pattern = v;
    }
    args.duration = next().filter(|s| !s.is_empty());
    if args.duration.is_none() {
        args.count = Some(u64::from(selector));
    }
    args.vlan = (0..(selector >> 6))
        .map(|i| u16::from(selector) * 13 + u16::from(i))
        .collect();
    args.vary = std::iter::from_fn(next).collect();
    args.no_trailer = selector & 0x10 != 0;
    args.unbounded = selector & 0x20 != 0;
    let _ = build(&args, &NoFiles);
});
