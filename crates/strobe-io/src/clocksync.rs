//! Synchronising two clocks by reading them in turn, as MoonGen does for NIC clocks.
//!
//! One sample reads A, then B, then A again: B was read somewhere between the two A reads,
//! so B − (A₁+A₂)/2 estimates B's offset from A with an uncertainty of (A₂−A₁)/2. A few
//! samples are taken back to back and the median offset is kept, which discards reads that
//! a preemption or an interrupt stretched. Repeating that over several rounds spaced in
//! time gives the drift (the slope of offset over A's time, by least squares) and how well
//! a straight line explains the offsets (the residual).
//!
//! Clocks are read through [`ClockReader`], so the arithmetic is tested on simulated clocks,
//! and time between rounds passes through a caller-given `sleep`, so tests run instantly.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::IoError;

/// Samples per round: an odd count, so the median is one actual sample.
pub const SAMPLES_PER_ROUND: usize = 7;

/// What clock names [`open_clock`] accepts, for messages.
pub const CLOCK_FORMS: &str =
    "`realtime`, `monotonic`, `tai`, or a PTP hardware clock path such as `/dev/ptp0`";

/// A clock that can be read in nanoseconds.
pub trait ClockReader {
    /// Human name, e.g. `realtime` or `/dev/ptp0`.
    fn name(&self) -> String;
    /// The clock's current time in ns since its epoch.
    fn now_ns(&mut self) -> Result<i128, IoError>;
}

