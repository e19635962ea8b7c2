//! Instruments: equity tickers and compact OCC option symbols, parsed strictly.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::error::SymbolError;

/// Contract size of one equity option.
pub const OPTION_MULTIPLIER: Decimal = Decimal::ONE_HUNDRED;

/// Length of the OCC suffix `YYMMDD` + `C|P` + 8 strike digits.
const OCC_SUFFIX_LEN: usize = 15;
const MAX_ROOT_LEN: usize = 6;

/// Call or put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Right {
    /// The right to buy the underlying.
    Call,
    /// The right to sell the underlying.
    Put,
}

/// The terms of an option, decoded from its OCC symbol.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OptionContract {
    /// The OCC root, used as the underlying.
    pub root: String,
    /// Last trading day.
    pub expiry: NaiveDate,
    /// Call or put.
    pub right: Right,
    /// Strike price in dollars, at scale 3 (`00065000` is `65.000`).
    pub strike: Decimal,
}

/// Something the engine can trade. Serialized as its symbol string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Instrument {
    /// A share of stock (or ETF), multiplier 1.
    Equity {
        /// The ticker, e.g. `AAPL` or `BRK.B`.
        symbol: String,
    },
    /// An equity option, multiplier 100.
    Option {
        /// The compact OCC symbol, e.g. `AAPL260918C00065000`.
        symbol: String,
        /// Its decoded terms.
        contract: OptionContract,
    },
}

impl Instrument {
    /// Parses an equity ticker or a compact OCC option symbol.
    ///
    /// - Equity: 1-6 upper-case ASCII letters, optionally split once by a `.` (`BRK.B`).
    /// - Option: root of 1-6 upper-case letters, expiry `YYMMDD` (a real date in 20YY), `C` or
    ///   `P`, strike x 1000 as exactly 8 digits (not all zero).
    ///
    /// Input must already be upper case; lower case is refused rather than normalised.
    pub fn parse(s: &str) -> Result<Instrument, SymbolError> {
        if s.is_empty() {
            return Err(SymbolError::Empty);
        }
        if s.bytes().any(|b| b.is_ascii_lowercase()) {
            return Err(SymbolError::NotUppercase {
                symbol: s.to_owned(),
            });
        }
        if !s.is_ascii() {
            return Err(malformed(
                s,
                "only ASCII letters, digits and '.' are allowed",
            ));
        }
        // A ticker is at most 7 characters (6 letters and a dot), an OCC symbol at least 16.
        if s.len() > OCC_SUFFIX_LEN {
            parse_option(s)
        } else {
            parse_equity(s)
        }
    }

    /// The canonical symbol, as parsed.
    pub fn symbol(&self) -> &str {
        match self {
            Self::Equity { symbol } | Self::Option { symbol, .. } => symbol,
        }
    }

    /// The underlying: the ticker itself for an equity, the OCC root for an option.
    pub fn underlying(&self) -> &str {
        match self {
            Self::Equity { symbol } => symbol,
            Self::Option { contract, .. } => &contract.root,
        }
    }

    /// Shares per unit of quantity: 1 for equities, 100 for options.
    pub fn multiplier(&self) -> Decimal {
        match self {
            Self::Equity { .. } => Decimal::ONE,
            Self::Option { .. } => OPTION_MULTIPLIER,
        }
    }

    /// The option's expiry, `None` for equities.
    pub fn expiry(&self) -> Option<NaiveDate> {
        self.contract().map(|c| c.expiry)
    }

    /// True for an option at or after its last trading moment: the regular close (New York,
    /// early closes included) of its expiration date, or of the last trading day before it
    /// when that date has no session ([`crate::calendar::last_trading_close`]). It trades all
    /// of its expiration day until then, whatever the UTC date says.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expiry().is_some_and(|expiry| {
            crate::calendar::last_trading_close(expiry)
                .map_or(now.date_naive() > expiry, |close| now >= close)
        })
    }

    /// The option's terms, `None` for equities.
    pub fn contract(&self) -> Option<&OptionContract> {
        match self {
            Self::Equity { .. } => None,
            Self::Option { contract, .. } => Some(contract),
        }
    }

    /// True for options.
    pub fn is_option(&self) -> bool {
        matches!(self, Self::Option { .. })
    }
}

impl fmt::Display for Instrument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

