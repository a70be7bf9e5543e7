"""OS-Themis outcome critic (selector, verifier, reviewer, judge), the last-K and sequential
baselines, and critic metrics.

Empty until the critic lands."""
