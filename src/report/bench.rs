//! `idem bench` for people: each figure beside its target.

use std::fmt::Write;

use super::runs::histogram;
use super::style::{bad, dim, good, strong};
use super::table;
use crate::bench::BenchReport;

/// Targets from the issues, for a 2-core machine.
const WARM_START_STOP_MS: f64 = 300.0;
const COLD_START_MS: f64 = 2500.0;
const THOUSAND_RACES_S: f64 = 10.0;
const PEAK_RSS_MB: f64 = 200.0;

pub fn render(b: &BenchReport) -> String {
    let mut out = String::new();
    let mode = if b.quick { " (--quick)" } else { "" };
    let _ = writeln!(out, "{}{}", strong("idem bench"), strong(mode));
    let _ = writeln!(
        out,
        "{}\n",
        dim(format!("PostgreSQL {} · {} cores", b.postgres, b.cores))
    );
    cluster(&mut out, b);
    race_rate(&mut out, b);
    process(&mut out, b);
    client(&mut out, b);
    throughput(&mut out, b);
    over_http(&mut out, b);
    release(&mut out, b);
    hot_key(&mut out, b);
    scale(&mut out, b);
    replication(&mut out, b);
    engines(&mut out, b);
    stores(&mut out, b);
    let _ = writeln!(
        out,
        "\npeak memory of the idem process: {:.1} MB  {}",
        b.peak_rss_mb,
        verdict(b.peak_rss_mb <= PEAK_RSS_MB)
    );
    out
}

/// The disposable cluster's start and stop against their targets.
fn cluster(out: &mut String, b: &BenchReport) {
    if let Some(c) = &b.cluster {
        let warm = c.warm_start_ms + c.stop_ms;
        let rows = vec![
            row(
                "cold start (initdb + copy + start)",
                ms(c.cold_start_ms),
                c.cold_start_ms <= COLD_START_MS,
                "≤ 2.5 s",
            ),
            vec![
                "warm start (copy + start)".into(),
                ms(c.warm_start_ms),
                String::new(),
                String::new(),
            ],
            vec![
                "stop (immediate shutdown + remove)".into(),
                ms(c.stop_ms),
                String::new(),
                String::new(),
            ],
            row(
                "warm start + stop",
                ms(warm),
                warm <= WARM_START_STOP_MS,
                "≤ 300 ms",
            ),
        ];
        let title = format!(
            "disposable cluster, medians of {} cold and {} warm starts",
            c.cold_samples, c.warm_samples
        );
        section(out, &title, &["", "median", "target", "met"], rows, &[1]);
        out.push_str("\n\n");
    }
}

/// Races back to back: how many a second, and the XP rows they showed.
fn race_rate(out: &mut String, b: &BenchReport) {
    if b.race_rate.is_empty() {
        return;
    }
    let rows = b
        .race_rate
        .iter()
        .map(|r| {
            // X ms per race is X s per thousand races.
            let thousand_s = r.ms_per_race;
            vec![
                r.strategy.name().to_string(),
                r.races.to_string(),
                format!("{:.0}", r.races_per_s),
                format!("{:.2} ms", r.ms_per_race),
                format!("{thousand_s:.1} s"),
                verdict(thousand_s <= THOUSAND_RACES_S),
                histogram(&r.xp_rows),
            ]
        })
        .collect();
    section(
        out,
        "race rate: default races back to back, --work-ms 0",
        &[
            "strategy",
            "races",
            "races/s",
            "per race",
            "1000 races",
            "≤ 10 s",
            "XP rows",
        ],
        rows,
        &[1, 2, 3, 4],
    );
    out.push_str("\n\n");
}

/// Requests a second per strategy against the raw statement.
fn throughput(out: &mut String, b: &BenchReport) {
    if b.throughput.is_empty() {
        return;
    }
    let rows = b
        .throughput
        .iter()
        .map(|t| {
            let (ratio, target) = match (t.ratio_to_raw, t.what.as_str()) {
                (None, _) => ("1.00".to_string(), String::new()),
                (Some(r), "insert-unique") => {
                    (format!("{r:.2}"), format!("≥ 0.7 {}", verdict(r >= 0.7)))
                }
                (Some(r), "claim-work-complete") => {
                    (format!("{r:.2}"), format!("≥ 0.3 {}", verdict(r >= 0.3)))
                }
                (Some(r), _) => (format!("{r:.2}"), String::new()),
            };
            vec![
                format!("{}/{}", t.workers, t.pool_size),
                t.what.clone(),
                t.requests.to_string(),
                format!("{:.0}", t.per_second),
                ratio,
                target,
            ]
        })
        .collect();
    section(
        out,
        "throughput: distinct keys, --work-ms 0, against the raw INSERT ... ON CONFLICT DO NOTHING",
        &[
            "workers/pool",
            "requests as",
            "requests",
            "per second",
            "× raw",
            "target",
        ],
        rows,
        &[2, 3, 4],
    );
    out.push_str("\n\n");
}

