//! The clock of the per-call times (post and poll overhead, latency
//! samples): the CPU's time-stamp counter, as perftest's `get_cycles`,
//! turned into nanoseconds against the monotonic clock over the run.
//!
//! Where the kernel's clock source is not the TSC (an emulated guest's
//! HPET, say), every read of the monotonic clock is a system call, and a
//! bandwidth loop reads it around each post and each poll: the figures
//! would then time the clock as much as the provider. The counter is read
//! without entering the kernel.

use std::time::Instant;

/// A reading of the counter.
#[derive(Clone, Copy)]
pub struct Tick(u64);

impl Tick {
    #[inline(always)]
    pub fn now() -> Tick {
        Tick(counter())
    }

    /// Ticks since this reading.
    #[inline(always)]
    pub fn elapsed(self) -> u64 {
        counter().wrapping_sub(self.0)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn counter() -> u64 {
    // SAFETY: every x86-64 CPU has RDTSC, which reads no memory.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// Elsewhere, the monotonic clock's nanoseconds since the first reading.
#[cfg(not(target_arch = "x86_64"))]
fn counter() -> u64 {
    static FIRST: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    FIRST.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The counter's rate, measured against the monotonic clock from
/// [`Rate::start`] to the conversion: two clock reads a run.
pub struct Rate {
    clock: Instant,
    tick: Tick,
}

impl Rate {
    pub fn start() -> Rate {
        Rate { clock: Instant::now(), tick: Tick::now() }
    }

    /// Nanoseconds a tick, so far.
    pub fn ns_per_tick(&self) -> f64 {
        let (ns, ticks) = (self.clock.elapsed().as_nanos() as f64, self.tick.elapsed());
        if ticks == 0 {
            1.0
        } else {
            ns / ticks as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading pair preempted between its two reads is off by the
    /// preemption: one try in three within 10 % is the conversion's
    /// proof, on a host that may be busy.
    #[test]
    fn ticks_turn_into_the_nanoseconds_the_monotonic_clock_saw() {
        let mut tries = Vec::new();
        for _ in 0..3 {
            let rate = Rate::start();
            let (t, clock) = (Tick::now(), Instant::now());
            std::thread::sleep(std::time::Duration::from_millis(100));
            let (ticks, ns) = (t.elapsed(), clock.elapsed().as_nanos() as f64);
            let measured = ticks as f64 * rate.ns_per_tick();
            if (measured - ns).abs() < ns * 0.1 {
                return;
            }
            tries.push((measured, ns));
        }
        panic!("(ns by the counter, ns by the clock), each try off by 10 % or more: {tries:?}");
    }
}
