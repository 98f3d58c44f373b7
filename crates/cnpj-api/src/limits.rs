//! Per-user rolling-minute rate limit and the 6-hour batch result cache, both in memory.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cnpj_model::{BatchRecord, Locale};

/// At most a user's limit (their plan's) of requests in any window of `window`.
#[derive(Debug)]
pub struct RateLimiter {
    window: Duration,
    hits: Mutex<HashMap<i64, VecDeque<Instant>>>,
}

impl RateLimiter {
    pub fn new(window: Duration) -> RateLimiter {
        RateLimiter { window, hits: Mutex::new(HashMap::new()) }
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// Counts a request against `limit`: `Ok(remaining)`, or `Err(seconds until a slot frees)`
    /// when over it (a refused request is not counted).
    pub fn check(&self, user: i64, limit: u32) -> Result<u32, u64> {
        let now = Instant::now();
        let mut hits = self.hits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let queue = hits.entry(user).or_default();
        while queue.front().is_some_and(|&t| now.duration_since(t) >= self.window) {
            queue.pop_front();
        }
        if queue.len() >= limit as usize {
            let oldest = *queue.front().expect("the queue is full");
            let wait = self.window.saturating_sub(now.duration_since(oldest));
            return Err(wait.as_secs_f64().ceil().max(1.0) as u64);
        }
        queue.push_back(now);
        Ok(limit.saturating_sub(queue.len() as u32))
    }
}

type Key = (String, Locale);
/// When a result was cached, and the record (`None`: not found).
type Entry = (Instant, Option<Arc<BatchRecord>>);

/// Individual batch results (found or not) for `ttl`; emptied when a new dataset is served.
#[derive(Debug)]
pub struct BatchCache {
    ttl: Duration,
    entries: Mutex<HashMap<Key, Entry>>,
}

const MAX_ENTRIES: usize = 200_000;

impl BatchCache {
    pub fn new(ttl: Duration) -> BatchCache {
        BatchCache { ttl, entries: Mutex::new(HashMap::new()) }
    }

    /// `Some(result)` when cached and fresh; the result itself is `None` for "not found".
    pub fn get(&self, key: &str, locale: Locale) -> Option<Option<Arc<BatchRecord>>> {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (at, value) = entries.get(&(key.to_owned(), locale))?;
        (at.elapsed() < self.ttl).then(|| value.clone())
    }

    pub fn put(&self, key: &str, locale: Locale, value: Option<Arc<BatchRecord>>) {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            entries.retain(|_, (at, _)| at.elapsed() < ttl);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert((key.to_owned(), locale), (Instant::now(), value));
    }

    pub fn clear(&self) {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_rolls() {
        let limiter = RateLimiter::new(Duration::from_millis(200));
        assert_eq!(limiter.check(1, 2), Ok(1));
        assert_eq!(limiter.check(1, 2), Ok(0));
        assert_eq!(limiter.check(1, 2), Err(1));
        assert_eq!(limiter.check(2, 2), Ok(1), "users are counted apart");
        assert_eq!(limiter.check(1, 3), Ok(0), "a plan's higher limit");
        std::thread::sleep(Duration::from_millis(210));
        assert_eq!(limiter.check(1, 2), Ok(1));
    }

    #[test]
    fn cache_entries_expire_and_clear() {
        let cache = BatchCache::new(Duration::from_millis(100));
        cache.put("11222333000181", Locale::En, None);
        assert_eq!(cache.get("11222333000181", Locale::En), Some(None));
        assert_eq!(cache.get("11222333000181", Locale::Es), None);
        cache.clear();
        assert_eq!(cache.get("11222333000181", Locale::En), None);
        cache.put("x", Locale::En, None);
        std::thread::sleep(Duration::from_millis(110));
        assert_eq!(cache.get("x", Locale::En), None);
    }
}
