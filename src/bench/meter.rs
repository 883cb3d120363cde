//! What every section reads off the process: CPU time, peak memory, medians, and which strategies count as guards.

use std::time::Duration;

use crate::strategy::StrategyKind;

/// The median of `samples`, in ms, as [`crate::race::percentile`] takes it.
pub(crate) fn median_ms(samples: &mut [Duration]) -> f64 {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    crate::race::percentile(&mut ms, 0.5)
}

/// CPU time (user and system) used so far by this process (`Who::Me`) or
/// by its children that have been waited for (`Who::Children`), in µs.
pub fn cpu_us(who: Who) -> f64 {
    let target = match who {
        Who::Me => libc::RUSAGE_SELF,
        Who::Children => libc::RUSAGE_CHILDREN,
    };
    // SAFETY: an all-zero rusage is valid for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(target, &mut usage) } != 0 {
        return 0.0;
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// Whose CPU time [`cpu_us`] reads.
#[derive(Debug, Clone, Copy)]
pub enum Who {
    Me,
    Children,
}

/// The process's peak resident set size so far, in MB.
pub fn peak_rss_mb() -> f64 {
    // SAFETY: an all-zero rusage is valid for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    // Linux reports kilobytes.
    usage.ru_maxrss as f64 / 1024.0
}

/// The strategies whose cost per request is measured.
pub const GUARDS: [StrategyKind; 3] = [
    StrategyKind::InsertUnique,
    StrategyKind::ClaimWorkComplete,
    StrategyKind::Guard,
];
