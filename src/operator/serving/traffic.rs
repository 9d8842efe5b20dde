//! Where a predictor's requests go, decided again on every change of its revisions' readiness.
//! Pure.
//!
//! The rolled-out revision is the one the last promotion gave all traffic to. The latest
//! revision (the one the current spec makes) gets `canaryTrafficPercent` of the requests, the
//! rolled-out one the rest, but only while the latest is ready: until then, and again whenever
//! it stops being ready, the rolled-out revision takes everything (`Held`). A spec without
//! `canaryTrafficPercent` (or with 100) promotes the latest once it is ready. A revision that
//! neither the decision nor the gateway's route still sends to is retired; one the route
//! may still send to waits until the gateway has taken the new route.

/// A revision of the predictor and whether its pods answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revision<'a> {
    pub name: &'a str,
    pub ready: bool,
}

/// What the decision reads.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The revision of the current spec.
    pub latest: &'a str,
    /// Every revision there is (the latest among them once created).
    pub revisions: &'a [Revision<'a>],
    /// The status' `latestRolledoutRevision`.
    pub rolled_out: Option<&'a str>,
    /// The status' `previousRolledoutRevision`.
    pub previous_rolled_out: Option<&'a str>,
    pub canary_percent: Option<i64>,
    /// The revisions the gateway may still send requests to: every one until it has taken the
    /// route's latest generation (and a drain has passed), then those that route names.
    pub routed: &'a [&'a str],
}

/// Why the latest revision gets less than the spec asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The latest revision, not ready.
    pub revision: String,
    /// The revision that keeps the traffic instead.
    pub keeps: String,
    /// The share the spec asks for the latest.
    pub asked: i64,
}

/// Where requests go, and what changes with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Each revision that gets requests, with its percent (summing to 100).
    pub traffic: Vec<(String, i64)>,
    pub rolled_out: Option<String>,
    pub previous_rolled_out: Option<String>,
    pub held: Option<Held>,
    /// Revisions nothing sends to any more: their Deployments and Services go.
    pub retire: Vec<String>,
}

/// Decide where requests go.
pub fn decide(observed: &Observed) -> Decision {
    let ready = |name: &str| (observed.revisions.iter()).any(|r| r.name == name && r.ready);
    let exists = |name: &&str| observed.revisions.iter().any(|r| r.name == *name);
    let latest = observed.latest;
    let stable = observed.rolled_out.filter(exists).filter(|s| *s != latest);
    let asked = observed.canary_percent.unwrap_or(100).clamp(0, 100);
    let mut decision = Decision {
        traffic: vec![(latest.to_owned(), 100)],
        rolled_out: observed.rolled_out.map(str::to_owned),
        previous_rolled_out: observed.previous_rolled_out.map(str::to_owned),
        held: None,
        retire: Vec::new(),
    };
    match stable {
        // The first revision, or the rolled-out one again: it takes everything.
        None => {
            if ready(latest) && observed.rolled_out != Some(latest) {
                promote(&mut decision, latest, observed.rolled_out);
            }
        }
        Some(stable) if !ready(latest) => {
            decision.traffic = vec![(stable.to_owned(), 100)];
            decision.held = (asked > 0).then(|| Held {
                revision: latest.to_owned(),
                keeps: stable.to_owned(),
                asked,
            });
        }
        Some(stable) if asked >= 100 => promote(&mut decision, latest, Some(stable)),
        Some(stable) => {
            decision.traffic = [(latest, asked), (stable, 100 - asked)]
                .into_iter()
                .filter(|(_, percent)| *percent > 0)
                .map(|(name, percent)| (name.to_owned(), percent))
                .collect();
        }
    }
    let kept = |name: &str| {
        name == latest
            || decision.rolled_out.as_deref() == Some(name)
            || decision.traffic.iter().any(|(n, _)| n == name)
            || observed.routed.contains(&name)
    };
    decision.retire = (observed.revisions.iter())
        .filter(|r| !kept(r.name))
        .map(|r| r.name.to_owned())
        .collect();
    decision
}

