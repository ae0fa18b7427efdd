//! The one jittered exponential backoff every retry loop of the store sleeps through.

use std::time::Duration;

use rand::Rng;

/// How a retry loop spreads its attempts: the pause before round `n` is drawn from
/// `[ceiling / spread, ceiling]` with `ceiling = 10 ms << min(n, max_shift)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// The exponent stops growing here, which caps the ceiling.
    pub max_shift: u32,
    /// The floor of a pause is the ceiling divided by this (the jitter's width).
    pub spread: u64,
}

impl Backoff {
    /// Unprocessed keys or items of a batch call (throttling): 10 ms doubling to 640 ms,
    /// each pause at least half its ceiling.
    pub const THROTTLED: Self = Self {
        max_shift: 6,
        spread: 2,
    };
    /// A transaction cancelled only by concurrent transactions: 10 ms doubling to 1.28 s,
    /// jittered wider so that writers contending with each other spread apart.
    pub const CONTENDED: Self = Self {
        max_shift: 7,
        spread: 4,
    };

    /// The pause before retry round `round` (1 for the first retry).
    pub fn pause(self, round: u32) -> Duration {
        let ceiling = 10u64 << round.min(self.max_shift);
        Duration::from_millis(rand::thread_rng().gen_range(ceiling / self.spread..=ceiling))
    }

    /// Sleeps before retry round `round`.
    pub async fn sleep(self, round: u32) {
        // Drawn before awaiting: the RNG handle is not Send.
        let pause = self.pause(round);
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_stay_inside_their_jittered_ceiling() {
        for round in 1..12 {
            let t = Backoff::THROTTLED.pause(round).as_millis() as u64;
            let ceiling = 10u64 << round.min(6);
            assert!((ceiling / 2..=ceiling).contains(&t), "{round}: {t}");
            let c = Backoff::CONTENDED.pause(round).as_millis() as u64;
            let ceiling = 10u64 << round.min(7);
            assert!((ceiling / 4..=ceiling).contains(&c), "{round}: {c}");
        }
    }
}