fn read_clock(id: libc::clockid_t, name: &str) -> Result<i128, IoError> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`, which outlives the call.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return Err(IoError::Other(format!(
            "cannot read clock {name}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec))
}

/// One of the kernel's system clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemClock {
    name: &'static str,
    id: libc::clockid_t,
}

impl SystemClock {
    /// Every system clock strobe offers, with the kernel's name for it.
    pub const ALL: [(&'static str, &'static str); 3] = [
        ("realtime", "CLOCK_REALTIME"),
        ("monotonic", "CLOCK_MONOTONIC"),
        ("tai", "CLOCK_TAI"),
    ];

    /// `realtime`, `monotonic` or `tai` (case-insensitive).
    pub fn by_name(name: &str) -> Option<SystemClock> {
        let (name, id) = match name.to_ascii_lowercase().as_str() {
            "realtime" => ("realtime", libc::CLOCK_REALTIME),
            "monotonic" => ("monotonic", libc::CLOCK_MONOTONIC),
            "tai" => ("tai", libc::CLOCK_TAI),
            _ => return None,
        };
        Some(SystemClock { name, id })
    }

    /// The clock's resolution in ns (`clock_getres`).
    pub fn resolution_ns(&self) -> Result<i128, IoError> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_getres writes one timespec into `ts`, which outlives the call.
        let rc = unsafe { libc::clock_getres(self.id, &mut ts) };
        if rc != 0 {
            return Err(IoError::Other(format!(
                "cannot read the resolution of clock {}: {}",
                self.name,
                std::io::Error::last_os_error()
            )));
        }
        Ok(i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec))
    }
}

impl ClockReader for SystemClock {
    fn name(&self) -> String {
        self.name.to_string()
    }
    fn now_ns(&mut self) -> Result<i128, IoError> {
        read_clock(self.id, self.name)
    }
}

/// A PTP hardware clock (`/dev/ptpN`), read with `clock_gettime` on its dynamic clock id.
#[derive(Debug)]
pub struct PhcClock {
    path: PathBuf,
    // Keeps the device open: the clock id is only valid while the descriptor is.
    file: File,
}

impl PhcClock {
    /// Opens the device read-only (reading the time needs no write access) and reads it
    /// once, so a path that is not a PHC fails here rather than in the middle of a sync.
    pub fn open(path: impl AsRef<Path>) -> Result<PhcClock, IoError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| {
            IoError::Other(format!(
                "cannot open PTP hardware clock {}: {e}; PTP hardware clocks here: {} \
                 (`strobe clocks` lists them)",
                path.display(),
                list_or_none(&phc_devices())
            ))
        })?;
        let mut clock = PhcClock { path, file };
        clock.now_ns().map_err(|e| {
            IoError::Other(format!(
                "{} is not a readable PTP hardware clock ({e})",
                clock.path.display()
            ))
        })?;
        Ok(clock)
    }

    /// The kernel's `FD_TO_CLOCKID`: a dynamic POSIX clock is named by its descriptor.
    fn clock_id(&self) -> libc::clockid_t {
        ((!self.file.as_raw_fd()) << 3) | 3
    }
}

impl ClockReader for PhcClock {
    fn name(&self) -> String {
        self.path.display().to_string()
    }
    fn now_ns(&mut self) -> Result<i128, IoError> {
        read_clock(self.clock_id(), &self.path.display().to_string())
    }
}

/// Opens a clock by name: `realtime`, `monotonic`, `tai`, or a `/dev/ptpN` path.
pub fn open_clock(spec: &str) -> Result<Box<dyn ClockReader>, IoError> {
    if let Some(clock) = SystemClock::by_name(spec) {
        return Ok(Box::new(clock));
    }
    if spec.starts_with('/') {
        return Ok(Box::new(PhcClock::open(spec)?));
    }
    Err(IoError::Other(format!(
        "unknown clock `{spec}`: accepted are {CLOCK_FORMS}"
    )))
}

fn list_or_none(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        "none".to_string()
    } else {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The PTP hardware clock devices of this machine (`/dev/ptp0`, `/dev/ptp1`, …), in order.
pub fn phc_devices() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/dev") else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = dir
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let index = name.to_str()?.strip_prefix("ptp")?.parse::<u32>().ok()?;
            Some((index, entry.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, path)| path).collect()
}

/// The driver's name for a PHC (`/sys/class/ptp/ptpN/clock_name`), when it gives one.
pub fn phc_name(device: &Path) -> Option<String> {
    let node = device.file_name()?.to_str()?;
    let name = std::fs::read_to_string(format!("/sys/class/ptp/{node}/clock_name")).ok()?;
    Some(name.trim().to_string())
}

/// The kernel's TAI − UTC offset in seconds (CLOCK_TAI = CLOCK_REALTIME + this); 0 until
/// a time daemon sets it.
pub fn kernel_tai_offset_s() -> Result<i32, IoError> {
    // SAFETY: timex is plain old data; all zeroes (modes = 0) asks adjtimex only to read.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: adjtimex with modes = 0 fills `tx` and changes nothing.
    let rc = unsafe { libc::adjtimex(&mut tx) };
    if rc < 0 {
        return Err(IoError::Other(format!(
            "cannot read the kernel's TAI offset (adjtimex): {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(tx.tai)
}

/// One offset estimate of clock B against clock A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncSample {
    /// B − A in ns.
    pub offset_ns: i128,
    /// Half the time between the two A reads around the B read.
    pub uncertainty_ns: u64,
    /// A's time in the middle of the sample.
    pub at_ns: i128,
}

/// `reads` A-B-A samples back to back; returns the one with the median offset.
pub fn sync_once(
    a: &mut dyn ClockReader,
    b: &mut dyn ClockReader,
    reads: usize,
) -> Result<SyncSample, IoError> {
    if reads == 0 {
        return Err(IoError::Other(
            "a clock sync needs at least one read".to_string(),
        ));
    }
    let mut samples = Vec::with_capacity(reads);
    for _ in 0..reads {
        let a1 = a.now_ns()?;
        let b_ns = b.now_ns()?;
        let a2 = a.now_ns()?;
        if a2 < a1 {
            return Err(IoError::Other(format!(
                "clock {} went backwards by {} ns between two reads; it was stepped during the \
                 sync — run it again",
                a.name(),
                a1 - a2
            )));
        }
        let mid = a1 + (a2 - a1) / 2;
        samples.push(SyncSample {
            offset_ns: b_ns - mid,
            uncertainty_ns: u64::try_from((a2 - a1) / 2).unwrap_or(u64::MAX),
            at_ns: mid,
        });
    }
    samples.sort_by_key(|s| s.offset_ns);
    Ok(samples[samples.len() / 2])
}

/// The relation of clock B to clock A over several rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockSync {
    /// B − A in ns at the last round, from the fitted line.
    pub offset_ns: i128,
    /// Root-mean-square distance of the rounds' offsets from the fitted line, ns.
    pub residual_ns: f64,
    /// How fast B gains on A, in parts per billion (ns per s); 0 with one round.
    pub drift_ppb: f64,
    /// Median of the rounds' read uncertainties, ns.
    pub uncertainty_ns: u64,
    pub rounds: usize,
    /// A's time at the last round: where `offset_ns` holds and drift is counted from.
    pub at_ns: i128,
}

impl ClockSync {
    /// B − A, by the fitted line, when clock A reads `a_ns`.
    pub fn offset_at(&self, a_ns: i128) -> i128 {
        self.offset_ns + (self.drift_ppb * (a_ns - self.at_ns) as f64 / 1e9).round() as i128
    }

    /// The time on clock A of an instant clock B read as `b_ns`, by the fitted line
    /// (B − A = offset + drift × (A − at)): how a NIC's hardware timestamp becomes a
    /// CLOCK_REALTIME one, for example.
    pub fn b_to_a(&self, b_ns: i128) -> i128 {
        let slope = self.drift_ppb / 1e9;
        // b = a + offset + slope (a - at)  =>  a - at = (b - at - offset) / (1 + slope)
        let since = (b_ns - self.at_ns - self.offset_ns) as f64 / (1.0 + slope);
        self.at_ns + since.round() as i128
    }
}

/// Syncs `rounds` times, `interval` apart (time passes through `sleep`), and fits a line to
/// the offsets over A's time.
pub fn measure(
    a: &mut dyn ClockReader,
    b: &mut dyn ClockReader,
    rounds: usize,
    interval: Duration,
    mut sleep: impl FnMut(Duration),
) -> Result<ClockSync, IoError> {
    if rounds == 0 {
        return Err(IoError::Other(
            "a clock sync needs at least one round".to_string(),
        ));
    }
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        if round > 0 {
            sleep(interval);
        }
        samples.push(sync_once(a, b, SAMPLES_PER_ROUND)?);
    }
    let mut uncertainties: Vec<u64> = samples.iter().map(|s| s.uncertainty_ns).collect();
    uncertainties.sort_unstable();
    let fit = fit_line(&samples);
    Ok(ClockSync {
        offset_ns: fit.offset_at_last,
        residual_ns: fit.residual_ns,
        drift_ppb: fit.slope * 1e9,
        uncertainty_ns: uncertainties[uncertainties.len() / 2],
        rounds,
        at_ns: samples[samples.len() - 1].at_ns,
    })
}

struct LineFit {
    slope: f64,
    offset_at_last: i128,
    residual_ns: f64,
}

/// Least-squares line through (at_ns, offset_ns). Works on values relative to the first
/// sample, so f64 keeps ns precision although both clocks may read ~10¹⁸ ns.
fn fit_line(samples: &[SyncSample]) -> LineFit {
    let first = samples[0];
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            (
                (s.at_ns - first.at_ns) as f64,
                (s.offset_ns - first.offset_ns) as f64,
            )
        })
        .collect();
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    // One round, or rounds at the same instant: no time base for a slope.
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let line = |x: f64| mean_y + slope * (x - mean_x);
    let residual_ns = (points
        .iter()
        .map(|p| (p.1 - line(p.0)).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let last_x = points[points.len() - 1].0;
    LineFit {
        slope,
        offset_at_last: first.offset_ns + line(last_x).round() as i128,
        residual_ns,
    }
}

#[cfg(test)]
mod conversion_tests {
    use super::*;

    #[test]
    fn b_to_a_inverts_the_fitted_line() {
        let sync = ClockSync {
            offset_ns: 37_000_000_123,
            residual_ns: 0.0,
            drift_ppb: 25_000.0,
            uncertainty_ns: 0,
            rounds: 3,
            at_ns: 1_800_000_000_000_000_000,
        };
        for since in [-5_000_000_000i128, 0, 1, 2_000_000_000, 3_600_000_000_000] {
            let a = sync.at_ns + since;
            let b = a + sync.offset_ns + (since as f64 * 25e-6).round() as i128;
            assert!((sync.b_to_a(b) - a).abs() <= 1, "since {since}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_xoshiro::rand_core::{RngCore, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// True time and the randomness of a simulated machine, shared by its clocks.
    struct World {
        true_ns: i128,
        rng: Xoshiro256PlusPlus,
        /// Cost of one clock read, ns, plus up to `read_jitter_ns` more.
        read_ns: i128,
        read_jitter_ns: u64,
        /// Every `preempt_every`-th read is delayed by `preempt_ns` (0 = never): a fixed
        /// pattern, so how many samples of a round it spoils is known, not left to chance.
        preempt_every: u64,
        reads: u64,
        preempt_ns: i128,
    }

    impl World {
        fn new(seed: u64) -> Rc<RefCell<World>> {
            Rc::new(RefCell::new(World {
                true_ns: 1_700_000_000_000_000_000,
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
                read_ns: 40,
                read_jitter_ns: 0,
                preempt_every: 0,
                reads: 0,
                preempt_ns: 0,
            }))
        }

        /// Time passes for one read; returns true time at the moment of reading.
        fn read(&mut self) -> i128 {
            let mut cost = self.read_ns;
            if self.read_jitter_ns > 0 {
                cost += i128::from(self.rng.next_u64() % self.read_jitter_ns);
            }
            self.reads += 1;
            if self.preempt_every > 0 && self.reads % self.preempt_every == 0 {
                cost += self.preempt_ns;
            }
            self.true_ns += cost;
            self.true_ns
        }
    }

    /// A clock that reads true time × (1 + drift) + offset, plus ±noise.
    struct SimClock {
        world: Rc<RefCell<World>>,
        start_ns: i128,
        offset_ns: i128,
        drift_ppb: i128,
        noise_ns: u64,
    }

    impl SimClock {
        fn new(world: &Rc<RefCell<World>>, offset_ns: i128, drift_ppb: i128) -> SimClock {
            let start_ns = world.borrow().true_ns;
            SimClock {
                world: Rc::clone(world),
                start_ns,
                offset_ns,
                drift_ppb,
                noise_ns: 0,
            }
        }

        /// What this clock's offset from true time is at true time `t`.
        fn offset_at(&self, t: i128) -> i128 {
            self.offset_ns + (t - self.start_ns) * self.drift_ppb / 1_000_000_000
        }
    }

    impl ClockReader for SimClock {
        fn name(&self) -> String {
            "simulated".to_string()
        }
        fn now_ns(&mut self) -> Result<i128, IoError> {
            let mut world = self.world.borrow_mut();
            let t = world.read();
            let noise = if self.noise_ns > 0 {
                (world.rng.next_u64() % (2 * self.noise_ns + 1)) as i128 - self.noise_ns as i128
            } else {
                0
            };
            drop(world);
            Ok(t + self.offset_at(t) + noise)
        }
    }

    #[test]
    fn one_sample_is_b_minus_the_midpoint_of_the_a_reads() {
        let world = World::new(1);
        let mut a = SimClock::new(&world, 0, 0);
        let mut b = SimClock::new(&world, 12_345, 0);
        let s = sync_once(&mut a, &mut b, 1).unwrap();
        // Reads 40 ns apart: A at t+40, B at t+80, A at t+120 → B − midpoint = offset.
        assert_eq!(s.offset_ns, 12_345);
        assert_eq!(s.uncertainty_ns, 40);
        assert_eq!(s.at_ns, 1_700_000_000_000_000_080);
    }

    #[test]
    fn the_median_discards_preempted_reads() {
        let world = World::new(2);
        {
            let mut w = world.borrow_mut();
            // At most 3 of a round's 21 reads, so at most 3 of its 7 samples are spoiled.
            w.preempt_every = 7;
            w.preempt_ns = 50_000;
        }
        let mut a = SimClock::new(&world, 0, 0);
        let mut b = SimClock::new(&world, -5_000_000, 0);
        for _ in 0..100 {
            let s = sync_once(&mut a, &mut b, SAMPLES_PER_ROUND).unwrap();
            // A stall before the B or second A read moves a sample by half the stall; the
            // median of 7 with at most 3 spoiled is an unspoiled one: exact.
            assert_eq!(s.offset_ns, -5_000_000, "{s:?}");
            assert_eq!(s.uncertainty_ns, 40, "{s:?}");
        }
    }

    #[test]
    fn offset_and_drift_are_recovered_from_noisy_clocks() {
        let world = World::new(3);
        {
            let mut w = world.borrow_mut();
            w.read_jitter_ns = 200;
            w.preempt_every = 50;
            w.preempt_ns = 30_000;
        }
        let mut a = SimClock::new(&world, 0, 0);
        let mut b = SimClock::new(&world, 37_000_000_123, 25_000);
        b.noise_ns = 50;
        let interval = Duration::from_millis(100);
        let sync = measure(&mut a, &mut b, 50, interval, |d| {
            world.borrow_mut().true_ns += d.as_nanos() as i128;
        })
        .unwrap();
        let now = world.borrow().true_ns;
        let expected = b.offset_at(now);
        // 25 ppm over 4.9 s moved the offset by ~122 µs; the fit must follow it.
        assert!(expected - 37_000_000_123 > 120_000, "{expected}");
        assert!(
            (sync.offset_ns - expected).abs() < 300,
            "{sync:?} expected {expected}"
        );
        assert!((sync.drift_ppb - 25_000.0).abs() < 50.0, "{sync:?}");
        assert!(
            sync.residual_ns > 0.0 && sync.residual_ns < 300.0,
            "{sync:?}"
        );
        assert_eq!(sync.rounds, 50);
        assert!(
            sync.uncertainty_ns >= 40 && sync.uncertainty_ns < 300,
            "{sync:?}"
        );
    }

    #[test]
    fn a_single_round_has_no_drift_and_no_residual() {
        let world = World::new(4);
        let mut a = SimClock::new(&world, 0, 0);
        let mut b = SimClock::new(&world, 1_000, 0);
        let sync = measure(&mut a, &mut b, 1, Duration::from_secs(1), |_| {
            panic!("one round needs no sleep")
        })
        .unwrap();
        assert_eq!(sync.offset_ns, 1_000);
        assert_eq!(sync.drift_ppb, 0.0);
        assert_eq!(sync.residual_ns, 0.0);
    }

    #[test]
    fn zero_rounds_or_reads_are_refused() {
        let world = World::new(5);
        let mut a = SimClock::new(&world, 0, 0);
        let mut b = SimClock::new(&world, 0, 0);
        assert!(measure(&mut a, &mut b, 0, Duration::ZERO, |_| {}).is_err());
        assert!(sync_once(&mut a, &mut b, 0).is_err());
    }

    #[test]
    fn realtime_to_tai_offset_is_the_kernels_tai_offset() {
        let tai_s = kernel_tai_offset_s().unwrap();
        assert!(tai_s == 0 || tai_s == 37, "unexpected TAI offset {tai_s} s");
        let mut realtime = open_clock("realtime").unwrap();
        let mut tai = open_clock("tai").unwrap();
        let sync = measure(
            realtime.as_mut(),
            tai.as_mut(),
            5,
            Duration::from_millis(1),
            std::thread::sleep,
        )
        .unwrap();
        let expected = i128::from(tai_s) * 1_000_000_000;
        // Both clocks come from one timekeeper: only the read asymmetry separates them.
        assert!(
            (sync.offset_ns - expected).abs() < 5_000,
            "{sync:?} vs {expected}"
        );
    }

    #[test]
    fn system_clocks_by_name() {
        for (name, _) in SystemClock::ALL {
            let mut clock = SystemClock::by_name(name).unwrap();
            assert_eq!(clock.name(), name);
            assert!(clock.now_ns().unwrap() > 0);
            assert!(clock.resolution_ns().unwrap() >= 1);
        }
        assert!(SystemClock::by_name("REALTIME").is_some());
        let err = open_clock("sundial").err().unwrap().to_string();
        assert!(
            err.contains("`sundial`") && err.contains("realtime") && err.contains("/dev/ptp0"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_phc_is_a_clear_error() {
        let err = open_clock("/dev/ptp99").err().unwrap().to_string();
        assert!(
            err.contains("cannot open PTP hardware clock /dev/ptp99")
                && err.contains("strobe clocks"),
            "{err}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_phc_is_refused_on_open() {
        let err = PhcClock::open("/dev/null").unwrap_err().to_string();
        assert!(
            err.contains("/dev/null is not a readable PTP hardware clock"),
            "{err}"
        );
    }

    #[test]
    fn phc_devices_are_ptp_nodes_in_index_order() {
        let devices = phc_devices();
        for d in &devices {
            assert!(d.to_string_lossy().starts_with("/dev/ptp"), "{d:?}");
        }
        let indexes: Vec<u32> = devices
            .iter()
            .map(|d| d.to_string_lossy()["/dev/ptp".len()..].parse().unwrap())
            .collect();
        assert!(indexes.windows(2).all(|w| w[0] < w[1]), "{indexes:?}");
    }
}
