//! What the in-kernel counting program (`xdp-count:`) costs a frame, beside the barest XDP
//! program (`return XDP_DROP;`): each timed by the kernel over REPEAT runs of
//! `BPF_PROG_RUN` on one 64-byte frame of this run's flow, on this CPU, ROUNDS times
//! alternating. The difference is the counting's own cost per frame (the same frame again:
//! after the first, the duplicate path, which reads the window as the in-order path writes
//! it). Prints one JSON line per round. `bench/run rxcount` runs it. Needs root.
//!
//! Usage: `xdp_count_cost [REPEAT [ROUNDS]]` (default 10 000 000 and 5)

use strobe_io::xdp_count::{time_bare_drop, CountSetup, ProgramClock, XdpCounter};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    let repeat = args
        .first()
        .copied()
        .unwrap_or(10_000_000)
        .clamp(1, u32::MAX.into()) as u32;
    let rounds = args.get(1).copied().unwrap_or(5).max(1);
    let run = || -> Result<(), String> {
        let counter = XdpCounter::new(CountSetup {
            run_tag: 0x42,
            flows: 1,
            pass_counted: false,
            clock: ProgramClock::Kernel,
        })
        .map_err(|e| e.to_string())?;
        // A 60-byte frame (64 on the wire) ending in flow 0's trailer, stamped now.
        let mut frame = vec![0u8; 60];
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_nanos() as u64;
        frame[44] = b'S';
        frame[45] = 0x42;
        frame[52..].copy_from_slice(&now.to_be_bytes());
        for round in 1..=rounds {
            let bare = time_bare_drop(&frame, repeat).map_err(|e| e.to_string())?;
            let counting = counter
                .time_frame(&frame, repeat)
                .map_err(|e| e.to_string())?;
            println!(
                "{{\"round\": {round}, \"repeat\": {repeat}, \"bare_drop_ns\": {bare}, \"counting_ns\": {counting}}}"
            );
        }
        let counted = &counter.snapshot().flows[0];
        if counted.frames != u64::from(repeat) * rounds {
            return Err(format!(
                "the program counted {} frames of {}",
                counted.frames,
                u64::from(repeat) * rounds
            ));
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("xdp_count_cost: {e}");
        std::process::exit(1);
    }
}
