//! `sentinel-recovery exec URL -- CMD [ARG...]`: one command on the primary, printed as redis-cli
//! prints replies.

use sentinel_recovery::{Client, Config, Value};

/// `exec URL [--] CMD [ARG...]`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The service's URL
    pub url: String,
    /// The command and its arguments (after `--` when an argument starts with '-')
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    #[arg(value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn main(Args { url, command }: Args) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        // One round, no event subscriptions: a one-shot command need not follow changes.
        let mut config = Config::from_url(&url).map_err(|e| e.to_string())?;
        if !url.contains("sentinel_events=") {
            config.sentinel_events = false;
        }
        let client = Client::connect_with(config)
            .await
            .map_err(|e| e.to_string())?;
        let reply = client.execute(&command).await;
        client.close().await;
        match reply {
            Ok(value) => {
                print!("{}", format_reply(&value, 0));
                Ok(())
            }
            // redis-cli prints error replies and exits 0; other failures are the tool's own.
            Err(e) if e.server_code().is_some() => {
                println!("(error) {}", e.message());
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    })
}

/// redis-cli's rendering: quoted strings, `(integer)`, `(nil)`, numbered nested lists.
pub fn format_reply(value: &Value, indent: usize) -> String {
    let quoted = |bytes: &[u8]| {
        let mut s = String::from("\"");
        for &b in bytes {
            match b {
                b'"' => s.push_str("\\\""),
                b'\\' => s.push_str("\\\\"),
                b'\n' => s.push_str("\\n"),
                b'\r' => s.push_str("\\r"),
                b'\t' => s.push_str("\\t"),
                0x20..=0x7e => s.push(b as char),
                _ => s.push_str(&format!("\\x{b:02x}")),
            }
        }
        s.push('"');
        s
    };
    let list = |items: Vec<String>, marker: &str| {
        if items.is_empty() {
            return "(empty array)\n".to_string();
        }
        let width = items.len().to_string().len();
        let mut out = String::new();
        for (i, item) in items.into_iter().enumerate() {
            let prefix = format!("{:>width$}{marker} ", i + 1);
            if i > 0 {
                out.push_str(&" ".repeat(indent));
            }
            out.push_str(&prefix);
            out.push_str(&item);
        }
        out
    };
    let nested = |v: &Value, extra: usize| format_reply(v, indent + extra);
    match value {
        Value::Nil => "(nil)\n".into(),
        Value::Int(n) => format!("(integer) {n}\n"),
        Value::Double(d) => format!("(double) {d}\n"),
        Value::Boolean(b) => format!("({b})\n"),
        Value::BigNumber(n) => format!("(big number) {}\n", String::from_utf8_lossy(n)),
        Value::Bulk(b) => format!("{}\n", quoted(b)),
        Value::Simple(s) => format!("{s}\n"),
        Value::Verbatim { text, .. } => format!("{}\n", String::from_utf8_lossy(text)),
        Value::Error(e) => format!("(error) {e}\n"),
        Value::Array(items) | Value::Push(items) => {
            let width = items.len().to_string().len() + 2;
            list(items.iter().map(|v| nested(v, width)).collect(), ")")
        }
        Value::Set(items) => {
            let width = items.len().to_string().len() + 2;
            list(items.iter().map(|v| nested(v, width)).collect(), "~")
        }
        Value::Map(pairs) => {
            let width = pairs.len().to_string().len() + 2;
            list(
                pairs
                    .iter()
                    .map(|(k, v)| {
                        format!("{} => {}", nested(k, width).trim_end(), nested(v, width))
                    })
                    .collect(),
                "#",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_redis_cli() {
        assert_eq!(format_reply(&Value::Int(3), 0), "(integer) 3\n");
        assert_eq!(format_reply(&Value::Nil, 0), "(nil)\n");
        assert_eq!(format_reply(&Value::Simple("OK".into()), 0), "OK\n");
        assert_eq!(
            format_reply(&Value::Bulk("a\"b\n".into()), 0),
            "\"a\\\"b\\n\"\n"
        );
        let list = Value::Array(vec![
            Value::Bulk("x".into()),
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
        ]);
        assert_eq!(
            format_reply(&list, 0),
            "1) \"x\"\n2) 1) (integer) 1\n   2) (integer) 2\n"
        );
        assert_eq!(format_reply(&Value::Array(vec![]), 0), "(empty array)\n");
        let map = Value::Map(vec![(Value::Bulk("k".into()), Value::Bulk("v".into()))]);
        assert_eq!(format_reply(&map, 0), "1# \"k\" => \"v\"\n");
    }
}
