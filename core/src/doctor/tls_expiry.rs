//! Days until a server's certificate expires.
//!
//! The core's connections do not expose the peer certificate, so the doctor makes one more TLS
//! handshake of its own with the same rustls configuration and server name as the connection it
//! checks, reads the end-entity certificate's `notAfter`, and closes. Reading `notAfter` walks
//! just enough of the DER structure; anything unexpected gives `None`, never a panic.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpStream;

use super::findings::Findings;
use super::report::{Mode, Report, Severity};
use crate::error::duration_text;
use crate::tls::TlsOptions;

/// Whole days from now until the certificate of the server at `addr` (reached as `host`)
/// expires; negative once expired. `Err` says why it is not known.
pub(super) async fn days_left(
    addr: SocketAddr,
    host: &str,
    tls: &TlsOptions,
    timeout: Duration,
) -> Result<i64, String> {
    let fetch = async {
        let name = tls
            .server_name_for(host)
            .map_err(|e| e.message().to_string())?;
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
        let stream = connector
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
        let (_, session) = stream.get_ref();
        let cert = session
            .peer_certificates()
            .and_then(|certs| certs.first())
            .ok_or_else(|| "the server sent no certificate".to_string())?;
        not_after(cert.as_ref()).ok_or_else(|| "cannot read the certificate's expiry".to_string())
    };
    let expires = match tokio::time::timeout(timeout, fetch).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(format!(
                "no TLS handshake with {addr} within {}",
                duration_text(timeout)
            ))
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok((expires - now).div_euclid(86_400))
}

/// One DER element: tag, contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let mut len = 0usize;
        for &b in &rest[..count] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[count..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// `notAfter` of an X.509 certificate, as unix seconds.
///
/// ```text
/// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
/// signature, issuer, validity SEQUENCE { notBefore, notAfter }, ... }, ... }
/// ```
pub fn not_after(der: &[u8]) -> Option<i64> {
    let (tag, cert, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, _, mut rest) = element(tbs)?;
    if tag == VERSION {
        rest = element(rest)?.2; // the serial number
    }
    let (_, _, rest) = element(rest)?; // signature algorithm
    let (_, _, rest) = element(rest)?; // issuer
    let (tag, validity, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _, rest) = element(validity)?; // notBefore
    let (tag, time, _) = element(rest)?;
    parse_time(tag, time)
}

/// UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ` as unix seconds.
fn parse_time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, rest) = match (tag, text.len()) {
        (UTC_TIME, 12) => {
            let yy: i64 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 14) => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let part = |i: usize| -> Option<i64> { rest.get(i..i + 2)?.parse().ok() };
    let (month, day, hour, minute, second) = (part(0)?, part(2)?, part(4)?, part(6)?, part(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A certificate expiring within this many days is reported.
const TLS_DAYS: i64 = 14;

pub(super) fn judge(f: &mut Findings, report: &Report) {
    let reaches = report
        .sentinels
        .iter()
        .map(|s| (s.address.to_string(), &s.reach))
        .chain(
            report
                .data_nodes
                .iter()
                .map(|n| (n.address.to_string(), &n.reach)),
        );
    for (who, reach) in reaches {
        match reach.tls_days_left {
            Some(days) if days < 0 => f.add(
                Severity::Failure,
                Mode::Tls,
                "tls_expired",
                Some(who.clone()),
                format!("the certificate of {who} expired {} day(s) ago", -days),
            ),
            Some(days) if days < TLS_DAYS => f.add(
                Severity::Warning,
                Mode::Tls,
                "tls_expiring",
                Some(who.clone()),
                format!("the certificate of {who} expires in {days} day(s)"),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if content.len() < 0x80 {
            out.push(content.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(content.len() as u16).to_be_bytes());
        }
        out.extend_from_slice(content);
        out
    }

    fn cert(version: bool, not_after: (u8, &str)) -> Vec<u8> {
        let mut tbs = Vec::new();
        if version {
            tbs.extend(der(VERSION, &der(0x02, &[2])));
        }
        tbs.extend(der(0x02, &[0x01, 0x02]));
        tbs.extend(der(SEQUENCE, &der(0x06, &[0x2a, 0x86, 0x48])));
        tbs.extend(der(SEQUENCE, &[0u8; 150])); // long issuer: two-byte length
        let mut validity = der(UTC_TIME, b"250101000000Z");
        validity.extend(der(not_after.0, not_after.1.as_bytes()));
        tbs.extend(der(SEQUENCE, &validity));
        tbs.extend(der(SEQUENCE, &[]));
        der(SEQUENCE, &der(SEQUENCE, &tbs))
    }

    #[test]
    fn reads_not_after_in_both_time_forms() {
        // 2030-06-15 12:34:56 UTC
        let want = 1_907_757_296;
        assert_eq!(
            not_after(&cert(true, (UTC_TIME, "300615123456Z"))),
            Some(want)
        );
        assert_eq!(
            not_after(&cert(false, (GENERALIZED_TIME, "20300615123456Z"))),
            Some(want)
        );
        assert_eq!(not_after(&cert(true, (UTC_TIME, "700101000000Z"))), Some(0));
        assert_eq!(
            not_after(&cert(true, (UTC_TIME, "491231235959Z"))),
            Some(2_524_607_999)
        );
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn garbage_gives_none_never_a_panic() {
        let good = cert(true, (UTC_TIME, "300615123456Z"));
        for cut in 0..good.len() {
            assert_eq!(not_after(&good[..cut]), None, "cut at {cut}");
        }
        assert_eq!(not_after(&cert(true, (UTC_TIME, "30061512345xZ"))), None);
        assert_eq!(not_after(&cert(true, (UTC_TIME, "301315123456Z"))), None);
        assert_eq!(not_after(&cert(true, (0x04, "300615123456Z"))), None);
        assert_eq!(not_after(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(not_after(&[0x30, 0x80]), None);
    }
}
