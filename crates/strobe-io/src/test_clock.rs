//! The test-only clock offset switch: every timestamp an agent makes goes through here, so a
//! test can make one agent's clock look shifted by a known amount.
//!
//! What it is for: the agents of a multi-host run stamp frames with CLOCK_REALTIME, and the
//! controller may subtract a transmit stamp taken on host A from a receive stamp taken on
//! host B only when the two clocks agree. The controller checks that itself
//! ([`crate::clockcheck`]) and withholds one-way latency when the check fails. Agents that
//! run in network namespaces on one machine share that machine's one clock, so they always
//! agree; to test the check (and the withholding), an agent is started with
//! `STROBE_TEST_ONLY_CLOCK_OFFSET_NS=N` and then stamps everything N ns later than the clock
//! says (earlier for negative N), as if its host's clock were off by N.
//!
//! For that to be true of the whole agent, every timestamp an agent makes must come from
//! [`realtime_ns`] (a clock it reads itself) or pass through [`shift`] (a stamp read
//! elsewhere, such as a kernel receive timestamp). The clock check does so; the engine's
//! stamps are wired through it separately.
//!
//! **The switch exists in debug builds only.** In release builds (without
//! `debug_assertions`) [`offset_ns`] is the constant 0, the environment variable is never
//! read, and [`realtime_ns`] and [`shift`] are the plain clock: a production agent cannot be
//! told to lie about its time.

/// The environment variable that sets the offset in debug builds: a signed integer of ns.
pub const OFFSET_VAR: &str = "STROBE_TEST_ONLY_CLOCK_OFFSET_NS";

/// The offset in ns added to every timestamp this process makes: in debug builds, the value
/// of `STROBE_TEST_ONLY_CLOCK_OFFSET_NS`, read once (unset → 0; unparsable → 0, said once on
/// stderr); in release builds always 0 (the variable is not read).
#[cfg(debug_assertions)]
pub fn offset_ns() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| match std::env::var(OFFSET_VAR) {
        Err(std::env::VarError::NotPresent) => 0,
        Ok(text) => parse_offset(&text).unwrap_or_else(|| {
            eprintln!("warning: {OFFSET_VAR}={text:?} is not a whole number of ns; using 0");
            0
        }),
        Err(std::env::VarError::NotUnicode(text)) => {
            eprintln!("warning: {OFFSET_VAR}={text:?} is not a whole number of ns; using 0");
            0
        }
    })
}

/// The offset in ns added to every timestamp this process makes: always 0 in release
/// builds, where the test-only switch does not exist.
#[cfg(not(debug_assertions))]
pub fn offset_ns() -> i64 {
    0
}

/// The switch's value as written: a signed decimal integer, blanks around it allowed.
#[cfg_attr(not(debug_assertions), allow(dead_code))]
fn parse_offset(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

/// CLOCK_REALTIME now, in ns since the Unix epoch, plus [`offset_ns`] (saturating at 0 and
/// `u64::MAX`): the clock every agent timestamp is to be read from.
pub fn realtime_ns() -> u64 {
    shift(raw_realtime_ns())
}

/// `ns`, a CLOCK_REALTIME timestamp read elsewhere (a kernel receive timestamp, say), with
/// [`offset_ns`] applied (saturating).
pub fn shift(ns: u64) -> u64 {
    ns.saturating_add_signed(offset_ns())
}

/// CLOCK_REALTIME in ns, without the offset.
fn raw_realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`, which outlives the call;
    // CLOCK_REALTIME always exists, so it cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_parse_as_signed_ns_and_nothing_else() {
        assert_eq!(parse_offset("37000"), Some(37_000));
        assert_eq!(parse_offset(" -25000\n"), Some(-25_000));
        assert_eq!(parse_offset("+5"), Some(5));
        for bad in ["", "1.5", "37us", "0x10", "99999999999999999999"] {
            assert_eq!(parse_offset(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn shifting_saturates_and_the_clock_is_realtime() {
        let offset = offset_ns();
        assert_eq!(shift(1_000_000), 1_000_000u64.saturating_add_signed(offset));
        if offset >= 0 {
            assert_eq!(shift(u64::MAX), u64::MAX);
        } else {
            assert_eq!(shift(0), 0);
        }
        let system = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128;
        let ours = i128::from(realtime_ns()) - i128::from(offset);
        assert!((ours - system).abs() < 1_000_000_000, "{ours} vs {system}");
    }
}