/// Give `latest` all traffic and record it as rolled out, `before` as the previous.
fn promote(decision: &mut Decision, latest: &str, before: Option<&str>) {
    decision.traffic = vec![(latest.to_owned(), 100)];
    decision.rolled_out = Some(latest.to_owned());
    if let Some(before) = before.filter(|b| *b != latest) {
        decision.previous_rolled_out = Some(before.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(name: &str, ready: bool) -> Revision<'_> {
        Revision { name, ready }
    }

    fn observed<'a>(
        latest: &'a str,
        revisions: &'a [Revision<'a>],
        rolled_out: Option<&'a str>,
        canary: Option<i64>,
    ) -> Observed<'a> {
        Observed {
            latest,
            revisions,
            rolled_out,
            previous_rolled_out: None,
            canary_percent: canary,
            routed: &[],
        }
    }

    fn traffic(decision: &Decision) -> Vec<(&str, i64)> {
        decision
            .traffic
            .iter()
            .map(|(n, p)| (n.as_str(), *p))
            .collect()
    }

    #[test]
    fn the_first_revision_takes_everything_and_is_rolled_out_once_ready() {
        let starting = [rev("r1", false)];
        let d = decide(&observed("r1", &starting, None, None));
        assert_eq!(traffic(&d), [("r1", 100)]);
        assert_eq!(d.rolled_out, None);
        let ready = [rev("r1", true)];
        let d = decide(&observed("r1", &ready, None, Some(10)));
        assert_eq!(traffic(&d), [("r1", 100)], "nothing to split with");
        assert_eq!(d.rolled_out.as_deref(), Some("r1"));
    }

    #[test]
    fn a_canary_gets_its_share_only_while_it_is_ready() {
        let waiting = [rev("r1", true), rev("r2", false)];
        let d = decide(&observed("r2", &waiting, Some("r1"), Some(10)));
        assert_eq!(traffic(&d), [("r1", 100)]);
        assert_eq!(
            d.held,
            Some(Held {
                revision: "r2".into(),
                keeps: "r1".into(),
                asked: 10
            })
        );
        assert!(d.retire.is_empty(), "neither is retired: {:?}", d.retire);
        let ready = [rev("r1", true), rev("r2", true)];
        let d = decide(&observed("r2", &ready, Some("r1"), Some(10)));
        assert_eq!(traffic(&d), [("r2", 10), ("r1", 90)]);
        assert_eq!(
            d.rolled_out.as_deref(),
            Some("r1"),
            "a canary is not rolled out"
        );
        assert_eq!(d.held, None);
    }

    #[test]
    fn promotion_waits_for_the_latest_then_retires_the_old_once_unrouted() {
        let waiting = [rev("r1", true), rev("r2", false)];
        let d = decide(&observed("r2", &waiting, Some("r1"), None));
        assert_eq!(traffic(&d), [("r1", 100)]);
        assert_eq!(d.rolled_out.as_deref(), Some("r1"));
        let ready = [rev("r1", true), rev("r2", true)];
        let mut o = observed("r2", &ready, Some("r1"), Some(100));
        o.routed = &["r1", "r2"];
        let d = decide(&o);
        assert_eq!(traffic(&d), [("r2", 100)]);
        assert_eq!(
            (d.rolled_out.as_deref(), d.previous_rolled_out.as_deref()),
            (Some("r2"), Some("r1"))
        );
        assert!(d.retire.is_empty(), "the gateway may still send to r1");
        let o = observed("r2", &ready, Some("r2"), None);
        let d = decide(&o);
        assert_eq!(d.retire, ["r1"]);
    }

    #[test]
    fn a_canary_that_turns_unready_gives_its_share_back() {
        let unready = [rev("r1", true), rev("r2", false)];
        let mut o = observed("r2", &unready, Some("r1"), Some(30));
        o.routed = &["r1", "r2"];
        let d = decide(&o);
        assert_eq!(traffic(&d), [("r1", 100)]);
        assert!(d.held.is_some());
        assert!(d.retire.is_empty());
    }

    #[test]
    fn a_canary_replaced_by_a_newer_one_is_retired_and_zero_percent_keeps_the_stable() {
        let revisions = [rev("r1", true), rev("r2", true), rev("r3", true)];
        let d = decide(&observed("r3", &revisions, Some("r1"), Some(20)));
        assert_eq!(traffic(&d), [("r3", 20), ("r1", 80)]);
        assert_eq!(d.retire, ["r2"]);
        let d = decide(&observed("r3", &revisions, Some("r1"), Some(0)));
        assert_eq!(traffic(&d), [("r1", 100)]);
        assert_eq!(d.held, None, "0% is asked, not held");
    }

    #[test]
    fn a_rolled_out_revision_that_is_gone_leaves_the_latest_alone() {
        let revisions = [rev("r2", false)];
        let d = decide(&observed("r2", &revisions, Some("r1"), Some(10)));
        assert_eq!(traffic(&d), [("r2", 100)]);
    }
}
