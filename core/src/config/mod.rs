//! URL and options: the one way every language describes what to follow.

mod address_map;
mod names;
mod options;
mod settings;
mod url;
mod validate;

pub use crate::types::{Address, Credentials, Protocol, Secret};
pub use address_map::{AddressMap, AddressMapFn};
pub use names::DEFAULT_SENTINEL_PORT;
pub(crate) use names::{host_name_problem, parse_server_name};
pub use settings::{Config, ReadFrom};

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::names::shorten;
    use super::*;

    fn err(url: &str) -> String {
        let e = Config::from_url(url).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config, "{url}");
        e.message().to_string()
    }

    #[test]
    fn full_url() {
        let c = Config::from_url(
            "redis+sentinel://app:s%40cret@s1.example,10.0.0.2:26380,[::1]:26381/cache?db=2&client_name=svc&protocol=2\
             &sentinel_user=watcher&sentinel_password=pw&connect_timeout_ms=300&read_from=prefer-replica",
        )
        .unwrap();
        assert_eq!(
            c.sentinels,
            [
                Address::new("s1.example", 26379),
                Address::new("10.0.0.2", 26380),
                Address::new("::1", 26381)
            ]
        );
        assert_eq!(c.service, "cache");
        let auth = c.auth.as_ref().unwrap();
        assert_eq!(auth.username.as_deref(), Some("app"));
        assert_eq!(auth.password.expose(), "s@cret");
        let sauth = c.sentinel_auth.as_ref().unwrap();
        assert_eq!(
            (sauth.username.as_deref(), sauth.password.expose()),
            (Some("watcher"), "pw")
        );
        assert_eq!(
            (c.db, c.protocol, c.connect_timeout_ms),
            (2, Protocol::Resp2, 300)
        );
        assert_eq!(c.client_name.as_deref(), Some("svc"));
        assert_eq!(c.read_from, ReadFrom::PreferReplica);
    }

    #[test]
    fn synonyms_defaults_and_lone_password() {
        let c = Config::from_url("valkey+sentinel://secret@localhost/svc").unwrap();
        assert_eq!(c.sentinels, [Address::new("localhost", 26379)]);
        let auth = c.auth.unwrap();
        assert_eq!((auth.username, auth.password.expose()), (None, "secret"));
        let c = Config::from_url("redis+sentinel://:pw@h:1/s").unwrap();
        assert_eq!(c.auth.unwrap().username, None);
        assert_eq!(c.sentinel_timeout_ms, Config::default().sentinel_timeout_ms);
    }

    #[test]
    fn errors_name_the_bad_part() {
        assert!(err("redis://h/s").contains("unknown scheme 'redis'"));
        assert!(err("h:26379/s").contains("redis+sentinel://"));
        assert!(err("redis+sentinel://h/s?tls=maybe").contains("option tls must be"));
        assert!(err("redis+sentinel://h/s?tls_ca_file=/ca.pem").contains("tls_ca_file"));
        assert!(
            err("redis+sentinel://h/s?data_tls=1&sentinel_tls_ca_file=/ca.pem")
                .contains("sentinel_tls_ca_file")
        );
        assert!(err("rediss+sentinel://h/s?tls_server_name=a%20b").contains("tls_server_name"));
        assert!(err("redis+sentinel://h").contains("/service"));
        assert!(err("redis+sentinel://h/").contains("service name is empty"));
        assert!(err("redis+sentinel:///s").contains("sentinel #1"));
        assert!(err("redis+sentinel://a,,b/s").contains("sentinel #2"));
        assert!(err("redis+sentinel://h:0/s").contains("port '0'"));
        assert!(err("redis+sentinel://h:65536/s").contains("port '65536'"));
        assert!(err("redis+sentinel://h:x/s").contains("port 'x'"));
        assert!(err("redis+sentinel://h:-1/s").contains("port '-1'"));
        assert!(err("redis+sentinel://::1/s").contains("brackets"));
        assert!(err("redis+sentinel://[zz]:1/s").contains("not an IPv6"));
        assert!(err("redis+sentinel://h%20x/s").contains("not a valid host"));
        assert!(err("redis+sentinel://h/s?db=x").contains("option db"));
        assert!(err("redis+sentinel://h/s?db=-1").contains("option db"));
        assert!(err("redis+sentinel://h/s?protocol=4").contains("option protocol"));
        assert!(err("redis+sentinel://h/s?read_from=any").contains("option read_from"));
        assert!(err("redis+sentinel://h/s?colour=blue").contains("unknown option 'colour'"));
        assert!(
            err("redis+sentinel://h/s?retry_base_ms=500&retry_max_ms=100")
                .contains("retry_base_ms")
        );
        assert!(err("redis+sentinel://h/s?dns_server=nope").contains("dns_server"));
    }

    #[test]
    fn secrets_never_show() {
        let url = "redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish&db=nope";
        let e = Config::from_url(url).unwrap_err();
        assert!(!e.to_string().contains("hunter2") && !e.to_string().contains("swordfish"));
        let c = Config::from_url("redis+sentinel://app:hunter2@h/s?sentinel_password=swordfish")
            .unwrap();
        let shown = format!("{c:?} {}", c.redacted_url());
        assert!(
            !shown.contains("hunter2") && !shown.contains("swordfish"),
            "{shown}"
        );
        assert!(c
            .redacted_url()
            .starts_with("redis+sentinel://app:***@h:26379/s"));
    }

    /// A user name holding `@` (written `%40`) must stay escaped in the redacted URL, or that URL
    /// parses back to another user. Reproducer: fuzz/ config_url, corpus crash-1a297a84….
    #[test]
    fn redacted_url_parses_back_to_the_same_user_and_service() {
        let c = Config::from_url("redis+sentinel://a%40b%25c:pw@h/svc%2Fx%3Fy").unwrap();
        let shown = c.redacted_url();
        assert_eq!(shown, "redis+sentinel://a%40b%25c:***@h:26379/svc%2Fx%3Fy");
        let back = Config::from_url(&shown).unwrap();
        let user = |c: &Config| c.auth.as_ref().and_then(|a| a.username.clone());
        assert_eq!(user(&back), user(&c));
        assert_eq!(back.service, c.service);
    }

    /// A raw '/' in a password ends the authority early, so the password's start would be read
    /// as a sentinel: shown in the error ("port 'G' of 'n'") or, digits only, taken as a port and
    /// the rest as the service. It is refused without being shown. Reproducers: fuzz/ config_url,
    /// corpus crash-b286fd2e…, crash-6635cd40….
    #[test]
    fn a_raw_slash_in_a_password_is_refused_without_showing_it() {
        for url in [
            "redis+sentinel://n:G/@/?=&db=",
            "valkeys+sentinel://q:1/!!))9G@/?",
            "redis+sentinel://app:c2VjcmV0/K3Bhc3M=@h/s",
            "redis+sentinel://app:12/34@h:26379/s",
            "redis+sentinel://:abc/def@h/s?db=1",
        ] {
            let m = err(url);
            assert!(m.contains("%2F"), "{url}: {m}");
            for part in ["G", "9G", "c2VjcmV0", "K3Bhc3M", "12", "34", "abc", "def"] {
                assert!(!m.contains(part), "{url}: {m}");
            }
        }
        // Written as %2F it is read whole; an '@' in the service is written %40.
        let c = Config::from_url("redis+sentinel://app:c2VjcmV0%2FK3Bhc3M=@h/s").unwrap();
        assert_eq!(c.auth.unwrap().password.expose(), "c2VjcmV0/K3Bhc3M=");
        assert_eq!(
            Config::from_url("redis+sentinel://h/a%40b")
                .unwrap()
                .service,
            "a@b"
        );
        assert!(err("redis+sentinel://h/a@b").contains("%40"));
        // '@' in a query value stays fine.
        let c = Config::from_url("redis+sentinel://h/s?sentinel_password=a@b/c").unwrap();
        assert_eq!(c.sentinel_auth.unwrap().password.expose(), "a@b/c");
    }

    /// A hand-built config is held to the URL's rules: `validate` refuses a sentinel on port 0 as
    /// the URL form does. Reproducer: fuzz/ config_url, corpus crash-2effb252….
    #[test]
    fn validate_refuses_port_zero_like_the_url() {
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        c.sentinels.push(Address::new("-", 0));
        let e = c.validate().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().starts_with("sentinel #2: port 0"), "{e}");
    }

    #[test]
    fn tls_keys() {
        let c = Config::from_url("rediss+sentinel://h/s").unwrap();
        assert!(c.sentinel_tls && c.data_tls && !c.tls_insecure);
        assert!(c.redacted_url().starts_with("rediss+sentinel://"));
        let c = Config::from_url(
            "redis+sentinel://h/s?sentinel_tls=true&tls_ca_file=/ca.pem&sentinel_tls_ca_file=/s.pem\
             &tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_insecure=1&tls_server_name=cache.internal",
        )
        .unwrap();
        assert!(c.sentinel_tls && !c.data_tls && c.tls_insecure);
        assert_eq!(c.tls_ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.sentinel_tls_ca_file, Some(PathBuf::from("/s.pem")));
        assert_eq!(c.tls_server_name.as_deref(), Some("cache.internal"));
        let mut c = Config::from_url("rediss+sentinel://h/s?tls=false").unwrap();
        assert!(!c.sentinel_tls && !c.data_tls);
        c.set("data_tls", "yes").unwrap();
        assert!(c.data_tls && !c.sentinel_tls);
        c.set("tls_server_name", "10.0.0.1").unwrap();
        c.set("tls_server_name", "").unwrap();
        assert_eq!(c.tls_server_name, None);
        assert!(Config::from_url("valkeys+sentinel://h/s").unwrap().data_tls);
    }

    #[test]
    fn set_is_the_one_way_options_apply() {
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        c.set("password", "pw").unwrap();
        c.set("username", "u").unwrap();
        let auth = c.auth.clone().unwrap();
        assert_eq!(
            (auth.username.as_deref(), auth.password.expose()),
            (Some("u"), "pw")
        );
        assert!(c.set("check_interval_ms", "5").is_err());
        assert!(c.set("client_name", "has space").is_err());
        c.set("dns_server", "127.0.0.1:5353").unwrap();
        assert_eq!(c.dns_server, Some("127.0.0.1:5353".parse().unwrap()));
    }

    #[test]
    fn overlong_host_names_are_refused_up_front_without_being_echoed() {
        // Failure messages show the start only: a whole 2 MB name is what this guards against.
        let start = |m: &str| m.chars().take(300).collect::<String>();
        let huge = "a".repeat(2_000_000);
        let m = err(&format!(
            "redis+sentinel://ok.example,{huge}.example:26379/s"
        ));
        assert!(m.starts_with("sentinel #2: "), "{}", start(&m));
        assert!(m.contains("2000008 characters"), "{}", start(&m));
        assert!(m.contains("more than the 253 allowed"), "{}", start(&m));
        assert!(m.contains("aaaa…"), "{}", start(&m));
        assert!(m.len() < 200, "{}", start(&m));

        let label = "b".repeat(64);
        let m = err(&format!("redis+sentinel://x.{label}.example/s"));
        assert!(m.starts_with("sentinel #1: "), "{m}");
        assert!(m.contains("label #2"), "{m}");
        assert!(
            m.contains("64 characters long, more than the 63 allowed"),
            "{m}"
        );
        assert!(err("redis+sentinel://a..b/s").contains("empty label"));
        assert!(err("redis+sentinel://.a/s").contains("empty label"));
        let m = err(&format!("redis+sentinel://h:{huge}/s"));
        assert!(m.contains("port 'aaaa") && m.len() < 200, "{}", start(&m));

        // Longest allowed: 253 characters, labels of 63; a final dot does not count.
        let longest = [
            &"c".repeat(63)[..],
            &"d".repeat(63),
            &"e".repeat(63),
            &"f".repeat(61),
        ]
        .join(".");
        assert_eq!(longest.len(), 253);
        let c =
            Config::from_url(&format!("redis+sentinel://{longest}.:1,[::1],10.0.0.1/s")).unwrap();
        assert_eq!(c.sentinels[0].host.len(), 254);

        // Options objects and hand-built configs get the same check.
        let mut c = Config::from_url("redis+sentinel://h/s").unwrap();
        let e = c.set("tls_server_name", &huge).unwrap_err();
        assert!(
            e.message().starts_with("option tls_server_name: "),
            "{}",
            start(e.message())
        );
        assert!(e.message().contains("2000000 characters") && e.message().len() < 200);
        c.sentinels
            .push(Address::new(format!("{label}.example"), 1));
        let e = c.validate().unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::Config);
        assert!(e.message().starts_with("sentinel #2: label #1"), "{e}");
    }

    #[test]
    fn shorten_cuts_at_a_character_boundary() {
        assert_eq!(shorten("short"), "short");
        let long = "é".repeat(100);
        let shown = shorten(&long);
        assert_eq!(shown.chars().count(), 65);
        assert!(shown.ends_with('…'));
    }
}
