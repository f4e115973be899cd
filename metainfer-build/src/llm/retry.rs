//! Backoff and retry-hint arithmetic for [`Client::chat`](super::Client::chat).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Delays at or below this get no jitter, so tests with tiny backoffs are deterministic.
const JITTER_FLOOR: Duration = Duration::from_millis(100);

/// The delay before retry number `retry` (0 for the first retry): `base * 2^retry`, capped at
/// `max`, plus up to 10 % jitter when the delay is above 100 ms (never above `max`).
pub fn backoff(retry: u32, base: Duration, max: Duration) -> Duration {
    let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
    let delay = base.checked_mul(factor).unwrap_or(max).min(max);
    if delay <= JITTER_FLOOR {
        return delay;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = delay.mul_f64(f64::from(mix(nanos ^ retry)) / f64::from(u32::MAX) / 10.0);
    (delay + jitter).min(max.max(delay))
}

fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The server's retry hint: `retry-after-ms` (milliseconds, fractions allowed) wins over
/// `retry-after` (whole or fractional seconds). An HTTP-date or anything unparsable is no
/// hint (normal backoff applies).
pub fn retry_hint(retry_after_ms: Option<&str>, retry_after: Option<&str>) -> Option<Duration> {
    let parse = |v: &str, scale: f64| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .and_then(|x| Duration::try_from_secs_f64(x / scale).ok())
    };
    retry_after_ms
        .and_then(|v| parse(v, 1000.0))
        .or_else(|| retry_after.and_then(|v| parse(v, 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_and_capped() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(0, ms(5), ms(40)), ms(5));
        assert_eq!(backoff(1, ms(5), ms(40)), ms(10));
        assert_eq!(backoff(3, ms(5), ms(40)), ms(40));
        assert_eq!(backoff(30, ms(5), ms(40)), ms(40));
        assert_eq!(backoff(u32::MAX, ms(5), ms(40)), ms(40));
    }

    #[test]
    fn jitter_is_bounded() {
        let ms = Duration::from_millis;
        for r in 0..6 {
            let d = backoff(r, ms(500), ms(8000));
            let nominal = (ms(500) * (1 << r)).min(ms(8000));
            assert!(
                d >= nominal && d <= nominal + nominal / 10 && d <= ms(8000).max(nominal),
                "{d:?}"
            );
        }
    }

    #[test]
    fn hints() {
        assert_eq!(
            retry_hint(Some("250"), Some("9")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_hint(Some("1.5"), None),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(retry_hint(None, Some("2")), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_hint(Some("soon"), Some("3")),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_hint(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            None
        );
        assert_eq!(retry_hint(None, Some("-1")), None);
        assert_eq!(retry_hint(None, None), None);
    }
}