/// Whole `idem race` processes: start, race, stop.
fn process(out: &mut String, b: &BenchReport) {
    let Some(p) = &b.process else {
        return;
    };
    section(
        out,
        "idem race, the whole process (disposable cluster start, race, stop), beside \
         the cluster's own warm start and stop, each run paired with one",
        &[
            "runs",
            "median",
            "fastest",
            "slowest",
            "cluster",
            "ratio",
            "≤ 1.3×",
        ],
        vec![vec![
            p.runs.to_string(),
            ms(p.median_ms),
            ms(p.min_ms),
            ms(p.max_ms),
            ms(p.cluster_median_ms),
            format!("{}×", cut(p.ratio)),
            verdict(p.ratio <= PROCESS_RATIO),
        ]],
        &[0, 1, 2, 3, 4, 5],
    );
    out.push_str("\n\n");
}

/// A ratio with two decimals, cut rather than rounded, so that 0.899
/// reads 0.89 beside its "no".
fn cut(ratio: f64) -> String {
    format!("{:.2}", (ratio * 100.0).floor() / 100.0)
}

/// idem's loop against pgbench on the same statements; statements per request.
fn client(out: &mut String, b: &BenchReport) {
    let Some(c) = &b.client else {
        return;
    };
    let rows = c
        .rows
        .iter()
        .map(|r| {
            vec![
                r.what.clone(),
                format!("{:.0}", r.idem_per_second),
                r.against.clone(),
                r.against_per_second
                    .map_or("—".into(), |p| format!("{p:.0}")),
                r.ratio.map_or("—".into(), cut),
                r.ratio_spread.map_or("—".into(), |(low, high)| {
                    format!("{}–{}", cut(low), cut(high))
                }),
                r.ratio
                    .map_or(String::new(), |x| verdict(x >= CLIENT_TARGET)),
                format!(
                    "{:.0} / {}",
                    r.idem_cpu_us,
                    r.against_cpu_us.map_or("—".into(), |c| format!("{c:.0}"))
                ),
            ]
        })
        .collect();
    section(
        out,
        &format!(
            "idem's request loop against the same statements: {} clients, {} s each (pgbench -M prepared); medians of {} rounds, spread from the lowest round to the highest",
            c.clients, c.seconds, c.rounds
        ),
        &[
            "idem sends",
            "idem /s",
            "against",
            "its /s",
            "ratio",
            "spread",
            "≥ 0.9",
            "client CPU µs/req",
        ],
        rows,
        &[1, 3, 4, 5, 7],
    );
    out.push('\n');
    let _ = writeln!(
        out,
        "{}",
        dim(
            "bare: the same statements prepared once and sent straight through tokio-postgres, nothing of idem's around them; pgbench sends them through libpq"
        )
    );
    let counts = c
        .statements
        .iter()
        .map(|t| format!("{} {:.1}", t.what, t.statements_per_request))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "{}\n",
        dim(format!(
            "statements per request: {counts} (the guard's BEGIN and COMMIT travel with the statements beside them: 3 round trips)"
        ))
    );
}

/// The guard through the app over HTTP, against the guard in-process.
fn over_http(out: &mut String, b: &BenchReport) {
    let Some(w) = &b.over_http else {
        return;
    };
    section(
        out,
        "over the wire: the guard through idem serve's app (keep-alive clients) and in-process, same pool",
        &[
            "clients/pool",
            "requests",
            "over HTTP /s",
            "in-process /s",
            "× in-process",
        ],
        vec![vec![
            format!("{}/{}", w.clients, w.pool_size),
            w.requests.to_string(),
            format!("{:.0}", w.http_per_second),
            format!("{:.0}", w.in_process_per_second),
            format!("{:.2}", w.ratio),
        ]],
        &[1, 2, 3, 4],
    );
    out.push_str("\n\n");
}

