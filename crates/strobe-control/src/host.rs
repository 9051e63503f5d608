//! What this host offers, read for the front ends' `ports`, `clocks` and `analyze`: its
//! interfaces and their timestamping, its clocks and how they agree, and the frames of a
//! capture file (strobe-io does the reading; nothing here runs traffic).

pub use strobe_io::clockcheck::{measure as measure_clock_offset, ClockEcho, OffsetEstimate};
pub use strobe_io::clocksync::{
    kernel_tai_offset_s, measure as measure_clocks, open_clock, phc_devices, phc_name, ClockReader,
    SystemClock, SAMPLES_PER_ROUND,
};
pub use strobe_io::netns::NETNS_DIR;
pub use strobe_io::timesync::{
    probe as probe_clock_sync, ClockSync, ProbeOptions as ClockProbe, SyncSource,
};
pub use strobe_io::tsinfo::{interfaces, query_ts_info, TsInfo};
pub use strobe_io::xdp_features::{rx_metadata_timestamps, xsk_tx_timestamps};
pub use strobe_io::IoError;

/// A capture file's frames as the timing analysis reads them: arrival times and lengths,
/// with the file's timestamp resolution; strobe's own floor probe frames are counted apart.
pub struct CaptureTimes {
    pub timestamps_ns: Vec<u64>,
    pub frame_lens: Vec<u32>,
    pub resolution_ns: u64,
    /// "pcap" or "pcapng".
    pub format: &'static str,
    /// Floor probe frames left out (`strobe ports --floor`; earlier strobe builds sent them
    /// before every paced run): they are not a run's.
    pub probes: u64,
}

/// Reads the pcap or pcapng file `path` into [`CaptureTimes`].
pub fn read_capture_times(path: &str) -> Result<CaptureTimes, IoError> {
    let mut times = CaptureTimes {
        timestamps_ns: Vec::new(),
        frame_lens: Vec::new(),
        resolution_ns: 0,
        format: "",
        probes: 0,
    };
    let info = strobe_io::read_capture(path, false, |f| {
        if strobe_wire::trailer::is_probe(&f.data) {
            times.probes += 1;
            return;
        }
        times.timestamps_ns.push(f.ts_ns);
        times.frame_lens.push(f.orig_len);
    })?;
    times.resolution_ns = info.resolution_ns;
    times.format = info.format;
    Ok(times)
}

/// The kernel's boot id: every network namespace of one machine shares it, and with it one
/// CLOCK_REALTIME (agents that report the same id stamp with the same clock). None where the
/// kernel does not say.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// CLOCK_REALTIME now, as strobe stamps frames with it.
pub fn stamping_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
