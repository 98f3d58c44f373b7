//! The dates the dataset holds: calendar dates of the years 1800 to 2100 (a stored date outside
//! them is null, a filter date outside them is refused).

/// Whether `year-month-day` is a calendar date of the years 1800 to 2100.
#[inline]
pub fn is_dataset_date(year: i32, month: i32, day: i32) -> bool {
    (1800..=2100).contains(&year) && (1..=12).contains(&month) && day >= 1 && day <= days_in_month(year, month)
}

#[inline]
fn days_in_month(year: i32, month: i32) -> i32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
