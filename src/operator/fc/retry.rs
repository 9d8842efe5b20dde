//! The RetryPolicy: whether a completed attempt (of the Framework or of a Task) is retried, and
//! whether the retry counts against `maxRetryCount`.

use super::api::{CompletionStatus, CompletionTypeAttribute as Attr, RetryPolicySpec};
use super::completion::NEVER_RETRIED;

/// `maxRetryCount`: retry every attempt, also a successful one (a service).
pub const ALWAYS: i32 = -2;
/// `maxRetryCount`: retry every failed attempt.
pub const ON_EVERY_FAILURE: i32 = -1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub retry: bool,
    /// Counted in `accountableRetriedCount`.
    pub accountable: bool,
    pub delay_sec: i64,
}

const NO: Decision = Decision {
    retry: false,
    accountable: true,
    delay_sec: 0,
};
const COUNTED: Decision = Decision {
    retry: true,
    accountable: true,
    delay_sec: 0,
};

/// The decision for an attempt that ended with `completion`, after `accountable_retried`
/// counted retries. `conflict_delay` is the delay of a transient conflict (the Framework's,
/// drawn at random by the caller), `None` for a Task.
pub fn decide(
    policy: &RetryPolicySpec,
    accountable_retried: i32,
    completion: &CompletionStatus,
    conflict_delay: Option<i64>,
) -> Decision {
    if NEVER_RETRIED.contains(&completion.code) {
        return NO;
    }
    let failed = completion.failed();
    if policy.fancy_retry_policy && failed {
        if completion.has(Attr::Transient) {
            let delay_sec = match conflict_delay {
                Some(delay) if completion.has(Attr::Conflict) => delay,
                _ => 0,
            };
            return Decision {
                retry: true,
                accountable: false,
                delay_sec,
            };
        }
        if completion.has(Attr::Permanent) {
            return NO;
        }
    }
    let max = policy.max_retry_count;
    if max == ALWAYS || (failed && max == ON_EVERY_FAILURE) || (failed && accountable_retried < max)
    {
        COUNTED
    } else {
        NO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::fc::completion::{self, Code};

    fn policy(fancy: bool, max: i32) -> RetryPolicySpec {
        RetryPolicySpec {
            fancy_retry_policy: fancy,
            max_retry_count: max,
        }
    }

    fn unknown_failure() -> Code {
        Code {
            code: 1,
            phrase: "ContainerUnrecognizedFailed",
            succeeded: false,
            attributes: &[],
        }
    }

    #[test]
    fn the_manuals_policies_decide_as_it_says() {
        let transient = completion::CONTAINER_TRANSIENT_FAILED.status("");
        let permanent = completion::CONTAINER_PERMANENT_FAILED.status("");
        let unknown = unknown_failure().status("");
        let success = completion::SUCCEEDED.status("");
        let table = [
            // (policy, counted so far, completion, retry, accountable)
            (policy(false, 0), 0, &unknown, false, true),
            (policy(false, 0), 0, &transient, false, true),
            (policy(false, -2), 7, &success, true, true),
            (policy(false, -1), 7, &unknown, true, true),
            (policy(false, -1), 0, &success, false, true),
            (policy(true, 3), 9, &transient, true, false),
            (policy(true, 3), 2, &unknown, true, true),
            (policy(true, 3), 3, &unknown, false, true),
            (policy(true, 3), 0, &permanent, false, true),
            (policy(true, 0), 0, &transient, true, false),
            (policy(true, 0), 0, &unknown, false, true),
            (policy(false, 1), 0, &permanent, true, true),
        ];
        for (i, (policy, counted, completion, retry, accountable)) in table.into_iter().enumerate()
        {
            let d = decide(&policy, counted, completion, None);
            assert_eq!((d.retry, d.accountable), (retry, accountable), "row {i}");
        }
    }

    #[test]
    fn stop_completion_and_scale_down_are_never_retried() {
        for code in [
            completion::STOP_FRAMEWORK_REQUESTED,
            completion::FRAMEWORK_ATTEMPT_COMPLETION,
            completion::DELETE_TASK_REQUESTED,
        ] {
            assert!(!decide(&policy(false, -2), 0, &code.status(""), None).retry);
        }
    }

    #[test]
    fn only_the_framework_backs_off_a_transient_conflict() {
        let conflict = completion::CONTAINER_TRANSIENT_CONFLICT_FAILED.status("");
        assert_eq!(
            decide(&policy(true, 0), 0, &conflict, Some(77)).delay_sec,
            77
        );
        assert_eq!(decide(&policy(true, 0), 0, &conflict, None).delay_sec, 0);
    }
}