/// The probe's release modes, as a loopback server saw the requests end.
fn release(out: &mut String, b: &BenchReport) {
    if b.release.is_empty() {
        return;
    }
    let rows = b
        .release
        .iter()
        .map(|r| {
            let one_read = match r.mode.in_one_write() {
                true => format!("{}/{}", r.in_one_read, r.bursts),
                false => "—".into(),
            };
            vec![
                r.mode.name().to_string(),
                format!("{}{}", r.protocol.name(), if r.tls { " + TLS" } else { "" }),
                r.requests.to_string(),
                format!("{:.0}", r.median_us),
                format!("{:.0}", r.p90_us),
                one_read,
                format!("{:.0}", r.client_median_us),
            ]
        })
        .collect();
    section(
        out,
        "release: from the first to the last request's final byte at the server, µs (bursts each)",
        &[
            "mode", "protocol", "N", "median", "p90", "one read", "client",
        ],
        rows,
        &[2, 3, 4, 6],
    );
    if !b.release.iter().any(|r| r.tls) {
        out.push_str(
            "\nover TLS: not measured; this idem was built without the https-bench feature \
             (cargo build --release --features https-bench)",
        );
    }
    out.push_str("\n\n");
}

/// Every request on one key at once: latencies and the one XP row.
fn hot_key(out: &mut String, b: &BenchReport) {
    if b.hot_key.is_empty() {
        return;
    }
    let rows = b
        .hot_key
        .iter()
        .map(|h| {
            vec![
                h.strategy.name().to_string(),
                h.requests.to_string(),
                format!("{:.1} ms", h.p50_ms),
                format!("{:.1} ms", h.p99_ms),
                h.xp_rows.to_string(),
                verdict(h.xp_rows == 1),
            ]
        })
        .collect();
    section(
        out,
        "hot key: every request on one key at once, pool 50, --work-ms 0",
        &["strategy", "requests", "p50", "p99", "XP rows", "= 1"],
        rows,
        &[1, 2, 3, 4],
    );
    out.push_str("\n\n");
}

/// A request with a hot standby: asynchronous, then remote_apply, and what
/// the wait for the standby multiplies a request's time by.
fn replication(out: &mut String, b: &BenchReport) {
    let [off, remote] = b.replication.as_slice() else {
        return;
    };
    let rows = b
        .replication
        .iter()
        .map(|r| {
            vec![
                r.synchronous.name().to_string(),
                r.requests.to_string(),
                format!("{:.2} ms", r.p50_ms),
                format!("{:.2} ms", r.p99_ms),
            ]
        })
        .collect();
    section(
        out,
        "replication: claim-work-complete, one request at a time, a hot standby on this machine",
        &["synchronous", "requests", "p50", "p99"],
        rows,
        &[1, 2, 3],
    );
    let _ = writeln!(
        out,
        "
{}",
        dim(format!(
            "remote_apply / off: {:.2}× the median request (a claim and a completion, each \
             a commit that waits for the standby to apply it)",
            remote.p50_ms / off.p50_ms.max(f64::MIN_POSITIVE)
        ))
    );
    out.push('\n');
}

/// One race of many workers: wall time and the XP rows.
fn scale(out: &mut String, b: &BenchReport) {
    if b.scale.is_empty() {
        return;
    }
    let rows = b
        .scale
        .iter()
        .map(|s| {
            vec![
                s.strategy.name().to_string(),
                s.workers.to_string(),
                s.pool_size.to_string(),
                format!("{:.0} ms", s.wall_ms),
                format!("{} (expected {})", s.xp_rows, s.expected_xp_rows),
                verdict(s.xp_rows == s.expected_xp_rows),
                s.checkout_timeouts.to_string(),
            ]
        })
        .collect();
    section(
        out,
        "scale: one race, many workers on one key, --work-ms 0",
        &[
            "strategy", "workers", "pool", "wall", "XP rows", "right", "timeouts",
        ],
        rows,
        &[1, 2, 3, 6],
    );
    out.push('\n');
}

/// `idem race` as a whole process over the cluster's own start and stop:
/// what idem may add to the server it needs.
const PROCESS_RATIO: f64 = 1.3;

/// idem's loop against its reference.
const CLIENT_TARGET: f64 = crate::bench::versus_pgbench::TARGET;

