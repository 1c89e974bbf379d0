//! Command arguments as text: the one policy every binding keeps for numbers.
//!
//! Integers go in decimal. A float goes as the shortest text that reads back as the same value,
//! laid out as ECMAScript's `Number.prototype.toString` does (what Node sends natively):
//! integral values below 1e21 as plain integers (`2`, not `2.0`), `0.000001` but `1e-7`,
//! `1.5e+300`, and `-0` with its sign; infinities as `inf` / `-inf`, as Redis writes them. NaN
//! has no text Redis reads as a number, so it is refused (`config`, naming the argument)
//! rather than sent as `nan`. Strings are each language's own UTF-8 (a lone surrogate is
//! refused there, never sent as U+FFFD); bytes go as they are.

use crate::error::{Error, Result};

/// The text of a double argument at `index` (0 is the command's name), or the `config` error
/// for NaN.
pub fn float_text(value: f64, index: usize) -> Result<String> {
    shortest(value).ok_or_else(|| Error::config(format!("argument {index} is NaN")))
}

/// The text of a single-precision argument (.NET's `float`): the shortest text that reads back
/// as the same `f32` (`0.1`, not the `0.10000000149011612` of its double), laid out as
/// [`float_text`].
pub fn float32_text(value: f32, index: usize) -> Result<String> {
    if value.is_nan() {
        return Err(Error::config(format!("argument {index} is NaN")));
    }
    if value.is_infinite() || value == 0.0 {
        return float_text(value as f64, index);
    }
    // The shortest decimal that reads back as the f32, then laid out as a double of that text.
    let text = format!("{:e}", value.abs());
    let as_double: f64 = text
        .parse()
        .map_err(|_| Error::config("unreadable float"))?;
    float_text(as_double.copysign(value as f64), index)
}

fn shortest(f: f64) -> Option<String> {
    if f.is_nan() {
        return None;
    }
    if f.is_infinite() {
        return Some(if f > 0.0 { "inf" } else { "-inf" }.to_string());
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return Some(format!("{sign}0"));
    }
    let a = f.abs();
    // `{:e}` is Rust's shortest round-trip form: digits `d[.ddd]`, then `e` and the exponent.
    // Where two forms of that length read back, ECMAScript takes the closer one (the even one on
    // a tie): the correctly rounded form of that length (`{:.N$e}` rounds half to even), when it
    // reads back too.
    let shortest = format!("{a:e}");
    let len = shortest.split_once('e')?.0.replace('.', "").len();
    let rounded = format!("{a:.prec$e}", prec = len - 1);
    let sci = if rounded.parse::<f64>() == Ok(a) {
        rounded
    } else {
        shortest
    };
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let k = digits.len() as i32;
    // The value is 0.DIGITS x 10^n.
    let n = exp + 1;
    let text = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if e < 0 { "-" } else { "+" };
        format!("{first}{dot}{rest}e{esign}{}", e.abs())
    };
    Some(format!("{sign}{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn doubles_read_as_javascript_writes_them() {
        for (value, text) in [
            (2.0, "2"),
            (0.1, "0.1"),
            (-0.0, "-0"),
            (1e21, "1e+21"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(float_text(value, 1).unwrap(), text);
        }
    }

    #[test]
    fn singles_are_their_own_shortest_text() {
        assert_eq!(float32_text(0.1, 1).unwrap(), "0.1");
        assert_eq!(float32_text(16777216.0, 1).unwrap(), "16777216");
        assert_eq!(float32_text(-0.0, 1).unwrap(), "-0");
    }

    #[test]
    fn nan_is_refused_naming_the_argument() {
        let e = float_text(f64::NAN, 3).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Config);
        assert_eq!(e.message(), "argument 3 is NaN");
        assert_eq!(
            float32_text(f32::NAN, 2).unwrap_err().message(),
            "argument 2 is NaN"
        );
    }
}
