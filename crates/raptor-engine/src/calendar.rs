//! The US equity and options market calendar: trading days, the regular session close in
//! America/New_York, and when a resting order stops being good.
//!
//! Pure date arithmetic, no time-zone database: New York is UTC-5, or UTC-4 from the second
//! Sunday of March to the first Sunday of November (both switches happen at 02:00 local time, on
//! a Sunday, when no session closes). Exchange holidays and early closes come from the NYSE
//! calendar for the years in [`HOLIDAYS`]; extend the table every year (a test fails when the
//! current year is missing).

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};

/// Regular session close, New York local hour.
pub const CLOSE_HOUR: u32 = 16;

/// Early close (13:00 New York) days.
const EARLY_CLOSE_HOUR: u32 = 13;

/// Full-day exchange holidays (NYSE), by year.
pub const HOLIDAYS: &[(i32, &[(u32, u32)])] = &[
    (
        2026,
        &[
            (1, 1),   // New Year's Day
            (1, 19),  // Martin Luther King Jr. Day
            (2, 16),  // Washington's Birthday
            (4, 3),   // Good Friday
            (5, 25),  // Memorial Day
            (6, 19),  // Juneteenth
            (7, 3),   // Independence Day (observed)
            (9, 7),   // Labor Day
            (11, 26), // Thanksgiving Day
            (12, 25), // Christmas Day
        ],
    ),
    (
        2027,
        &[
            (1, 1),   // New Year's Day
            (1, 18),  // Martin Luther King Jr. Day
            (2, 15),  // Washington's Birthday
            (3, 26),  // Good Friday
            (5, 31),  // Memorial Day
            (6, 18),  // Juneteenth (observed)
            (7, 5),   // Independence Day (observed)
            (9, 6),   // Labor Day
            (11, 25), // Thanksgiving Day
            (12, 24), // Christmas Day (observed)
        ],
    ),
];

/// Days the regular session closes at 13:00 New York.
const EARLY_CLOSES: &[(i32, u32, u32)] = &[(2026, 11, 27), (2026, 12, 24), (2027, 11, 26)];

/// The last year the holiday table covers: `raptor_market_calendar_last_year`, which an alert
/// holds against next year, so the table is extended before it runs out.
pub fn last_covered_year() -> i32 {
    HOLIDAYS.iter().map(|(y, _)| *y).max().unwrap_or(0)
}

/// Whether the calendar table covers `year` (holidays are only known for those years).
pub fn covers(year: i32) -> bool {
    HOLIDAYS.iter().any(|(y, _)| *y == year)
}

fn is_holiday(date: NaiveDate) -> bool {
    HOLIDAYS
        .iter()
        .filter(|(year, _)| *year == date.year())
        .flat_map(|(_, days)| days.iter())
        .any(|&(month, day)| date.month() == month && date.day() == day)
}

/// Whether the exchanges hold a regular session on `date` (a weekday that is no holiday).
pub fn is_trading_day(date: NaiveDate) -> bool {
    !matches!(date.weekday(), Weekday::Sat | Weekday::Sun) && !is_holiday(date)
}

/// The `n`-th `weekday` of `month` (1-based).
fn nth_weekday(year: i32, month: u32, weekday: Weekday, n: u8) -> Option<NaiveDate> {
    NaiveDate::from_weekday_of_month_opt(year, month, weekday, n)
}

/// New York's offset from UTC in hours on `date` (at any time after 02:00 local).
fn new_york_offset_hours(date: NaiveDate) -> i64 {
    let year = date.year();
    let dst_start = nth_weekday(year, 3, Weekday::Sun, 2);
    let dst_end = nth_weekday(year, 11, Weekday::Sun, 1);
    match (dst_start, dst_end) {
        (Some(start), Some(end)) if date >= start && date < end => -4,
        _ => -5,
    }
}

/// The regular session's close on `date` as an instant, `None` when it is no trading day.
pub fn session_close(date: NaiveDate) -> Option<DateTime<Utc>> {
    if !is_trading_day(date) {
        return None;
    }
    let early = EARLY_CLOSES
        .iter()
        .any(|&(y, m, d)| date.year() == y && date.month() == m && date.day() == d);
    let local_hour = if early { EARLY_CLOSE_HOUR } else { CLOSE_HOUR };
    let midnight = Utc
        .from_utc_datetime(&date.and_hms_opt(0, 0, 0)?)
        .checked_add_signed(Duration::hours(i64::from(local_hour)))?;
    midnight.checked_sub_signed(Duration::hours(new_york_offset_hours(date)))
}

