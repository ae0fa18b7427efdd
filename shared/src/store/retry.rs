//! The one jittered backoff every retry loop of the store sleeps through.

use std::ops::RangeInclusive;
use std::time::Duration;

use rand::Rng;

/// Why a loop retries, which sets how long it waits before each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backoff {
    /// Unprocessed keys or items of a batch call (throttling): 10 ms doubling to 640 ms, each
    /// pause at least half its ceiling.
    Throttled,
    /// A transaction cancelled only by concurrent transactions: 10 ms doubling to 1.28 s,
    /// jittered wider so that writers contending with each other spread apart.
    Contended,
}

impl Backoff {
    /// The milliseconds a pause before retry round `round` (1 for the first retry) is drawn
    /// from.
    fn range(self, round: u32) -> RangeInclusive<u64> {
        match self {
            Self::Throttled => {
                let ceiling = 10u64 << round.min(6);
                ceiling / 2..=ceiling
            }
            Self::Contended => {
                let ceiling = 10u64 << round.min(7);
                ceiling / 4..=ceiling
            }
        }
    }

    /// The pause before retry round `round`.
    pub fn pause(self, round: u32) -> Duration {
        Duration::from_millis(rand::thread_rng().gen_range(self.range(round)))
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
        for round in 1..30 {
            let ms = |b: Backoff| b.pause(round).as_millis() as u64;
            let ceiling = 10u64 << round.min(6);
            assert!((ceiling / 2..=ceiling).contains(&ms(Backoff::Throttled)));
            let ceiling = 10u64 << round.min(7);
            assert!((ceiling / 4..=ceiling).contains(&ms(Backoff::Contended)));
        }
    }
}