impl FromStr for Instrument {
    type Err = SymbolError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for Instrument {
    type Error = SymbolError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<Instrument> for String {
    fn from(instrument: Instrument) -> String {
        match instrument {
            Instrument::Equity { symbol } | Instrument::Option { symbol, .. } => symbol,
        }
    }
}

fn malformed(s: &str, reason: &'static str) -> SymbolError {
    SymbolError::Malformed {
        symbol: s.to_owned(),
        reason,
    }
}

fn is_root(s: &str) -> bool {
    (1..=MAX_ROOT_LEN).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_uppercase())
}

fn parse_equity(s: &str) -> Result<Instrument, SymbolError> {
    let valid = match s.split_once('.') {
        Some((class, series)) => {
            !class.is_empty()
                && !series.is_empty()
                && class.len() + series.len() <= MAX_ROOT_LEN
                && is_root(class)
                && is_root(series)
        }
        None => is_root(s),
    };
    if valid {
        Ok(Instrument::Equity {
            symbol: s.to_owned(),
        })
    } else {
        Err(malformed(
            s,
            "a ticker is 1-6 upper-case letters with at most one '.'",
        ))
    }
}

fn parse_option(s: &str) -> Result<Instrument, SymbolError> {
    let (root, suffix) = s.split_at(s.len() - OCC_SUFFIX_LEN);
    if !is_root(root) {
        return Err(malformed(s, "an OCC root is 1-6 upper-case letters"));
    }
    let (date, rest) = suffix.split_at(6);
    let (right, strike) = rest.split_at(1);
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if !digits(date) || !digits(strike) {
        return Err(malformed(s, "expected YYMMDD, C or P, and 8 strike digits"));
    }
    let right = match right {
        "C" => Right::Call,
        "P" => Right::Put,
        _ => return Err(malformed(s, "the option right must be C or P")),
    };
    // All three fields are ASCII digits of bounded length, so these parses cannot fail; the
    // error arms only avoid a panic path.
    let field = |part: &str| part.parse::<u32>().map_err(|_| malformed(s, "bad digits"));
    let year = 2000 + i32::try_from(field(&date[0..2])?).map_err(|_| malformed(s, "bad year"))?;
    let expiry = NaiveDate::from_ymd_opt(year, field(&date[2..4])?, field(&date[4..6])?)
        .ok_or_else(|| SymbolError::InvalidExpiry {
            symbol: s.to_owned(),
        })?;
    let strike_thousandths = field(strike)?;
    if strike_thousandths == 0 {
        return Err(malformed(s, "the strike must be positive"));
    }
    Ok(Instrument::Option {
        symbol: s.to_owned(),
        contract: OptionContract {
            root: root.to_owned(),
            expiry,
            right,
            strike: Decimal::new(i64::from(strike_thousandths), 3),
        },
    })
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]
mod tests {
    use super::*;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    #[test]
    fn parses_equities() {
        for s in ["A", "AAPL", "GOOGLE", "BRK.B", "A.B", "ABCDE.F"] {
            let i = Instrument::parse(s).unwrap();
            assert_eq!(
                i,
                Instrument::Equity {
                    symbol: s.to_owned()
                }
            );
            assert_eq!(i.symbol(), s);
            assert_eq!(i.underlying(), s);
            assert_eq!(i.multiplier(), Decimal::ONE);
            assert_eq!(i.expiry(), None);
            assert!(!i.is_expired(utc(2100, 1, 1, 0, 0)));
        }
    }

    #[test]
    fn parses_occ_symbols() {
        let i = Instrument::parse("AAPL260918C00065000").unwrap();
        let c = i.contract().unwrap();
        assert_eq!(c.root, "AAPL");
        assert_eq!(c.expiry, date(2026, 9, 18));
        assert_eq!(c.right, Right::Call);
        assert_eq!(c.strike, Decimal::new(65_000, 3));
        assert_eq!(c.strike.to_string(), "65.000");
        assert_eq!(i.symbol(), "AAPL260918C00065000");
        assert_eq!(i.underlying(), "AAPL");
        assert_eq!(i.multiplier(), Decimal::ONE_HUNDRED);

        let p = Instrument::parse("X270115P00022500").unwrap();
        let c = p.contract().unwrap();
        assert_eq!((c.root.as_str(), c.right), ("X", Right::Put));
        assert_eq!(c.strike, Decimal::new(22_500, 3));

        let long_root = Instrument::parse("GOOGLE280121C12345678").unwrap();
        assert_eq!(
            long_root.contract().unwrap().strike,
            Decimal::new(12_345_678, 3)
        );
    }

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        use chrono::TimeZone;
        Utc.with_ymd_and_hms(y, m, d, h, min, 0).single().unwrap()
    }

