//! Reading a `/metrics` scrape: the value of a series by name and labels.

/// The sum of every series named `name` whose labels include all of `labels` (`None`: no such
/// series in `text`). Label order does not matter; values with `,` or `"` are not expected.
pub(crate) fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if series_name != name {
            continue;
        }
        let pairs: Vec<(&str, &str)> = series_labels
            .split("\",")
            .filter(|p| !p.is_empty())
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                Some((k, v.trim_matches('"')))
            })
            .collect();
        if labels.iter().all(|wanted| pairs.contains(wanted)) {
            let value: f64 = value.parse().unwrap_or(f64::NAN);
            found = Some(found.unwrap_or(0.0) + value);
        }
    }
    found
}

/// [`metric`], 0 when the series does not exist (a counter nobody incremented yet).
pub(crate) fn count(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric(text, name, labels).unwrap_or(0.0)
}

#[test]
fn series_are_found_by_name_and_labels() {
    let text = "# TYPE a counter\na{x=\"1\",y=\"2\"} 3\na{x=\"1\",y=\"5\"} 4\nab 9\nb 1.5\n";
    assert_eq!(metric(text, "a", &[("y", "2"), ("x", "1")]), Some(3.0));
    assert_eq!(metric(text, "a", &[("x", "1")]), Some(7.0));
    assert_eq!(metric(text, "a", &[("x", "2")]), None);
    assert_eq!(metric(text, "b", &[]), Some(1.5));
    assert_eq!(count(text, "c", &[]), 0.0);
}