/// The first session close at or after `at`: when a `day` order placed at `at` expires (an
/// order placed after the close, or on a day without a session, is for the next session).
pub fn next_close(at: DateTime<Utc>) -> DateTime<Utc> {
    // The close of a date is always later on that UTC date than its New York date's start, so
    // starting from the UTC date one day back covers every case; 15 days spans any holiday run.
    let mut date = at.date_naive() - Duration::days(1);
    for _ in 0..16 {
        if let Some(close) = session_close(date) {
            if close >= at {
                return close;
            }
        }
        date += Duration::days(1);
    }
    at
}

/// The last session close on or before `date`: an option expiring on `date` trades until then
/// (its expiration day's close, or the last one before it when `date` has no session).
pub fn last_trading_close(date: NaiveDate) -> Option<DateTime<Utc>> {
    let mut day = date;
    for _ in 0..16 {
        if let Some(close) = session_close(day) {
            return Some(close);
        }
        day -= Duration::days(1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).expect("date")
    }

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0)
            .single()
            .expect("instant")
    }

    #[test]
    fn closes_at_four_new_york_in_winter_and_summer() {
        assert_eq!(
            session_close(date(2026, 12, 1)),
            Some(utc(2026, 12, 1, 21, 0))
        );
        assert_eq!(
            session_close(date(2026, 7, 1)),
            Some(utc(2026, 7, 1, 20, 0))
        );
        // DST starts 2026-03-08 and ends 2026-11-01.
        assert_eq!(
            session_close(date(2026, 3, 6)),
            Some(utc(2026, 3, 6, 21, 0))
        );
        assert_eq!(
            session_close(date(2026, 3, 9)),
            Some(utc(2026, 3, 9, 20, 0))
        );
        assert_eq!(
            session_close(date(2026, 10, 30)),
            Some(utc(2026, 10, 30, 20, 0))
        );
        assert_eq!(
            session_close(date(2026, 11, 2)),
            Some(utc(2026, 11, 2, 21, 0))
        );
    }

    #[test]
    fn weekends_holidays_and_early_closes() {
        assert_eq!(session_close(date(2026, 12, 5)), None, "Saturday");
        assert_eq!(session_close(date(2026, 12, 25)), None, "Christmas");
        assert_eq!(session_close(date(2026, 11, 26)), None, "Thanksgiving");
        assert_eq!(session_close(date(2027, 3, 26)), None, "Good Friday 2027");
        assert_eq!(
            session_close(date(2027, 12, 24)),
            None,
            "Christmas observed"
        );
        assert_eq!(
            session_close(date(2026, 11, 27)),
            Some(utc(2026, 11, 27, 18, 0)),
            "day after Thanksgiving closes at 13:00"
        );
    }

    #[test]
    fn a_day_order_expires_at_the_next_close() {
        // Tuesday 10:00 New York: today's close.
        assert_eq!(next_close(utc(2026, 12, 1, 15, 0)), utc(2026, 12, 1, 21, 0));
        // After the close: the next session's.
        assert_eq!(
            next_close(utc(2026, 12, 1, 21, 30)),
            utc(2026, 12, 2, 21, 0)
        );
        // Friday evening: Monday's.
        assert_eq!(next_close(utc(2026, 12, 4, 23, 0)), utc(2026, 12, 7, 21, 0));
        // Christmas Eve afternoon, after its early close: the 28th (25th is a holiday).
        assert_eq!(
            next_close(utc(2026, 12, 24, 19, 0)),
            utc(2026, 12, 28, 21, 0)
        );
        // Late evening UTC that is still the same New York day.
        assert_eq!(next_close(utc(2026, 12, 2, 1, 0)), utc(2026, 12, 2, 21, 0));
        // Exactly at the close: that close.
        assert_eq!(next_close(utc(2026, 12, 1, 21, 0)), utc(2026, 12, 1, 21, 0));
    }

    #[test]
    fn the_table_covers_this_year_and_next() {
        // Fails once the calendar falls behind: extend HOLIDAYS and EARLY_CLOSES.
        let year = Utc::now().year();
        assert!(covers(year), "no exchange holidays for {year}");
        assert!(
            covers(year + 1) || Utc::now().month() < 12,
            "no holidays for {}",
            year + 1
        );
    }
}