    #[test]
    fn an_option_trades_until_the_close_of_its_expiration_day() {
        // Friday 2026-12-18; New York is UTC-5 in December, so the close is 21:00 UTC.
        let i = Instrument::parse("XYZ261218C00065000").unwrap();
        assert!(!i.is_expired(utc(2026, 12, 17, 23, 0)));
        assert!(!i.is_expired(utc(2026, 12, 18, 20, 59)));
        assert!(i.is_expired(utc(2026, 12, 18, 21, 0)), "at the close");
        assert!(
            i.is_expired(utc(2026, 12, 18, 22, 30)),
            "same UTC date, after the close"
        );
        assert!(i.is_expired(utc(2026, 12, 19, 1, 0)));
        // 2026-11-27 closes early (13:00 New York = 18:00 UTC).
        let early = Instrument::parse("XYZ261127P00050000").unwrap();
        assert!(!early.is_expired(utc(2026, 11, 27, 17, 59)));
        assert!(early.is_expired(utc(2026, 11, 27, 18, 0)));
        // Expiring on a day without a session (Christmas, a Friday): the day before's close,
        // an early one (2026-12-24, 18:00 UTC).
        let holiday = Instrument::parse("XYZ261225C00050000").unwrap();
        assert!(!holiday.is_expired(utc(2026, 12, 24, 17, 59)));
        assert!(holiday.is_expired(utc(2026, 12, 24, 18, 0)));
        // Equities never expire.
        assert!(!Instrument::parse("AAPL")
            .unwrap()
            .is_expired(utc(2100, 1, 1, 0, 0)));
    }

    #[test]
    fn rejects_bad_inputs() {
        let cases = [
            "",
            " AAPL",
            "AAPL ",
            "AAP L",
            "aapl",
            "Aapl",
            "AAPLXYZ",
            "BRK..B",
            ".B",
            "B.",
            "A.B.C",
            "ABCDEF.G",
            "AAPL1",
            "1AAPL",
            "AAPL\u{e9}",
            "AAPL260918C0006500",     // 7 strike digits
            "AAPL260918X00065000",    // bad right
            "AAPL260918c00065000",    // lower-case right
            "AAPL2609l8C00065000",    // letter in the date
            "AAPL261318C00065000",    // month 13
            "AAPL260931C00065000",    // 31 September
            "AAPL270229C00065000",    // 2027 is not a leap year
            "AAPL260918C00000000",    // zero strike
            "AAPL260918C0006500A",    // letter in the strike
            "TOOLONG260918C00065000", // 7-letter root
            "AAP1260918C00065000",    // digit in the root
            "260918C00065000",        // no root (15 chars: too long for a ticker)
            "A.B260918C00065000",     // dot in the root
            "AAPL  260918C00065000",  // padded 21-char form
            "AAPL260918C00065000 ",
        ];
        for s in cases {
            let err = Instrument::parse(s).unwrap_err();
            assert_eq!(err.code(), "invalid_symbol", "{s:?}");
        }
        assert_eq!(Instrument::parse(""), Err(SymbolError::Empty));
        assert!(matches!(
            Instrument::parse("aapl260918c00065000"),
            Err(SymbolError::NotUppercase { .. })
        ));
        assert!(matches!(
            Instrument::parse("AAPL260230C00065000"),
            Err(SymbolError::InvalidExpiry { .. })
        ));
    }

    #[test]
    fn leap_day_is_a_valid_expiry() {
        let i = Instrument::parse("SPY280229P00400000").unwrap();
        assert_eq!(i.expiry(), Some(date(2028, 2, 29)));
    }

    #[test]
    fn serializes_as_the_symbol_string() {
        let i = Instrument::parse("XYZ280121C00050000").unwrap();
        let s: String = i.clone().into();
        assert_eq!(s, "XYZ280121C00050000");
        assert_eq!(Instrument::try_from(s).unwrap(), i);
        assert_eq!(i.to_string(), "XYZ280121C00050000");
        assert_eq!("XYZ280121C00050000".parse::<Instrument>().unwrap(), i);
    }
}