/// A row of (name, median, target, met).
/// MariaDB beside PostgreSQL: its server's start and stop, whole races,
/// and how often each gives lesson 1's figure.
fn engines(out: &mut String, b: &BenchReport) {
    let Some(e) = &b.engines else {
        return;
    };
    let m = &e.mariadb;
    let p = &e.processes;
    let mut rows = vec![
        vec![
            "MariaDB cold start (install + copy + start)".into(),
            ms(m.cold_start_ms),
            String::new(),
            String::new(),
        ],
        vec![
            "MariaDB warm start (copy + start)".into(),
            ms(m.warm_start_ms),
            String::new(),
            String::new(),
        ],
        vec![
            "MariaDB stop (kill + remove)".into(),
            ms(m.stop_ms),
            String::new(),
            String::new(),
        ],
    ];
    for p in [&e.processes, &e.explore] {
        rows.push(vec![
            format!("{}, whole process, PostgreSQL", p.command),
            ms(p.postgres_median_ms),
            String::new(),
            String::new(),
        ]);
        rows.push(row(
            &format!("{} --engine mariadb, whole process", p.command),
            format!("{} ({:.2}×)", ms(p.mariadb_median_ms), p.ratio),
            p.ratio <= 2.0,
            "≤ 2× PostgreSQL's",
        ));
    }
    for f in &e.lesson_one {
        rows.push(row(
            &format!("lesson 1's figure (1 key, 4 XP rows), {}", f.engine),
            format!("{} of {} ({:.0}%)", f.hits, f.runs, f.rate * 100.0),
            f.rate >= 0.95,
            "≥ 95%",
        ));
    }
    if let Some(c) = &e.cluster {
        rows.push(vec![
            format!(
                "idem race --engine mariadb --nodes 3, whole process ({} runs)",
                c.runs
            ),
            ms(c.median_ms),
            String::new(),
            String::new(),
        ]);
        rows.push(row(
            &format!(
                "the race alone on the cluster, beside one server ({} races each)",
                c.races
            ),
            format!(
                "{} against {} ({:.2}×)",
                ms(c.race_median_ms),
                ms(c.one_server_race_median_ms),
                c.race_ratio
            ),
            c.race_ratio <= 3.0,
            "≤ 3× one server's",
        ));
    }
    let title = format!(
        "engines: MariaDB {} beside PostgreSQL ({} cold, {} warm starts; {} pairs of each \
         command)",
        m.version, m.cold_samples, m.warm_samples, p.runs
    );
    section(out, &title, &["", "median", "target", "met"], rows, &[1]);
    out.push_str("\n\n");
}

/// Claims in Redis beside claims in the key table.
fn stores(out: &mut String, b: &BenchReport) {
    let Some(s) = &b.stores else {
        return;
    };
    let mut rows = vec![
        vec![
            "idem race -s claim-work-complete --store table, whole process".into(),
            ms(s.table_process_ms),
            String::new(),
            String::new(),
        ],
        row(
            "the same with --store redis (its redis-server included)",
            format!("{} ({:.2}×)", ms(s.redis_process_ms), s.process_ratio),
            s.process_ratio <= 1.5,
            "≤ 1.5× the table's",
        ),
    ];
    for c in &s.claims {
        rows.push(vec![
            format!("the claim, {} ({} requests)", c.claim, c.requests),
            format!("{:.3} / {:.3} ms", c.p50_ms, c.p99_ms),
            String::new(),
            String::new(),
        ]);
    }
    let title = format!(
        "stores: a claim in Redis beside the key table ({} pairs of processes; claims p50 / p99)",
        s.processes
    );
    section(out, &title, &["", "median", "target", "met"], rows, &[1]);
    out.push_str("\n\n");
}

fn row(name: &str, value: String, met: bool, target: &str) -> Vec<String> {
    vec![name.to_string(), value, target.to_string(), verdict(met)]
}

fn ms(v: f64) -> String {
    format!("{v:.0} ms")
}

fn verdict(met: bool) -> String {
    if met {
        good("yes").to_string()
    } else {
        bad("no").to_string()
    }
}

/// A section: its title in bold, then its table.
fn section(
    out: &mut String,
    title: &str,
    header: &[&str],
    rows: Vec<Vec<String>>,
    right: &[usize],
) {
    let _ = writeln!(out, "{}", strong(title));
    out.push_str(&table::render(header, rows, right));
}
